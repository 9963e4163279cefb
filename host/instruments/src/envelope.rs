//! The safety-envelope guard: every value a command would set, and every
//! value an instrument reports, is checked against the session's envelope.
//!
//! A hard limit is never crossed: a command that would cross one is refused
//! before it reaches the instrument. A soft limit (`hard_limit: false`) is
//! reported as a warning. A prohibited action never runs.

use crate::units::{self, UnitError};
use hcp_contracts::manifest::{EnvelopeParameter, SafetyEnvelope};
use std::fmt;

/// Which side of a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Above `max`.
    Over,
    /// Below `min`.
    Under,
}

/// A crossed bound, or a prohibited action.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// A hard limit would be (or was) crossed.
    HardLimit {
        /// Envelope parameter.
        parameter: String,
        /// The value, in the envelope's unit.
        value: f64,
        /// The bound crossed, in the envelope's unit.
        limit: f64,
        /// The envelope's unit.
        unit: String,
        /// Over max or under min.
        side: Side,
    },
    /// A prohibited action.
    Prohibited {
        /// The action's name as the envelope lists it.
        action: String,
    },
    /// The value's unit cannot be compared with the envelope's.
    Unit {
        /// Envelope parameter.
        parameter: String,
        /// Why.
        error: UnitError,
    },
}

impl Violation {
    /// The emergency condition this violation raises: `over_<parameter>`,
    /// `under_<parameter>`, or the prohibited action's name.
    pub fn condition(&self) -> String {
        match self {
            Self::HardLimit {
                parameter,
                side: Side::Over,
                ..
            } => format!("over_{parameter}"),
            Self::HardLimit {
                parameter,
                side: Side::Under,
                ..
            } => format!("under_{parameter}"),
            Self::Prohibited { action } => action.clone(),
            Self::Unit { parameter, .. } => format!("unit_error_{parameter}"),
        }
    }

    /// Whether the violation is a breach (runs the emergency procedure) rather
    /// than a malformed command.
    pub fn is_breach(&self) -> bool {
        !matches!(self, Self::Unit { .. })
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HardLimit {
                parameter,
                value,
                limit,
                unit,
                side,
            } => {
                let (word, bound) = match side {
                    Side::Over => ("above", "max"),
                    Side::Under => ("below", "min"),
                };
                write!(
                    f,
                    "{parameter} {value} {unit} is {word} the hard limit ({bound} {limit} {unit})"
                )
            }
            Self::Prohibited { action } => write!(f, "prohibited action: {action}"),
            Self::Unit { parameter, error } => write!(f, "{parameter}: {error}"),
        }
    }
}

/// A crossed soft limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// Envelope parameter.
    pub parameter: String,
    /// What happened.
    pub message: String,
}

/// The guard of one session's effective envelope.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    envelope: SafetyEnvelope,
}

impl Guard {
    /// A guard for `envelope` (already the tighter of declaration and policy).
    pub fn new(envelope: SafetyEnvelope) -> Self {
        Self { envelope }
    }

    /// The envelope.
    pub fn envelope(&self) -> &SafetyEnvelope {
        &self.envelope
    }

    /// Checks one value of `parameter` given in `unit`. Parameters the
    /// envelope does not bound pass.
    ///
    /// # Errors
    ///
    /// A hard limit crossed, or a unit that cannot be compared.
    pub fn check(
        &self,
        parameter: &str,
        value: f64,
        unit: &str,
    ) -> Result<Option<Warning>, Violation> {
        let Some(bound) = self.envelope.parameters.get(parameter) else {
            return Ok(None);
        };
        let value = match &bound.unit {
            Some(envelope_unit) => {
                units::convert(value, unit, envelope_unit).map_err(|error| Violation::Unit {
                    parameter: parameter.to_owned(),
                    error,
                })?
            }
            None => value,
        };
        let unit = bound.unit.clone().unwrap_or_default();
        let crossed = crossed(bound, value);
        match crossed {
            None => Ok(None),
            Some((side, limit)) if bound.hard_limit => Err(Violation::HardLimit {
                parameter: parameter.to_owned(),
                value: round(value),
                limit,
                unit,
                side,
            }),
            Some((side, limit)) => Ok(Some(Warning {
                parameter: parameter.to_owned(),
                message: format!(
                    "{parameter} {} {unit} is {} the soft limit {limit} {unit}",
                    round(value),
                    if side == Side::Over { "above" } else { "below" }
                ),
            })),
        }
    }

    /// Checks an action the command would perform.
    ///
    /// # Errors
    ///
    /// The action is prohibited.
    pub fn check_action(&self, action: &str) -> Result<(), Violation> {
        if self.envelope.prohibited_actions.iter().any(|a| a == action) {
            return Err(Violation::Prohibited {
                action: action.to_owned(),
            });
        }
        Ok(())
    }

    /// The emergency procedure declared for `condition`, if any.
    pub fn procedure(&self, condition: &str) -> Option<&str> {
        self.envelope
            .emergency_procedures
            .get(condition)
            .map(String::as_str)
    }
}

/// Conversions leave float dust: a value equal to the bound in another unit
/// must not read as crossing it.
fn slack(bound: f64) -> f64 {
    1e-9 * bound.abs().max(1.0)
}

fn crossed(bound: &EnvelopeParameter, value: f64) -> Option<(Side, f64)> {
    if let Some(max) = bound.max
        && value > max + slack(max)
    {
        return Some((Side::Over, max));
    }
    if let Some(min) = bound.min
        && value < min - slack(min)
    {
        return Some((Side::Under, min));
    }
    None
}

/// Rounds to 3 decimals for messages (conversions leave float dust).
fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn seed_envelope() -> SafetyEnvelope {
        serde_json::from_value(serde_json::json!({
            "parameters": {
                "temperature": { "max": 1000, "unit": "celsius", "hard_limit": true },
                "pressure": { "max": 5, "unit": "atm", "hard_limit": true },
                "gas_flow_rate": { "max": 200, "unit": "sccm", "hard_limit": true },
                "ramp_rate": { "max": 20, "unit": "celsius_per_minute", "hard_limit": false }
            },
            "prohibited_actions": ["simultaneous_gas_mixing_without_purge"],
            "emergency_procedures": {
                "over_temperature": "immediate_shutdown",
                "gas_leak_detected": "close_all_valves_and_alert"
            }
        }))
        .expect("envelope")
    }

    #[test]
    fn hard_limits_are_never_crossed_in_any_unit() {
        let g = Guard::new(seed_envelope());
        assert_eq!(g.check("temperature", 1000.0, "celsius"), Ok(None));
        assert_eq!(g.check("temperature", 1273.15, "kelvin"), Ok(None));
        let v = g
            .check("temperature", 1300.0, "kelvin")
            .expect_err("crossed");
        assert_eq!(
            v.to_string(),
            "temperature 1026.85 celsius is above the hard limit (max 1000 celsius)"
        );
        assert_eq!(v.condition(), "over_temperature");
        assert_eq!(g.procedure(&v.condition()), Some("immediate_shutdown"));
        // 3800 Torr is exactly 5 atm: the bound itself passes.
        assert!(g.check("pressure", 3800.0, "torr").is_ok());
        assert!(g.check("pressure", 3801.0, "torr").is_err());
        assert!(matches!(
            g.check("temperature", 10.0, "atm"),
            Err(Violation::Unit { .. })
        ));
        // Unbounded parameters pass.
        assert_eq!(g.check("humidity", 1e9, "percent"), Ok(None));
    }

    #[test]
    fn soft_limits_warn() {
        let g = Guard::new(seed_envelope());
        let w = g
            .check("ramp_rate", 30.0, "celsius_per_minute")
            .expect("soft");
        assert_eq!(
            w.map(|w| w.message),
            Some(
                "ramp_rate 30 celsius_per_minute is above the soft limit 20 celsius_per_minute"
                    .into()
            )
        );
    }

    #[test]
    fn prohibited_actions() {
        let g = Guard::new(seed_envelope());
        assert!(g.check_action("purge").is_ok());
        let v = g
            .check_action("simultaneous_gas_mixing_without_purge")
            .expect_err("prohibited");
        assert_eq!(
            v.to_string(),
            "prohibited action: simultaneous_gas_mixing_without_purge"
        );
        let empty = Guard::new(SafetyEnvelope {
            parameters: BTreeMap::new(),
            ..SafetyEnvelope::default()
        });
        assert!(
            empty
                .check_action("simultaneous_gas_mixing_without_purge")
                .is_ok()
        );
    }
}
