//! The effective safety envelope: the declaration's, tightened by the
//! operator's `envelopes.json`. A policy can only tighten:
//!
//! - every parameter's `max` is the lower and `min` the higher of the two;
//!   `hard_limit` holds if either says so; a parameter only one side bounds
//!   keeps that bound;
//! - `prohibited_actions` is the union; `emergency_procedures` the union;
//! - a policy value looser than the declaration's is **ignored** (the
//!   declaration's stands) and reported in [`EffectiveEnvelope::ignored`],
//!   so `hcp policy check` can show it;
//! - what cannot be merged safely is **refused** ([`EnvelopeError`]): bounds
//!   in units that do not convert, the two sides naming different
//!   procedures for the same condition, or a merged `min` above `max`. The
//!   gate then refuses the task (fail closed) until the operator fixes the
//!   policy.

use crate::units::{Unit, number};
use hcp_contracts::manifest::{EnvelopeParameter, SafetyEnvelope};
use serde::{Deserialize, Serialize};

/// The envelope a session runs under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EffectiveEnvelope {
    /// The merged envelope, in seed 000's shape (units: the declaration's).
    pub envelope: SafetyEnvelope,
    /// Policy values that were looser than the declaration's, and ignored.
    pub ignored: Vec<String>,
}

/// Why a declaration and a policy envelope cannot be merged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvelopeError {
    /// The two sides bound a parameter in units that do not convert.
    #[error(
        "safety envelope parameter {parameter}: the declaration's unit {declared:?} and the policy's {policy:?} do not convert"
    )]
    Units {
        /// The parameter.
        parameter: String,
        /// The declaration's unit.
        declared: String,
        /// The policy's unit.
        policy: String,
    },
    /// Nothing would be allowed.
    #[error("safety envelope parameter {parameter}: merged min {min} is above max {max}")]
    Empty {
        /// The parameter.
        parameter: String,
        /// Merged lower bound.
        min: String,
        /// Merged upper bound.
        max: String,
    },
    /// The two sides name different procedures for one condition.
    #[error(
        "safety envelope emergency procedure {condition}: the declaration says {declared:?}, the policy {policy:?}; make them agree"
    )]
    Procedure {
        /// The condition.
        condition: String,
        /// The declaration's procedure.
        declared: String,
        /// The policy's procedure.
        policy: String,
    },
}

/// Merges `declared` with the operator's `policy` envelope.
///
/// # Errors
///
/// See [`EnvelopeError`].
pub fn tighten(
    declared: &SafetyEnvelope,
    policy: Option<&SafetyEnvelope>,
) -> Result<EffectiveEnvelope, EnvelopeError> {
    let mut envelope = declared.clone();
    let mut ignored = Vec::new();
    if let Some(policy) = policy {
        for (name, p) in &policy.parameters {
            let merged = match declared.parameters.get(name) {
                None => p.clone(),
                Some(d) => parameter(name, d, p, &mut ignored)?,
            };
            envelope.parameters.insert(name.clone(), merged);
        }
        for action in &policy.prohibited_actions {
            if !envelope.prohibited_actions.contains(action) {
                envelope.prohibited_actions.push(action.clone());
            }
        }
        for (condition, procedure) in &policy.emergency_procedures {
            match envelope.emergency_procedures.get(condition) {
                Some(existing) if existing != procedure => {
                    return Err(EnvelopeError::Procedure {
                        condition: condition.clone(),
                        declared: existing.clone(),
                        policy: procedure.clone(),
                    });
                }
                _ => {
                    envelope
                        .emergency_procedures
                        .insert(condition.clone(), procedure.clone());
                }
            }
        }
    }
    for (name, p) in &envelope.parameters {
        if let (Some(min), Some(max)) = (p.min, p.max)
            && min > max
        {
            return Err(EnvelopeError::Empty {
                parameter: name.clone(),
                min: number(min),
                max: number(max),
            });
        }
    }
    Ok(EffectiveEnvelope { envelope, ignored })
}

fn parameter(
    name: &str,
    d: &EnvelopeParameter,
    p: &EnvelopeParameter,
    ignored: &mut Vec<String>,
) -> Result<EnvelopeParameter, EnvelopeError> {
    // The policy's bounds, in the declaration's unit.
    let convert: Box<dyn Fn(f64) -> f64> = match (&d.unit, &p.unit) {
        (Some(du), Some(pu)) if du != pu => {
            let units = du.parse::<Unit>().ok().zip(pu.parse::<Unit>().ok());
            match units {
                Some((du, pu)) if du.quantity() == pu.quantity() => {
                    Box::new(move |v| pu.convert(v, du).unwrap_or(v))
                }
                _ => {
                    return Err(EnvelopeError::Units {
                        parameter: name.to_owned(),
                        declared: du.clone(),
                        policy: pu.clone(),
                    });
                }
            }
        }
        _ => Box::new(|v| v),
    };
    let unit = d.unit.clone().or_else(|| p.unit.clone());
    let shown = |v: f64| match &unit {
        Some(u) => format!("{} {u}", number(v)),
        None => number(v),
    };
    let (p_min, p_max) = (p.min.map(&convert), p.max.map(&convert));
    let max = match (d.max, p_max) {
        (Some(dm), Some(pm)) if pm > dm => {
            ignored.push(format!(
                "{name}.max {} is looser than the declaration's {}: ignored",
                shown(pm),
                shown(dm)
            ));
            Some(dm)
        }
        (Some(dm), Some(pm)) => Some(dm.min(pm)),
        (d, p) => d.or(p),
    };
    let min = match (d.min, p_min) {
        (Some(dm), Some(pm)) if pm < dm => {
            ignored.push(format!(
                "{name}.min {} is looser than the declaration's {}: ignored",
                shown(pm),
                shown(dm)
            ));
            Some(dm)
        }
        (Some(dm), Some(pm)) => Some(dm.max(pm)),
        (d, p) => d.or(p),
    };
    Ok(EnvelopeParameter {
        min,
        max,
        unit,
        hard_limit: d.hard_limit || p.hard_limit,
    })
}
