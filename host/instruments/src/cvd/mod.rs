//! A simulated chemical-vapour-deposition rig: a tube furnace with a ramp
//! rate, gas lines (Ar, N2, H2, O2, H2S) with purge tracking, a vacuum pump
//! and chamber pressure, film growth, and a Raman probe.
//!
//! Time is simulated: commands that take time (ramping, holding, purging)
//! advance the rig's clock in one-second steps, instantly in wall time. The
//! model is a toy but a consistent one: the film grows only with the
//! furnace in the growth window, a sulfur source and a carrier flowing, and
//! the Raman spectrum is computed from the film the run actually grew.
//!
//! Actions (arguments are a JSON object):
//!
//! | action | arguments | effect |
//! |---|---|---|
//! | `set_temperature` | `target`, `unit` (default celsius), `ramp_rate` (°C/min, default 10, at most 50) | ramps the furnace to `target` |
//! | `hold` | `seconds` (1..=86400) | lets time pass |
//! | `set_gas_flow` | `gas`, `sccm` (0 closes, at most 1000) | sets one line |
//! | `purge` | `seconds` (default 120), `sccm` (default 100) | closes reactive lines and flushes with Ar |
//! | `set_pump` | `on` | vacuum pump on or off |
//! | `cool_down` | — | heater off, reactive lines closed, waits below 50 °C |
//! | `measure_raman` | — | Raman spectrum of the film (360–420 cm⁻¹) |
//! | `growth_log` | — | one row per simulated minute since the start |

mod commands;

use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The rig's instrument name.
pub const NAME: &str = "cvd-rig";
const AMBIENT_C: f64 = 25.0;
const MAX_RAMP_C_PER_MIN: f64 = 50.0;
const COOL_C_PER_MIN: f64 = 10.0;
const BASE_PRESSURE_ATM: f64 = 0.001;
const MAX_LINE_SCCM: f64 = 1000.0;
const GASES: &[&str] = &["Ar", "N2", "H2", "O2", "H2S"];
const REACTIVE: &[&str] = &["H2", "O2", "H2S"];
const INERT: &[&str] = &["Ar", "N2"];
/// Seconds of inert-only flow that count as a purge.
const PURGE_SECONDS: u32 = 60;
/// The prohibited action this rig can perform.
pub const MIXING: &str = "simultaneous_gas_mixing_without_purge";

#[derive(Debug, Clone, Serialize)]
struct LogRow {
    time_s: u64,
    temperature_c: f64,
    setpoint_c: f64,
    pressure_atm: f64,
    flows_sccm: BTreeMap<String, f64>,
    film_layers: f64,
}

/// The simulated rig.
#[derive(Debug, Clone)]
pub struct CvdRig {
    time_s: u64,
    temperature_c: f64,
    setpoint_c: f64,
    ramp_c_per_min: f64,
    heater: bool,
    pressure_atm: f64,
    pump: bool,
    flows: BTreeMap<String, f64>,
    reactive_since_purge: BTreeSet<String>,
    inert_seconds: u32,
    layers: f64,
    emergency: Option<String>,
    alerts: Vec<String>,
    log: Vec<LogRow>,
    seed: u64,
}

impl CvdRig {
    /// A rig at rest: ambient temperature, atmospheric pressure, lines closed.
    pub fn new(seed: u64) -> Self {
        let mut rig = Self {
            time_s: 0,
            temperature_c: AMBIENT_C,
            setpoint_c: AMBIENT_C,
            ramp_c_per_min: 10.0,
            heater: false,
            pressure_atm: 1.0,
            pump: false,
            flows: GASES.iter().map(|g| ((*g).to_owned(), 0.0)).collect(),
            reactive_since_purge: BTreeSet::new(),
            inert_seconds: 0,
            layers: 0.0,
            emergency: None,
            alerts: Vec::new(),
            log: Vec::new(),
            seed,
        };
        rig.log_row();
        rig
    }

    fn flow(&self, gas: &str) -> f64 {
        self.flows.get(gas).copied().unwrap_or(0.0)
    }

    fn total_flow(&self) -> f64 {
        self.flows.values().sum()
    }

    fn log_row(&mut self) {
        self.log.push(LogRow {
            time_s: self.time_s,
            temperature_c: round2(self.temperature_c),
            setpoint_c: round2(self.setpoint_c),
            pressure_atm: round4(self.pressure_atm),
            flows_sccm: self
                .flows
                .iter()
                .filter(|(_, f)| **f > 0.0)
                .map(|(g, f)| (g.clone(), *f))
                .collect(),
            film_layers: round2(self.layers),
        });
    }

    /// Advances one simulated second.
    fn tick(&mut self) {
        self.time_s += 1;
        // Furnace.
        if self.heater {
            let step = self.ramp_c_per_min / 60.0;
            let d = self.setpoint_c - self.temperature_c;
            self.temperature_c += d.clamp(-step, step);
        } else if self.temperature_c > AMBIENT_C {
            self.temperature_c = (self.temperature_c - COOL_C_PER_MIN / 60.0).max(AMBIENT_C);
        }
        // Chamber pressure: the pump holds it near a floor that rises with
        // the flow; without the pump, flowing gas fills the chamber.
        let flow = self.total_flow();
        if self.pump {
            let steady = BASE_PRESSURE_ATM + flow * 0.002;
            self.pressure_atm += (steady - self.pressure_atm) * 0.2;
        } else {
            self.pressure_atm += flow * 1e-5;
        }
        // Purging: inert-only flow clears the reactive history.
        let reactive_flowing = REACTIVE.iter().any(|g| self.flow(g) > 0.0);
        let inert_flow: f64 = INERT.iter().map(|g| self.flow(g)).sum();
        if !reactive_flowing && inert_flow >= 50.0 {
            self.inert_seconds += 1;
            if self.inert_seconds >= PURGE_SECONDS {
                self.reactive_since_purge.clear();
            }
        } else {
            self.inert_seconds = 0;
        }
        // Growth: MoS2 from the sulfur source in the growth window.
        let h2s = self.flow("H2S");
        let carrier = inert_flow;
        if (650.0..=900.0).contains(&self.temperature_c)
            && h2s >= 10.0
            && carrier >= 20.0
            && self.pump
        {
            let t_k = self.temperature_c + 273.15;
            let k = (1.0 / 600.0) * (8000.0 * (1.0 / 998.15 - 1.0 / t_k)).exp();
            self.layers += k * (h2s / 50.0).min(2.0);
        }
        if self.time_s.is_multiple_of(60) {
            self.log_row();
        }
    }

    fn advance(&mut self, seconds: u64) {
        for _ in 0..seconds {
            self.tick();
        }
    }

    /// The Raman spectrum of the film: E2g and A1g peaks whose separation
    /// grows with the layer count (about 18.7 cm⁻¹ for a monolayer, 25 for
    /// bulk), with a little deterministic noise.
    fn raman(&self) -> Value {
        let n = self
            .layers
            .round()
            .max(if self.layers >= 0.3 { 1.0 } else { 0.0 });
        let (e2g, delta) = match n as u32 {
            0 => (385.0, 0.0),
            1 => (385.6, 18.7),
            2 => (384.4, 21.6),
            3 => (383.9, 23.1),
            4 => (383.6, 23.9),
            _ => (383.2, 25.1),
        };
        let amplitude = 300.0 * n.min(5.0);
        let mut rng = self.seed ^ (self.layers.to_bits().rotate_left(17)) ^ 0x9e37_79b9_7f4a_7c15;
        let mut shifts = Vec::new();
        let mut intensity = Vec::new();
        for i in 0..=60u32 {
            let x = 360.0 + f64::from(i);
            let lorentz = |c: f64, w: f64| 1.0 / (1.0 + ((x - c) / w).powi(2));
            let signal = if n > 0.0 {
                amplitude * (0.9 * lorentz(e2g, 2.0) + lorentz(e2g + delta, 2.5))
            } else {
                0.0
            };
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let noise = ((rng % 2001) as f64 / 1000.0 - 1.0) * 6.0;
            shifts.push(json!(x));
            intensity.push(json!(round2((100.0 + signal + noise).max(0.0))));
        }
        json!({ "laser_nm": 532, "raman_shift": shifts, "intensity": intensity })
    }

    fn state_name(&self) -> &'static str {
        if self.emergency.is_some() {
            "emergency_stop"
        } else if self.heater && (self.temperature_c - self.setpoint_c).abs() > 0.5 {
            "ramping"
        } else if self.heater {
            "at_setpoint"
        } else if self.temperature_c > AMBIENT_C + 1.0 {
            "cooling"
        } else {
            "idle"
        }
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}
