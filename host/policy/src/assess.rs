//! Risk assessment: the base level, input-driven escalation rules, and
//! unattended hours. Pure: the caller passes the time.

use crate::files::{Comparison, EscalationRule, UnattendedRule, Weekday};
use crate::ids::RuleId;
use crate::units::{Unit, number};
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::{Declaration, FloorSource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

/// Where the base level came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaseSource {
    /// Nothing set one: R1.
    Default,
    /// The declaration's `safety.risk_floor`.
    Declaration,
    /// The declaration's `safety.involves_physical_resources` (R4, seed
    /// 000), with no `risk_floor` declared and no `base` in `risk.json`.
    Physical,
    /// `risk.json`'s `base` for the capability.
    Policy,
}

impl BaseSource {
    /// Where, in words: `risk.json`, `the declaration's risk_floor`, `default`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Declaration => "the declaration's risk_floor",
            Self::Physical => "the declaration's involves_physical_resources",
            Self::Policy => "risk.json",
        }
    }
}

/// What kind of rule fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSource {
    /// An escalation rule of `risk.json` on the task's inputs.
    Input,
    /// An unattended-hours window of `context.json`.
    UnattendedHours,
}

/// A rule that matched the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FiredRule {
    /// The rule's id.
    pub id: RuleId,
    /// Which file it comes from.
    pub source: RuleSource,
    /// The level it raises the task to.
    pub raises_to: RiskLevel,
    /// What matched, e.g. `temperature_range.max 1200°C > 800°C`.
    pub detail: String,
    /// How to avoid it, e.g. `reduce temperature_range.max to 800°C or below`.
    pub remedy: String,
}

/// The outcome of risk assessment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assessment {
    /// Where assessment started.
    pub base: RiskLevel,
    /// Who set the base.
    pub base_source: BaseSource,
    /// Every rule that matched, input rules first, in file order.
    pub fired: Vec<FiredRule>,
    /// The assessed level: the highest of the base and every fired rule.
    pub level: RiskLevel,
    /// Whether an unattended-hours window applied.
    pub unattended: bool,
}

impl Assessment {
    /// How to bring the task down to `allowed`, naming each rule that takes
    /// it above: e.g. "Reduce temperature_range.max to 800°C or below to
    /// qualify for R3". `None` when the task is within `allowed`, or when
    /// its base alone is above (nothing in the task can change that).
    pub fn suggestion(&self, allowed: RiskLevel) -> Option<String> {
        if self.level <= allowed || self.base > allowed {
            return None;
        }
        let (blocking, rest): (Vec<&FiredRule>, Vec<&FiredRule>) =
            self.fired.iter().partition(|r| r.raises_to > allowed);
        let qualifies = rest.iter().map(|r| r.raises_to).fold(self.base, Ord::max);
        let remedies: Vec<&str> = blocking.iter().map(|r| r.remedy.as_str()).collect();
        let text = format!("{} to qualify for {qualifies}", remedies.join(" and "));
        let mut chars = text.chars();
        chars
            .next()
            .map(|first| first.to_uppercase().chain(chars).collect())
    }
}

/// The base level: the declaration's floor ([`Safety::floor`]: its
/// `risk_floor`, else R4 for a capability involving physical resources,
/// else R1), or the policy's `base` above R1 when one is set (a policy
/// never lowers the author's declared `risk_floor`; it may set the base of
/// a physical capability that declares none, as the operator's own
/// assessment of it).
///
/// [`Safety::floor`]: hcp_contracts::manifest::Safety::floor
pub(crate) fn base(
    declaration: &Declaration,
    policy: Option<RiskLevel>,
) -> (RiskLevel, BaseSource) {
    let (floor, source) = declaration.safety.floor();
    let mut base = match source {
        FloorSource::Default => (floor, BaseSource::Default),
        FloorSource::Declared if floor > RiskLevel::R1 => (floor, BaseSource::Declaration),
        FloorSource::Declared => (floor, BaseSource::Default),
        FloorSource::Physical => (floor, BaseSource::Physical),
    };
    let declared = declaration.safety.risk_floor.unwrap_or(RiskLevel::R1);
    if let Some(policy) = policy
        && policy >= declared
        && policy > RiskLevel::R1
    {
        base = (policy, BaseSource::Policy);
    }
    base
}

/// `/temperature_range/max` → `temperature_range.max`.
pub(crate) fn field_name(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Numbers compare by value (`800` equals `800.0`), anything else as JSON.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Evaluates one escalation rule on `inputs`. A rule whose field is absent
/// does not fire.
///
/// # Errors
///
/// An input the rule cannot compare (not a number, an unknown or
/// unconvertible unit): the task is refused as `invalid_input` rather than
/// assessed without the rule.
pub(crate) fn input_rule(
    rule: &EscalationRule,
    inputs: &Value,
) -> Result<Option<FiredRule>, String> {
    let Some(actual) = inputs.pointer(&rule.pointer) else {
        return Ok(None);
    };
    let field = field_name(&rule.pointer);
    let fired = |detail: String, remedy: String| {
        Some(FiredRule {
            id: rule.id.clone(),
            source: RuleSource::Input,
            raises_to: rule.raises_to,
            detail,
            remedy,
        })
    };
    if !rule.op.is_ordering() {
        let matches = match rule.op {
            Comparison::Eq => json_eq(actual, &rule.value),
            Comparison::Ne => !json_eq(actual, &rule.value),
            _ => rule
                .value
                .as_array()
                .is_some_and(|values| values.iter().any(|v| json_eq(actual, v))),
        };
        if !matches {
            return Ok(None);
        }
        let (value, shown) = (&rule.value, actual);
        let remedy = match rule.op {
            Comparison::Eq => format!("change {field} from {value}"),
            Comparison::Ne => format!("set {field} to {value}"),
            _ => format!("change {field} to a value other than {}", list(value)),
        };
        return Ok(fired(
            format!("{field} {shown} {} {}", rule.op.symbol(), list(value)),
            remedy,
        ));
    }
    let (Some(x), Some(bound)) = (actual.as_f64(), rule.value.as_f64()) else {
        return Err(format!(
            "{field}: {actual} is not a number, but rule {} compares it with {}",
            rule.id, rule.value
        ));
    };
    let (x, input_unit) = match rule.unit {
        None => (x, None),
        Some(unit) => {
            let input_unit = input_unit(rule, unit, inputs)?;
            let converted = input_unit.convert(x, unit).ok_or_else(|| {
                format!(
                    "{field}: {input_unit} does not convert to {unit} (rule {})",
                    rule.id
                )
            })?;
            (converted, Some(input_unit))
        }
    };
    let matches = match rule.op {
        Comparison::Gt => x > bound,
        Comparison::Ge => x >= bound,
        Comparison::Lt => x < bound,
        _ => x <= bound,
    };
    if !matches {
        return Ok(None);
    }
    let (actual_shown, bound_shown) = match (rule.unit, input_unit) {
        (Some(unit), Some(from)) if from != unit => {
            let raw = actual.as_f64().unwrap_or(x);
            let bound_there = unit.convert(bound, from).unwrap_or(bound);
            (
                format!("{} ({})", from.show(raw), unit.show(x)),
                format!("{} ({})", unit.show(bound), from.show(bound_there)),
            )
        }
        (Some(unit), _) => (unit.show(x), unit.show(bound)),
        (None, _) => (number(x), number(bound)),
    };
    let remedy = match rule.op {
        Comparison::Gt => format!("reduce {field} to {bound_shown} or below"),
        Comparison::Ge => format!("reduce {field} to below {bound_shown}"),
        Comparison::Lt => format!("raise {field} to {bound_shown} or above"),
        _ => format!("raise {field} to above {bound_shown}"),
    };
    let detail = format!(
        "{field} {actual_shown} {} {}",
        rule.op.symbol(),
        unit_or_number(rule.unit, bound)
    );
    Ok(fired(detail, remedy))
}

fn unit_or_number(unit: Option<Unit>, v: f64) -> String {
    unit.map_or_else(|| number(v), |u| u.show(v))
}

/// The unit the input is in: at `unit_pointer`, else `unit_default`, else
/// the rule's own.
fn input_unit(rule: &EscalationRule, unit: Unit, inputs: &Value) -> Result<Unit, String> {
    let found = rule.unit_pointer.as_deref().and_then(|p| inputs.pointer(p));
    let Some(found) = found else {
        return Ok(rule.unit_default.unwrap_or(unit));
    };
    let at = rule
        .unit_pointer
        .as_deref()
        .map(field_name)
        .unwrap_or_default();
    let parsed = found
        .as_str()
        .ok_or_else(|| format!("{at}: {found} is not a unit name"))?
        .parse::<Unit>()
        .map_err(|e| format!("{at}: {e}"))?;
    if parsed.quantity() != unit.quantity() {
        return Err(format!(
            "{at}: {parsed} does not convert to {unit} (use one of {})",
            unit.siblings()
        ));
    }
    Ok(parsed)
}

fn list(value: &Value) -> String {
    match value {
        Value::Array(values) => values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// Whether `now` falls in the window.
pub(crate) fn in_window(rule: &UnattendedRule, now: OffsetDateTime) -> bool {
    let local = now.to_offset(rule.utc_offset.get());
    let t = u16::from(local.hour()) * 60 + u16::from(local.minute());
    let on = |day: time::Weekday| {
        rule.days
            .as_ref()
            .is_none_or(|days| days.contains(&Weekday::from(day)))
    };
    let (from, to) = (rule.from.minutes(), rule.to.minutes());
    if from < to {
        t >= from && t < to && on(local.weekday())
    } else {
        (t >= from && on(local.weekday())) || (t < to && on(local.weekday().previous()))
    }
}

/// The fired rule of an unattended-hours window that applies at `now`.
pub(crate) fn unattended(rule: &UnattendedRule, now: OffsetDateTime) -> FiredRule {
    let local = now.to_offset(rule.utc_offset.get());
    let days = rule.days.as_ref().map_or(String::new(), |days| {
        let names: Vec<String> = days
            .iter()
            .map(|d| {
                serde_json::to_value(d)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect();
        format!("{} ", names.join(", "))
    });
    let window = format!("{days}{}–{} UTC{}", rule.from, rule.to, rule.utc_offset);
    FiredRule {
        id: rule.id.clone(),
        source: RuleSource::UnattendedHours,
        raises_to: rule.raises_to,
        detail: format!(
            "unattended hours ({window}): local time {:02}:{:02}",
            local.hour(),
            local.minute()
        ),
        remedy: format!("submit outside unattended hours ({window})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declaration(floor: Option<&str>) -> Declaration {
        let mut safety = json!({
            "risk_ceiling": "R4",
            "requires_human_approval": false,
            "involves_physical_resources": false
        });
        if let Some(floor) = floor {
            safety["risk_floor"] = json!(floor);
        }
        serde_json::from_value(json!({
            "name": "x", "version": "1.0.0", "description": "x",
            "input_schema": {}, "output_schema": {}, "safety": safety
        }))
        .expect("declaration")
    }

    #[test]
    fn base_is_the_highest_of_default_floor_and_policy() {
        assert_eq!(
            base(&declaration(None), None),
            (RiskLevel::R1, BaseSource::Default)
        );
        assert_eq!(
            base(&declaration(Some("R2")), None),
            (RiskLevel::R2, BaseSource::Declaration)
        );
        assert_eq!(
            base(&declaration(Some("R2")), Some(RiskLevel::R3)),
            (RiskLevel::R3, BaseSource::Policy)
        );
        // A policy never lowers the author's floor.
        assert_eq!(
            base(&declaration(Some("R3")), Some(RiskLevel::R2)),
            (RiskLevel::R3, BaseSource::Declaration)
        );
        assert_eq!(
            base(&declaration(None), Some(RiskLevel::R1)),
            (RiskLevel::R1, BaseSource::Default)
        );
    }

    /// Seed 000's R4 is "operations involving physical resources": a
    /// capability declaring them starts there (it started at R1 under a
    /// policy without an entry for it, and ran without the approval it
    /// requires), unless its author declares a floor or the operator's
    /// `risk.json` sets its base.
    #[test]
    fn a_physical_capability_starts_at_r4_unless_a_floor_or_a_base_is_set() {
        let physical = |floor: Option<&str>| {
            let mut d = declaration(floor);
            d.safety.involves_physical_resources = true;
            d
        };
        assert_eq!(
            base(&physical(None), None),
            (RiskLevel::R4, BaseSource::Physical)
        );
        assert_eq!(
            BaseSource::Physical.describe(),
            "the declaration's involves_physical_resources"
        );
        assert_eq!(
            base(&physical(None), Some(RiskLevel::R1)),
            (RiskLevel::R4, BaseSource::Physical)
        );
        assert_eq!(
            base(&physical(None), Some(RiskLevel::R3)),
            (RiskLevel::R3, BaseSource::Policy)
        );
        assert_eq!(
            base(&physical(Some("R2")), None),
            (RiskLevel::R2, BaseSource::Declaration)
        );
        assert_eq!(
            base(&physical(Some("R3")), Some(RiskLevel::R2)),
            (RiskLevel::R3, BaseSource::Declaration)
        );
    }

    #[test]
    fn no_suggestion_when_the_base_alone_is_too_high() {
        let assessment = Assessment {
            base: RiskLevel::R3,
            base_source: BaseSource::Policy,
            fired: Vec::new(),
            level: RiskLevel::R3,
            unattended: false,
        };
        assert_eq!(assessment.suggestion(RiskLevel::R2), None);
        assert_eq!(assessment.suggestion(RiskLevel::R3), None);
    }

    #[test]
    fn field_names_unescape_pointer_tokens() {
        assert_eq!(
            field_name("/temperature_range/max"),
            "temperature_range.max"
        );
        assert_eq!(field_name("/a~1b/c~0d/0"), "a/b.c~d.0");
    }

    #[test]
    fn every_comparison_says_how_to_avoid_it() {
        let inputs = json!({"t": 5, "m": "GaAs"});
        let rule = |op: &str, value: serde_json::Value| -> EscalationRule {
            serde_json::from_value(json!({
                "id": "r", "pointer": if value.is_number() { "/t" } else { "/m" },
                "op": op, "value": value, "raises_to": "R4"
            }))
            .expect("rule")
        };
        let remedy = |op: &str, value: serde_json::Value| {
            input_rule(&rule(op, value), &inputs)
                .expect("comparable")
                .map(|f| f.remedy)
        };
        assert_eq!(
            remedy("gt", json!(4)).as_deref(),
            Some("reduce t to 4 or below")
        );
        assert_eq!(remedy("gt", json!(5)), None);
        assert_eq!(
            remedy("ge", json!(5)).as_deref(),
            Some("reduce t to below 5")
        );
        assert_eq!(
            remedy("lt", json!(6)).as_deref(),
            Some("raise t to 6 or above")
        );
        assert_eq!(
            remedy("le", json!(5)).as_deref(),
            Some("raise t to above 5")
        );
        assert_eq!(
            remedy("eq", json!(5.0)).as_deref(),
            Some("change t from 5.0")
        );
        assert_eq!(remedy("ne", json!(4)).as_deref(), Some("set t to 4"));
        assert_eq!(remedy("ne", json!(5)), None);
        assert_eq!(
            remedy("eq", json!("GaAs")).as_deref(),
            Some("change m from \"GaAs\"")
        );
        assert_eq!(
            remedy("in", json!(["InAs", "GaAs"])).as_deref(),
            Some("change m to a value other than \"InAs\", \"GaAs\"")
        );
        assert_eq!(remedy("in", json!(["InAs"])), None);
        // An absent field does not fire.
        let absent: EscalationRule = serde_json::from_value(json!({
            "id": "r", "pointer": "/nope", "op": "gt", "value": 0, "raises_to": "R4"
        }))
        .expect("rule");
        assert_eq!(input_rule(&absent, &inputs), Ok(None));
    }
}
