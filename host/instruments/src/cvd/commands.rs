//! The rig's commands: their arguments checked, planned (what they
//! would set, and the prohibited action they would perform) and carried out
//! on the simulated rig.

use super::{
    AMBIENT_C, COOL_C_PER_MIN, CvdRig, GASES, MAX_LINE_SCCM, MAX_RAMP_C_PER_MIN, MIXING, NAME,
    PURGE_SECONDS, REACTIVE, round2, round4,
};
use crate::units;
use crate::{CommandError, Instrument, Plan, Setting};
use serde_json::{Value, json};

fn invalid(m: impl Into<String>) -> CommandError {
    CommandError::Invalid(m.into())
}

fn number(args: &Value, key: &str, default: Option<f64>) -> Result<f64, CommandError> {
    match args.get(key) {
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| invalid(format!("{key} must be a number"))),
        None => default.ok_or_else(|| invalid(format!("{key} is required"))),
    }
}

fn gas(args: &Value) -> Result<&str, CommandError> {
    let g = args
        .get("gas")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("gas is required"))?;
    GASES
        .iter()
        .find(|known| **known == g)
        .copied()
        .ok_or_else(|| {
            invalid(format!(
                "unknown gas {g:?}: the rig has {}",
                GASES.join(", ")
            ))
        })
}

/// Checks that `args` is an object holding only `keys`.
fn only(args: &Value, action: &str, keys: &[&str]) -> Result<(), CommandError> {
    let Some(obj) = args.as_object() else {
        return Err(invalid(format!(
            "{action}: arguments must be a JSON object"
        )));
    };
    if let Some(k) = obj.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(invalid(format!("{action}: unknown argument {k:?}")));
    }
    Ok(())
}

impl Instrument for CvdRig {
    fn name(&self) -> &str {
        NAME
    }

    fn plan(&self, action: &str, args: &Value) -> Result<Plan, CommandError> {
        let mut plan = Plan::default();
        match action {
            "set_temperature" => {
                only(args, action, &["target", "unit", "ramp_rate"])?;
                let unit = args
                    .get("unit")
                    .and_then(Value::as_str)
                    .unwrap_or("celsius");
                let target = number(args, "target", None)?;
                let target_c =
                    units::convert(target, unit, "celsius").map_err(|e| invalid(e.to_string()))?;
                if !(AMBIENT_C - 25.0..=1500.0).contains(&target_c) {
                    return Err(invalid(format!(
                        "target {target} {unit} is outside what the furnace can do (0–1500 °C)"
                    )));
                }
                let ramp = number(args, "ramp_rate", Some(10.0))?;
                if !(0.1..=MAX_RAMP_C_PER_MIN).contains(&ramp) {
                    return Err(invalid(format!(
                        "ramp_rate must be between 0.1 and {MAX_RAMP_C_PER_MIN} °C/min"
                    )));
                }
                plan.settings
                    .push(Setting::new("temperature", target, unit));
                plan.settings
                    .push(Setting::new("ramp_rate", ramp, "celsius_per_minute"));
            }
            "hold" => {
                only(args, action, &["seconds"])?;
                let s = number(args, "seconds", None)?;
                if !(1.0..=86_400.0).contains(&s) {
                    return Err(invalid("seconds must be between 1 and 86400"));
                }
            }
            "set_gas_flow" => {
                only(args, action, &["gas", "sccm"])?;
                let g = gas(args)?;
                let sccm = number(args, "sccm", None)?;
                if !(0.0..=MAX_LINE_SCCM).contains(&sccm) {
                    return Err(invalid(format!(
                        "sccm must be between 0 and {MAX_LINE_SCCM}"
                    )));
                }
                plan.settings
                    .push(Setting::new("gas_flow_rate", sccm, "sccm"));
                let other_reactive = self.reactive_since_purge.iter().any(|r| r != g)
                    || REACTIVE.iter().any(|r| *r != g && self.flow(r) > 0.0);
                if sccm > 0.0 && REACTIVE.contains(&g) && other_reactive {
                    plan.actions.push(MIXING.to_owned());
                }
            }
            "purge" => {
                only(args, action, &["seconds", "sccm"])?;
                let s = number(args, "seconds", Some(120.0))?;
                let sccm = number(args, "sccm", Some(100.0))?;
                if !(f64::from(PURGE_SECONDS)..=3600.0).contains(&s) {
                    return Err(invalid(format!(
                        "a purge lasts between {PURGE_SECONDS} and 3600 seconds"
                    )));
                }
                if !(50.0..=MAX_LINE_SCCM).contains(&sccm) {
                    return Err(invalid(format!(
                        "a purge flows between 50 and {MAX_LINE_SCCM} sccm"
                    )));
                }
                plan.settings
                    .push(Setting::new("gas_flow_rate", sccm, "sccm"));
            }
            "set_pump" => {
                only(args, action, &["on"])?;
                args.get("on")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| invalid("on must be true or false"))?;
            }
            "cool_down" | "measure_raman" | "growth_log" => only(args, action, &[])?,
            other => {
                return Err(invalid(format!(
                    "unknown action {other:?}: the rig offers set_temperature, hold, set_gas_flow, purge, set_pump, cool_down, measure_raman, growth_log"
                )));
            }
        }
        Ok(plan)
    }

    fn execute(&mut self, action: &str, args: &Value) -> Result<Value, CommandError> {
        self.plan(action, args)?;
        if let Some(why) = &self.emergency {
            return Err(invalid(format!("the rig is in emergency stop ({why})")));
        }
        match action {
            "set_temperature" => {
                let unit = args
                    .get("unit")
                    .and_then(Value::as_str)
                    .unwrap_or("celsius");
                let target = number(args, "target", None)?;
                self.setpoint_c =
                    units::convert(target, unit, "celsius").map_err(|e| invalid(e.to_string()))?;
                self.ramp_c_per_min = number(args, "ramp_rate", Some(10.0))?;
                self.heater = true;
                let secs = ((self.setpoint_c - self.temperature_c).abs() / self.ramp_c_per_min
                    * 60.0)
                    .ceil();
                self.advance(secs as u64);
            }
            "hold" => self.advance(number(args, "seconds", None)? as u64),
            "set_gas_flow" => {
                let g = gas(args)?.to_owned();
                let sccm = number(args, "sccm", None)?;
                if sccm > 0.0 && REACTIVE.contains(&g.as_str()) {
                    self.reactive_since_purge.insert(g.clone());
                }
                self.flows.insert(g, sccm);
            }
            "purge" => {
                for r in REACTIVE {
                    self.flows.insert((*r).to_owned(), 0.0);
                }
                let previous = self.flow("Ar");
                self.flows
                    .insert("Ar".into(), number(args, "sccm", Some(100.0))?);
                self.advance(number(args, "seconds", Some(120.0))? as u64);
                self.flows.insert("Ar".into(), previous);
            }
            "set_pump" => self.pump = args.get("on").and_then(Value::as_bool).unwrap_or(false),
            "cool_down" => {
                self.heater = false;
                self.setpoint_c = AMBIENT_C;
                for r in REACTIVE {
                    self.flows.insert((*r).to_owned(), 0.0);
                }
                let secs = ((self.temperature_c - 50.0).max(0.0) / COOL_C_PER_MIN * 60.0).ceil();
                self.advance(secs as u64);
            }
            "measure_raman" => return Ok(self.raman()),
            "growth_log" => return Ok(json!({ "rows": self.log })),
            _ => {}
        }
        Ok(self.reading())
    }

    fn state(&self) -> Vec<Setting> {
        let max_line = self.flows.values().copied().fold(0.0, f64::max);
        vec![
            Setting::new("temperature", self.temperature_c, "celsius"),
            Setting::new("pressure", self.pressure_atm, "atm"),
            Setting::new("gas_flow_rate", max_line, "sccm"),
        ]
    }

    fn reading(&self) -> Value {
        json!({
            "instrument": NAME,
            "time_s": self.time_s,
            "state": self.state_name(),
            "temperature_c": round2(self.temperature_c),
            "setpoint_c": round2(self.setpoint_c),
            "heater": self.heater,
            "pressure_atm": round4(self.pressure_atm),
            "pump": self.pump,
            "flows_sccm": self.flows,
            "alerts": self.alerts,
        })
    }

    fn emergency(&mut self, procedure: &str) {
        let close_valves = |rig: &mut Self| {
            for f in rig.flows.values_mut() {
                *f = 0.0;
            }
        };
        match procedure {
            "close_all_valves_and_alert" => {
                close_valves(self);
                self.alerts.push(format!(
                    "t={}s: all valves closed, operator alerted",
                    self.time_s
                ));
            }
            other => {
                if other != "immediate_shutdown" {
                    self.alerts.push(format!(
                        "t={}s: unknown procedure {other:?}; ran immediate_shutdown",
                        self.time_s
                    ));
                }
                close_valves(self);
                self.heater = false;
                self.setpoint_c = AMBIENT_C;
                self.pump = true;
                self.alerts.push(format!(
                    "t={}s: immediate shutdown: heater off, valves closed",
                    self.time_s
                ));
            }
        }
        self.emergency = Some(procedure.to_owned());
        self.log_row();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cvd::CvdRig;

    fn run(rig: &mut CvdRig, action: &str, args: Value) -> Value {
        rig.execute(action, &args)
            .unwrap_or_else(|e| panic!("{action}: {e}"))
    }

    /// A monolayer recipe at 725 °C.
    fn grow(rig: &mut CvdRig, temperature: f64, minutes: u64) {
        run(rig, "set_pump", json!({"on": true}));
        run(rig, "purge", json!({"seconds": 120}));
        run(rig, "set_gas_flow", json!({"gas": "Ar", "sccm": 50}));
        run(
            rig,
            "set_temperature",
            json!({"target": temperature, "ramp_rate": 25}),
        );
        run(rig, "set_gas_flow", json!({"gas": "H2S", "sccm": 50}));
        run(rig, "hold", json!({"seconds": minutes * 60}));
        run(rig, "cool_down", json!({}));
    }

    #[test]
    fn a_short_growth_gives_a_monolayer_and_its_raman_signature() {
        let mut rig = CvdRig::new(7);
        grow(&mut rig, 725.0, 10);
        assert!((0.5..1.5).contains(&rig.layers), "{}", rig.layers);
        let spectrum = run(&mut rig, "measure_raman", json!({}));
        let i = spectrum["intensity"].as_array().expect("intensity");
        // The strongest point is the A1g peak near 404 cm⁻¹.
        let peak = i
            .iter()
            .enumerate()
            .max_by(|a, b| {
                a.1.as_f64()
                    .unwrap_or(0.0)
                    .total_cmp(&b.1.as_f64().unwrap_or(0.0))
            })
            .map(|(k, _)| 360 + k)
            .expect("peak");
        assert!((403..=405).contains(&peak), "{peak}");
    }

    #[test]
    fn longer_growth_gives_more_layers() {
        let mut thin = CvdRig::new(1);
        grow(&mut thin, 725.0, 10);
        let mut thick = CvdRig::new(1);
        grow(&mut thick, 725.0, 40);
        assert!(thick.layers > 3.0 * thin.layers);
    }

    #[test]
    fn mixing_reactive_gases_without_a_purge_is_planned_as_the_prohibited_action() {
        let mut rig = CvdRig::new(1);
        run(&mut rig, "set_gas_flow", json!({"gas": "H2", "sccm": 20}));
        let plan = rig
            .plan("set_gas_flow", &json!({"gas": "O2", "sccm": 5}))
            .expect("plan");
        assert_eq!(plan.actions, [MIXING]);
        run(&mut rig, "set_gas_flow", json!({"gas": "H2", "sccm": 0}));
        // Closing is not enough: the line must be purged.
        let plan = rig
            .plan("set_gas_flow", &json!({"gas": "O2", "sccm": 5}))
            .expect("plan");
        assert_eq!(plan.actions, [MIXING]);
        run(&mut rig, "purge", json!({"seconds": 90}));
        let plan = rig
            .plan("set_gas_flow", &json!({"gas": "O2", "sccm": 5}))
            .expect("plan");
        assert!(plan.actions.is_empty());
    }

    #[test]
    fn without_the_pump_flowing_gas_raises_the_pressure() {
        let mut rig = CvdRig::new(1);
        run(&mut rig, "set_gas_flow", json!({"gas": "Ar", "sccm": 200}));
        run(&mut rig, "hold", json!({"seconds": 3600}));
        let p = rig
            .state()
            .iter()
            .find(|s| s.parameter == "pressure")
            .map(|s| s.value)
            .expect("p");
        assert!(p > 5.0, "{p}");
    }

    #[test]
    fn malformed_commands_are_refused_with_their_reason() {
        let rig = CvdRig::new(1);
        let err = |a: &str, v: Value| rig.plan(a, &v).expect_err("accepted").to_string();
        assert_eq!(
            err("set_gas_flow", json!({"gas": "Xe", "sccm": 1})),
            "unknown gas \"Xe\": the rig has Ar, N2, H2, O2, H2S"
        );
        assert_eq!(
            err("set_temperature", json!({"target": 700, "unit": "atm"})),
            "cannot convert atm (pressure) to celsius (temperature): different dimensions"
        );
        assert_eq!(
            err("hold", json!({"seconds": 0})),
            "seconds must be between 1 and 86400"
        );
        assert_eq!(
            err("set_pump", json!({"on": true, "force": 1})),
            "set_pump: unknown argument \"force\""
        );
        assert!(err("self_destruct", json!({})).starts_with("unknown action \"self_destruct\""));
    }

    #[test]
    fn emergency_shutdown_closes_everything_and_stops_the_rig() {
        let mut rig = CvdRig::new(1);
        grow(&mut rig, 725.0, 1);
        run(&mut rig, "set_gas_flow", json!({"gas": "Ar", "sccm": 100}));
        rig.emergency("immediate_shutdown");
        assert!(!rig.heater);
        assert!(rig.flows.values().all(|f| *f == 0.0));
        assert!(rig.execute("hold", &json!({"seconds": 10})).is_err());
        assert_eq!(rig.reading()["state"], "emergency_stop");
    }
}
