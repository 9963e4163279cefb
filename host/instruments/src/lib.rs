//! Instruments behind the `hcp:capability/instrument` host interface, and the
//! safety envelope that stands between a capability and each of them.
//!
//! - [`envelope::Guard`] checks values and actions against a session's
//!   effective envelope (hard limits never crossed, prohibited actions never
//!   run, soft limits warned).
//! - [`session::Session`] runs every command through the guard, before and
//!   after, and runs the declared emergency procedure on a breach.
//! - [`cvd::CvdRig`] is a simulated chemical-vapour-deposition rig (furnace,
//!   gas lines, vacuum, a Raman probe) with deterministic simulated time.
//!
//! This crate is pure: no clock, no I/O, no randomness it does not seed
//! itself. It must never let a command reach an instrument without the guard.

#![deny(missing_docs)]

pub mod cvd;
pub mod envelope;
pub mod session;
pub mod units;

use serde_json::Value;

/// A value a command would set, for the guard.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// Envelope parameter (`temperature`, `pressure`, `gas_flow_rate`, ...).
    pub parameter: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
}

impl Setting {
    /// A setting.
    pub fn new(parameter: &str, value: f64, unit: &str) -> Self {
        Self {
            parameter: parameter.to_owned(),
            value,
            unit: unit.to_owned(),
        }
    }
}

/// What a command would do, worked out before it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Values it would set.
    pub settings: Vec<Setting>,
    /// Named actions it would perform (matched against prohibited actions).
    pub actions: Vec<String>,
}

/// A command the instrument cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// Unknown action or malformed arguments.
    #[error("{0}")]
    Invalid(String),
}

/// One instrument, as the host drives it.
pub trait Instrument: Send {
    /// Its name, as `grants.instruments` lists it.
    fn name(&self) -> &str;

    /// What `action` with `args` would do. Pure: changes nothing.
    ///
    /// # Errors
    ///
    /// Unknown action or malformed arguments.
    fn plan(&self, action: &str, args: &Value) -> Result<Plan, CommandError>;

    /// Runs the command (the guard has passed it); returns the reading after.
    ///
    /// # Errors
    ///
    /// Unknown action or malformed arguments.
    fn execute(&mut self, action: &str, args: &Value) -> Result<Value, CommandError>;

    /// The current values of bounded quantities, checked after each command.
    fn state(&self) -> Vec<Setting>;

    /// The current reading (JSON), with no side effect.
    fn reading(&self) -> Value;

    /// Runs an emergency procedure (`immediate_shutdown`,
    /// `close_all_valves_and_alert`, ...); an unknown name runs the safest
    /// one the instrument has.
    fn emergency(&mut self, procedure: &str);
}

/// Instruments this host can provide, by name.
pub fn open(name: &str, seed: u64) -> Option<Box<dyn Instrument>> {
    match name {
        cvd::NAME => Some(Box::new(cvd::CvdRig::new(seed))),
        _ => None,
    }
}

/// Names of the instruments this host can provide.
pub const AVAILABLE: &[&str] = &[cvd::NAME];
