//! One session's access to its instruments, every command passing the
//! envelope guard: before the command (the values it would set and the
//! actions it would perform) and after it (the values the instrument then
//! reports). A breach runs the declared emergency procedure on the
//! instrument, and from then on the session's commands are refused.

use crate::envelope::{Guard, Violation, Warning};
use crate::{CommandError, Instrument, Plan};
use serde_json::Value;
use std::collections::BTreeMap;

/// Why a command did not run (or ran and breached).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The instrument is not granted to this session.
    NotGranted(String),
    /// The command is malformed or unknown.
    Invalid(String),
    /// The command would cross the envelope, or crossed it: the emergency
    /// procedure ran.
    Breach {
        /// What was crossed.
        violation: Violation,
        /// The procedure that ran.
        procedure: String,
        /// Whether the command itself was refused (true) or ran and the
        /// instrument's state then crossed a limit (false).
        before: bool,
    },
    /// An earlier breach shut the session's instruments down.
    ShutDown(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotGranted(name) => {
                write!(f, "instrument {name} is not granted to this capability")
            }
            Self::Invalid(m) => f.write_str(m),
            Self::Breach {
                violation,
                procedure,
                before,
            } => {
                let when = if *before { "refused" } else { "reached" };
                write!(
                    f,
                    "safety envelope {when}: {violation}; emergency procedure {procedure} ran"
                )
            }
            Self::ShutDown(why) => {
                write!(f, "instruments are shut down after a safety breach: {why}")
            }
        }
    }
}

/// A safety event of the session, for `risk_events` and the task log.
#[derive(Debug, Clone, PartialEq)]
pub struct SafetyEvent {
    /// `breach:<condition>`, `warning:<parameter>`.
    pub kind: String,
    /// Human-readable detail.
    pub message: String,
}

/// The instruments of one session and their guard.
pub struct Session {
    guard: Guard,
    instruments: BTreeMap<String, Box<dyn Instrument>>,
    breach: Option<String>,
    events: Vec<SafetyEvent>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("instruments", &self.instruments.keys().collect::<Vec<_>>())
            .field("breach", &self.breach)
            .finish_non_exhaustive()
    }
}

/// The procedure run when the envelope names none for a condition.
pub const DEFAULT_PROCEDURE: &str = "immediate_shutdown";

impl Session {
    /// A session with `instruments` (the granted ones) under `guard`.
    pub fn new(guard: Guard, instruments: Vec<Box<dyn Instrument>>) -> Self {
        Self {
            guard,
            instruments: instruments
                .into_iter()
                .map(|i| (i.name().to_owned(), i))
                .collect(),
            breach: None,
            events: Vec::new(),
        }
    }

    /// Safety events so far.
    pub fn events(&self) -> &[SafetyEvent] {
        &self.events
    }

    /// The breach that ended the session, if any.
    pub fn breach(&self) -> Option<&str> {
        self.breach.as_deref()
    }

    /// Runs `action` with `args` on `instrument`, guarded.
    ///
    /// # Errors
    ///
    /// See [`Refusal`].
    pub fn command(
        &mut self,
        instrument: &str,
        action: &str,
        args: &Value,
    ) -> Result<Value, Refusal> {
        if let Some(why) = &self.breach {
            return Err(Refusal::ShutDown(why.clone()));
        }
        let Some(inst) = self.instruments.get_mut(instrument) else {
            return Err(Refusal::NotGranted(instrument.to_owned()));
        };
        let plan = inst
            .plan(action, args)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        let warnings = match self.check_plan(&plan) {
            Ok(warnings) => warnings,
            Err(v) if !v.is_breach() => return Err(Refusal::Invalid(v.to_string())),
            Err(v) => return Err(self.emergency(instrument, v, true)),
        };
        let Some(inst) = self.instruments.get_mut(instrument) else {
            return Err(Refusal::NotGranted(instrument.to_owned()));
        };
        let result = inst.execute(action, args).map_err(|e| match e {
            CommandError::Invalid(m) => Refusal::Invalid(m),
        })?;
        self.record_warnings(warnings);
        // The instrument's state after the command must be inside too.
        let state = self
            .instruments
            .get(instrument)
            .map(|i| i.state())
            .unwrap_or_default();
        let mut state_warnings = Vec::new();
        for s in state {
            match self.guard.check(&s.parameter, s.value, &s.unit) {
                Ok(Some(w)) => state_warnings.push(w),
                Ok(None) | Err(Violation::Unit { .. }) => {}
                Err(v) => return Err(self.emergency(instrument, v, false)),
            }
        }
        self.record_warnings(state_warnings);
        Ok(result)
    }

    /// What `action` with `args` would do on `instrument`: its plan, with
    /// nothing run (for the policy enforcement point to decide on).
    ///
    /// # Errors
    ///
    /// The instrument is not granted, or the command is malformed.
    pub fn plan(&self, instrument: &str, action: &str, args: &Value) -> Result<Plan, Refusal> {
        let inst = self
            .instruments
            .get(instrument)
            .ok_or_else(|| Refusal::NotGranted(instrument.to_owned()))?;
        inst.plan(action, args)
            .map_err(|e| Refusal::Invalid(e.to_string()))
    }

    /// A command refused before the guard saw it (by the policy enforcement
    /// point, for the envelope): when the guard finds the same breach in its
    /// plan, the emergency procedure runs and the instruments shut down, as
    /// [`Session::command`] would have done. `None` when the guard finds no
    /// breach in the plan.
    pub fn refuse(&mut self, instrument: &str, plan: &Plan) -> Option<Refusal> {
        if self.breach.is_some() {
            return None;
        }
        match self.check_plan(plan) {
            Err(v) if v.is_breach() => Some(self.emergency(instrument, v, true)),
            _ => None,
        }
    }

    /// The guard's verdict on a plan: its actions, then its settings.
    fn check_plan(&self, plan: &Plan) -> Result<Vec<Warning>, Violation> {
        for a in &plan.actions {
            self.guard.check_action(a)?;
        }
        let mut warnings = Vec::new();
        for s in &plan.settings {
            if let Some(w) = self.guard.check(&s.parameter, s.value, &s.unit)? {
                warnings.push(w);
            }
        }
        Ok(warnings)
    }

    /// The reading of `instrument`, with no side effect.
    ///
    /// # Errors
    ///
    /// The instrument is not granted.
    pub fn read(&self, instrument: &str) -> Result<Value, Refusal> {
        self.instruments
            .get(instrument)
            .map(|i| i.reading())
            .ok_or_else(|| Refusal::NotGranted(instrument.to_owned()))
    }

    fn record_warnings(&mut self, warnings: Vec<Warning>) {
        for w in warnings {
            self.events.push(SafetyEvent {
                kind: format!("warning:{}", w.parameter),
                message: w.message,
            });
        }
    }

    /// Runs the declared procedure on every instrument of the session.
    fn emergency(&mut self, instrument: &str, violation: Violation, before: bool) -> Refusal {
        let condition = violation.condition();
        let procedure = self
            .guard
            .procedure(&condition)
            .unwrap_or(DEFAULT_PROCEDURE)
            .to_owned();
        for inst in self.instruments.values_mut() {
            inst.emergency(&procedure);
        }
        let why = format!("{instrument}: {violation}");
        self.events.push(SafetyEvent {
            kind: format!("breach:{condition}"),
            message: format!("{why}; emergency procedure {procedure} ran"),
        });
        self.breach = Some(why);
        Refusal::Breach {
            violation,
            procedure,
            before,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cvd::CvdRig;
    use serde_json::json;

    fn session() -> Session {
        let envelope = serde_json::from_value(json!({
            "parameters": {
                "temperature": { "max": 1000, "unit": "celsius", "hard_limit": true },
                "pressure": { "max": 5, "unit": "atm", "hard_limit": true },
                "gas_flow_rate": { "max": 200, "unit": "sccm", "hard_limit": true }
            },
            "prohibited_actions": ["simultaneous_gas_mixing_without_purge"],
            "emergency_procedures": {
                "over_temperature": "immediate_shutdown",
                "simultaneous_gas_mixing_without_purge": "close_all_valves_and_alert"
            }
        }))
        .expect("envelope");
        Session::new(Guard::new(envelope), vec![Box::new(CvdRig::new(3))])
    }

    #[test]
    fn a_command_over_a_hard_limit_never_runs_and_shuts_the_rig_down() {
        let mut s = session();
        s.command("cvd-rig", "set_temperature", &json!({"target": 700}))
            .expect("within");
        let err = s
            .command(
                "cvd-rig",
                "set_temperature",
                &json!({"target": 1200, "ramp_rate": 20}),
            )
            .expect_err("crossed");
        assert_eq!(
            err.to_string(),
            "safety envelope refused: temperature 1200 celsius is above the hard limit (max 1000 celsius); emergency procedure immediate_shutdown ran"
        );
        let reading = s.read("cvd-rig").expect("read");
        assert_eq!(reading["state"], "emergency_stop");
        assert_eq!(reading["heater"], false);
        // The furnace never went past 700.
        assert!(reading["temperature_c"].as_f64().expect("t") <= 700.0);
        let again = s
            .command("cvd-rig", "hold", &json!({"seconds": 5}))
            .expect_err("shut down");
        assert!(matches!(again, Refusal::ShutDown(_)));
        assert_eq!(s.events()[0].kind, "breach:over_temperature");
    }

    #[test]
    fn a_prohibited_action_runs_its_declared_procedure() {
        let mut s = session();
        s.command("cvd-rig", "set_gas_flow", &json!({"gas": "H2", "sccm": 20}))
            .expect("ok");
        let err = s
            .command("cvd-rig", "set_gas_flow", &json!({"gas": "O2", "sccm": 5}))
            .expect_err("mixing");
        assert_eq!(
            err.to_string(),
            "safety envelope refused: prohibited action: simultaneous_gas_mixing_without_purge; emergency procedure close_all_valves_and_alert ran"
        );
        let reading = s.read("cvd-rig").expect("read");
        assert_eq!(reading["flows_sccm"]["H2"], 0.0);
        assert_eq!(reading["flows_sccm"]["O2"], 0.0);
    }

    #[test]
    fn a_state_that_drifts_over_a_limit_is_caught_after_the_command() {
        let mut s = session();
        s.command(
            "cvd-rig",
            "set_gas_flow",
            &json!({"gas": "Ar", "sccm": 200}),
        )
        .expect("ok");
        // Pump off: an hour of flow fills the chamber past 5 atm.
        let err = s
            .command("cvd-rig", "hold", &json!({"seconds": 3600}))
            .expect_err("drift");
        let Refusal::Breach {
            before, violation, ..
        } = &err
        else {
            panic!("{err}");
        };
        assert!(!before);
        assert_eq!(violation.condition(), "over_pressure");
        assert_eq!(
            s.read("cvd-rig").expect("read")["state"],
            "emergency_stop",
            "the default procedure ran"
        );
    }

    #[test]
    fn instruments_not_granted_and_malformed_commands_are_refused_without_a_breach() {
        let mut s = session();
        assert_eq!(
            s.command("reactor-2", "hold", &json!({"seconds": 1}))
                .expect_err("x")
                .to_string(),
            "instrument reactor-2 is not granted to this capability"
        );
        assert!(matches!(
            s.command("cvd-rig", "set_temperature", &json!({"target": "hot"})),
            Err(Refusal::Invalid(_))
        ));
        assert!(s.breach().is_none());
    }
}
