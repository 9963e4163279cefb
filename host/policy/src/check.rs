//! Semantic checks of each policy file, beyond its JSON Schema, and across
//! files. Every problem carries the JSON pointer of the value at fault.

use crate::files::{
    BudgetsFile, CallersFile, Comparison, ContextFile, DispatchFile, EnvelopesFile, RiskFile,
};
use hcp_contracts::Problem;
use hcp_contracts::problem::pointer_token as tok;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Whether `pointer` is a JSON pointer (RFC 6901): empty, or `/`-separated
/// tokens where `~` is always followed by `0` or `1`.
pub(crate) fn is_pointer(pointer: &str) -> bool {
    (pointer.is_empty() || pointer.starts_with('/'))
        && pointer
            .split('~')
            .skip(1)
            .all(|rest| rest.starts_with('0') || rest.starts_with('1'))
}

pub(crate) fn callers(file: &CallersFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut ids = BTreeSet::new();
    let mut credentials = BTreeMap::new();
    let mut amqp_users = BTreeMap::new();
    for (i, caller) in file.callers.iter().enumerate() {
        if let Some(user) = &caller.amqp_user {
            if user.is_empty() || user.len() > 255 || user.chars().any(char::is_control) {
                problems.push(Problem::new(
                    format!("/callers/{i}/amqp_user"),
                    "a broker user name is 1 to 255 characters, none of them control characters"
                        .to_owned(),
                ));
            } else if let Some(other) = amqp_users.insert(user.as_str(), &caller.id) {
                problems.push(Problem::new(
                    format!("/callers/{i}/amqp_user"),
                    format!(
                        "broker user {user:?} is already caller {other}'s: one broker user is one caller"
                    ),
                ));
            }
        }
        if let Some(pattern) = &caller.amqp_reply_to {
            if caller.amqp_user.is_none() {
                problems.push(Problem::new(
                    format!("/callers/{i}/amqp_reply_to"),
                    "amqp_reply_to without amqp_user: the caller cannot submit over AMQP"
                        .to_owned(),
                ));
            }
            if let Err(e) = crate::reply_to::compile(pattern) {
                problems.push(Problem::new(format!("/callers/{i}/amqp_reply_to"), e));
            }
        }
        if !ids.insert(&caller.id) {
            problems.push(Problem::new(
                format!("/callers/{i}/id"),
                format!("caller {} is listed twice", caller.id),
            ));
        }
        if let Some(other) = credentials.insert(caller.credential.to_string(), &caller.id) {
            problems.push(Problem::new(
                format!("/callers/{i}/credential"),
                format!("the same credential as caller {other}: every caller needs its own token"),
            ));
        }
    }
    problems
}

pub(crate) fn risk(file: &RiskFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, profile) in &file.capabilities {
        let mut ids = BTreeSet::new();
        for (i, rule) in profile.rules.iter().enumerate() {
            let at =
                |field: &str| format!("/capabilities/{}/rules/{i}/{field}", tok(name.as_str()));
            let mut problem =
                |field: &str, message: String| problems.push(Problem::new(at(field), message));
            if !ids.insert(&rule.id) {
                problem(
                    "id",
                    format!("rule {} is defined twice for {name}", rule.id),
                );
            }
            if !is_pointer(&rule.pointer) {
                problem(
                    "pointer",
                    format!(
                        "{:?} is not a JSON pointer (~ must be followed by 0 or 1)",
                        rule.pointer
                    ),
                );
            }
            match rule.op {
                op if op.is_ordering() && !rule.value.is_number() => problem(
                    "value",
                    format!("{} compares numbers: value must be a number", op_name(op)),
                ),
                Comparison::In if !matches!(&rule.value, Value::Array(a) if !a.is_empty()) => {
                    problem("value", "in needs a non-empty array of values".to_owned());
                }
                _ => {}
            }
            match (rule.unit, rule.op.is_ordering()) {
                (Some(_), false) => problem(
                    "unit",
                    format!(
                        "units apply to gt, ge, lt and le only, not {}",
                        op_name(rule.op)
                    ),
                ),
                (None, _) => {
                    if rule.unit_pointer.is_some() {
                        problem(
                            "unit_pointer",
                            "needs unit: the unit value is in".to_owned(),
                        );
                    }
                    if rule.unit_default.is_some() {
                        problem(
                            "unit_default",
                            "needs unit: the unit value is in".to_owned(),
                        );
                    }
                }
                (Some(unit), true) => {
                    if let Some(default) = rule.unit_default
                        && default.quantity() != unit.quantity()
                    {
                        problem(
                            "unit_default",
                            format!(
                                "{default} does not convert to {unit} (use one of {})",
                                unit.siblings()
                            ),
                        );
                    }
                }
            }
            if let Some(p) = &rule.unit_pointer
                && !is_pointer(p)
            {
                problem(
                    "unit_pointer",
                    format!("{p:?} is not a JSON pointer (~ must be followed by 0 or 1)"),
                );
            }
            if let Some(base) = profile.base
                && rule.raises_to <= base
            {
                problem(
                    "raises_to",
                    format!(
                        "{} is not above the base {base}: the rule could never raise the level",
                        rule.raises_to
                    ),
                );
            }
        }
    }
    problems
}

fn op_name(op: Comparison) -> &'static str {
    match op {
        Comparison::Gt => "gt",
        Comparison::Ge => "ge",
        Comparison::Lt => "lt",
        Comparison::Le => "le",
        Comparison::Eq => "eq",
        Comparison::Ne => "ne",
        Comparison::In => "in",
    }
}

pub(crate) fn context(file: &ContextFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, w) in file.unattended_hours.iter().enumerate() {
        if !ids.insert(&w.id) {
            problems.push(Problem::new(
                format!("/unattended_hours/{i}/id"),
                format!("window {} is defined twice", w.id),
            ));
        }
        if w.from.minutes() == 24 * 60 {
            problems.push(Problem::new(
                format!("/unattended_hours/{i}/from"),
                "24:00 can only end a window: start it at 00:00",
            ));
        } else if w.from == w.to {
            problems.push(Problem::new(
                format!("/unattended_hours/{i}/to"),
                format!(
                    "a window from {} to {} is empty: for a whole day write 00:00 to 24:00",
                    w.from, w.to
                ),
            ));
        }
    }
    problems
}

pub(crate) fn envelopes(file: &EnvelopesFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, envelope) in &file.capabilities {
        for (param, bounds) in &envelope.parameters {
            if let (Some(min), Some(max)) = (bounds.min, bounds.max)
                && min > max
            {
                problems.push(Problem::new(
                    format!(
                        "/capabilities/{}/parameters/{}",
                        tok(name.as_str()),
                        tok(param)
                    ),
                    format!("min {min} is above max {max}: nothing would be allowed"),
                ));
            }
        }
    }
    problems
}

/// Budgets name callers that `callers.json` defines.
pub(crate) fn budgets_callers(budgets: &BudgetsFile, callers: &CallersFile) -> Vec<Problem> {
    let known: BTreeSet<_> = callers.callers.iter().map(|c| &c.id).collect();
    let submissions = budgets
        .submissions
        .iter()
        .flat_map(|s| s.callers.keys())
        .map(|id| (format!("/submissions/callers/{}", tok(id.as_str())), id));
    budgets
        .callers
        .keys()
        .map(|id| (format!("/callers/{}", tok(id.as_str())), id))
        .chain(submissions)
        .filter(|(_, id)| !known.contains(id))
        .map(|(at, id)| Problem::new(at, format!("no caller {id} in callers.json")))
        .collect()
}

/// `dispatch.json`: no call turned off twice for one capability.
pub(crate) fn dispatch(file: &DispatchFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (name, o) in &file.capabilities {
        let mut seen = BTreeSet::new();
        for (i, op) in o.denied_calls.iter().enumerate() {
            if !seen.insert(*op) {
                problems.push(Problem::new(
                    format!("/capabilities/{}/denied_calls/{i}", tok(name.as_str())),
                    format!("{op} is listed twice"),
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers() {
        for ok in ["", "/a", "/a~0b/~1c", "/0"] {
            assert!(is_pointer(ok), "{ok}");
        }
        for bad in ["a", "/a~2", "/a~"] {
            assert!(!is_pointer(bad), "{bad}");
        }
    }
}
