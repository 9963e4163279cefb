//! `cvd-material-synthesis`: the R4 example of seeds 000 and 001, run on the
//! host's CVD rig through `hcp:capability/instrument`.
//!
//! Phases, each followed by a checkpoint: preparation (pump down, purge,
//! carrier gas), ramp (to the middle of the requested temperature range),
//! material growth (sulfur source on, hold), cool-down, characterization (a
//! Raman spectrum, analyzed for the E2g–A1g separation and the layer count).
//! It writes the raw spectrum and the growth log as artifacts.
//!
//! Every command goes through the host's safety envelope: a command that
//! would cross a hard limit never reaches the rig, the envelope's emergency
//! procedure runs, and the host ends the task with `safety_violation`; this
//! capability then returns what it has (completed phases, the growth log so
//! far, a partial growth-log artifact) so the caller can resubmit from the
//! last checkpoint.

pub mod raman;

use hcp_guest::{Failure, HostError, Task, artifacts, checkpoints, instrument, log};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const RIG: &str = "cvd-rig";

/// The seed's inputs, plus optional recipe knobs.
#[derive(Debug, Deserialize)]
pub struct Input {
    /// Target material formula (this rig grows sulfides: MoS2, WS2).
    pub target_material: String,
    /// Substrate.
    pub substrate: String,
    /// Growth temperature window; the recipe grows at its middle.
    #[serde(default)]
    pub temperature_range: Option<TemperatureRange>,
    /// Minutes of growth (default 10).
    #[serde(default)]
    pub growth_minutes: Option<u32>,
}

/// `temperature_range` of the seed's input schema.
#[derive(Debug, Deserialize)]
pub struct TemperatureRange {
    /// Lower end.
    pub min: Option<f64>,
    /// Upper end.
    pub max: Option<f64>,
    /// `celsius` or `kelvin` (default celsius).
    pub unit: Option<String>,
}

/// What a checkpoint remembers.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Progress {
    completed: Vec<String>,
    growth_temperature: f64,
    unit: String,
    growth_minutes: u32,
}

fn rig(action: &str, args: Value) -> Result<Value, HostError> {
    instrument::command(RIG, action, &args)
}

struct Run {
    progress: Progress,
    step: u32,
    /// The caller's `constraints.confidence_threshold`.
    threshold: Option<f64>,
}

impl Run {
    fn done(&self, phase: &str) -> bool {
        self.progress.completed.iter().any(|p| p == phase)
    }

    fn checkpoint(&mut self, phase: &str) -> Result<(), Failure> {
        self.progress.completed.push(phase.to_owned());
        let id = checkpoints::save(phase, &self.progress)?;
        log::info(&format!("phase {phase} done, checkpoint {id}"));
        Ok(())
    }

    /// Runs one command; a refusal becomes the task's failure at this phase.
    fn command(&mut self, phase: &str, action: &str, args: Value) -> Result<Value, Failure> {
        self.step += 1;
        rig(action, args).map_err(|e| Failure::from(e).at(phase, self.step))
    }
}

fn growth_log() -> (Vec<Value>, String) {
    let rows = rig("growth_log", json!({}))
        .ok()
        .and_then(|v| v.get("rows").and_then(Value::as_array).cloned())
        .unwrap_or_default();
    let mut csv =
        String::from("time_s,temperature_c,setpoint_c,pressure_atm,film_layers,flows_sccm\n");
    for r in &rows {
        let flows = r["flows_sccm"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(g, f)| format!("{g}={f}"))
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .unwrap_or_default();
        csv.push_str(&format!(
            "{},{},{},{},{},{}\n",
            r["time_s"],
            r["temperature_c"],
            r["setpoint_c"],
            r["pressure_atm"],
            r["film_layers"],
            flows
        ));
    }
    (rows, csv)
}

fn synthesize(task: &Task, input: Input) -> Result<Value, Failure> {
    if !matches!(input.target_material.as_str(), "MoS2" | "WS2") {
        return Err(Failure::input(format!(
            "this rig grows sulfides from an H2S source: MoS2 or WS2, not {}",
            input.target_material
        )));
    }
    let mut run = Run {
        progress: Progress::default(),
        step: 0,
        threshold: task
            .constraints
            .get("confidence_threshold")
            .and_then(Value::as_f64),
    };
    if let Some(id) = &task.resume_from {
        run.progress = checkpoints::load(id)?;
        log::info(&format!(
            "resuming from {id} after {:?}",
            run.progress.completed
        ));
    }
    // A resumed task keeps its recipe unless the caller changed it.
    let range = input.temperature_range.as_ref();
    let unit = range
        .and_then(|r| r.unit.clone())
        .unwrap_or_else(|| "celsius".into());
    let (lo, hi) = match (range.and_then(|r| r.min), range.and_then(|r| r.max)) {
        (Some(lo), Some(hi)) if lo <= hi => (lo, hi),
        (Some(t), None) | (None, Some(t)) => (t, t),
        (None, None) => (700.0, 750.0),
        _ => {
            return Err(Failure::input(
                "temperature_range.min is above temperature_range.max",
            ));
        }
    };
    run.progress.growth_temperature = (lo + hi) / 2.0;
    run.progress.unit = unit;
    run.progress.growth_minutes = input.growth_minutes.unwrap_or(10).clamp(1, 240);
    let result = phases(&mut run, &input);
    match result {
        Ok(outputs) => Ok(outputs),
        Err(failure) => {
            // Keep what exists: the growth log so far, as partial outputs and
            // as a partial artifact.
            let (rows, csv) = growth_log();
            let _ = artifacts::create("growth_log_partial.csv", "text/csv", csv.as_bytes());
            Err(failure.with_partial_outputs(json!({
                "completed_phases": run.progress.completed,
                "growth_log": { "entries_before_failure": rows.len() },
            })))
        }
    }
}

fn phases(run: &mut Run, input: &Input) -> Result<Value, Failure> {
    let t = run.progress.growth_temperature;
    let unit = run.progress.unit.clone();
    // Preparation is redone on resume if the rig lost it (a shutdown stops
    // the pump): the checkpoint records progress, the rig holds the physics.
    let reading = instrument::read(RIG)?;
    if !run.done("preparation") || reading["pump"] != true {
        run.command("preparation", "set_pump", json!({"on": true}))?;
        run.command("preparation", "purge", json!({"seconds": 120, "sccm": 100}))?;
        run.command(
            "preparation",
            "set_gas_flow",
            json!({"gas": "Ar", "sccm": 50}),
        )?;
        if !run.done("preparation") {
            run.checkpoint("preparation")?;
        }
    }
    if !run.done("ramp") || !run.done("material_growth") {
        run.command(
            "ramp",
            "set_temperature",
            json!({"target": t, "unit": unit, "ramp_rate": 25}),
        )?;
        if !run.done("ramp") {
            run.checkpoint("ramp")?;
        }
    }
    if !run.done("material_growth") {
        run.command(
            "material_growth",
            "set_gas_flow",
            json!({"gas": "H2S", "sccm": 50}),
        )?;
        let seconds = u64::from(run.progress.growth_minutes) * 60;
        run.command("material_growth", "hold", json!({"seconds": seconds}))?;
        run.command(
            "material_growth",
            "set_gas_flow",
            json!({"gas": "H2S", "sccm": 0}),
        )?;
        run.checkpoint("material_growth")?;
    }
    if !run.done("cool_down") {
        run.command("cool_down", "cool_down", json!({}))?;
        run.checkpoint("cool_down")?;
    }
    let spectrum = run.command("characterization", "measure_raman", json!({}))?;
    let numbers = |key: &str| -> Vec<f64> {
        spectrum[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let (shift, intensity) = (numbers("raman_shift"), numbers("intensity"));
    let raw = serde_json::to_vec_pretty(&spectrum).unwrap_or_default();
    artifacts::create("raman_raw.json", "application/json", &raw)?;
    let (rows, csv) = growth_log();
    artifacts::create("growth_log.csv", "text/csv", csv.as_bytes())?;
    let Some(analysis) = raman::analyze(&shift, &intensity) else {
        return Err(Failure::execution(format!(
            "no {} film detected on {}: the Raman spectrum shows no E2g/A1g peaks",
            input.target_material, input.substrate
        ))
        .at("characterization", run.step));
    };
    if let Some(threshold) = run.threshold
        && analysis.confidence < threshold
    {
        return Err(Failure::execution(format!(
            "Raman confidence {} is below the requested confidence_threshold {threshold}",
            analysis.confidence
        ))
        .at("characterization", run.step));
    }
    run.checkpoint("characterization")?;
    Ok(json!({
        "peak_distance": analysis.peak_distance,
        "layer_count": analysis.layer_count,
        "confidence": analysis.confidence,
        "spectrum_data": { "raman_shift": shift, "intensity": intensity },
        "raman_analysis": analysis,
        "growth_log": rows,
        "recipe": {
            "growth_temperature": t,
            "unit": run.progress.unit,
            "growth_minutes": run.progress.growth_minutes,
        }
    }))
}

hcp_guest::export_capability!(synthesize);
