//! `hid-assistant`: the lab assistant of seed 004. Each step of the task
//! becomes one proposal (TYPE_TEXT, KEY_COMBO, MOUSE_MOVE, MOUSE_CLICK, with
//! its rationale) handed to the host's HID mediator; the assistant waits for
//! each outcome before proposing the next step, and stops at the first step
//! that is rejected or fails (later steps assume the earlier ones happened).
//!
//! It never touches the device: whether anything is typed depends on the
//! mode an operator set (OBSERVE records, SUGGEST asks, EXECUTE runs what an
//! operator approved).

use hcp_guest::hid::{self, Action, MouseButton, Movement, Outcome};
use hcp_guest::{Failure, HostError, Task, log};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The task's inputs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// What the steps are for, shown in the log.
    pub goal: String,
    /// The actions, in order.
    pub steps: Vec<Step>,
    /// How long to wait for each decision, in seconds (default 300).
    #[serde(default)]
    pub decision_timeout_s: Option<u32>,
}

/// One step: seed 004's `action_type`, `payload` and `rationale`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// `TYPE_TEXT`, `KEY_COMBO`, `MOUSE_MOVE` or `MOUSE_CLICK`.
    pub action_type: String,
    /// The action's payload (`text`; `keys`; `x`, `y`; `button`).
    pub payload: Value,
    /// Why, for the operator.
    pub rationale: String,
}

/// What happened to one step.
#[derive(Debug, Serialize, PartialEq)]
pub struct StepOutcome {
    /// The step's position, from 0.
    pub step: usize,
    /// The proposal's id, when the host recorded one.
    pub proposal_id: Option<String>,
    /// `executed`, `rejected`, `not_executed`, `failed`, `pending` or
    /// `refused` (the host refused the proposal itself).
    pub outcome: String,
    /// The execution id, or the reason.
    pub detail: String,
}

/// The task's outputs.
#[derive(Debug, Serialize)]
pub struct Output {
    /// Every step proposed, in order.
    pub steps: Vec<StepOutcome>,
    /// How many were executed.
    pub executed: usize,
    /// Whether every step was executed.
    pub all_executed: bool,
}

/// Turns a step into a WIT action.
///
/// # Errors
///
/// The step's type or payload does not fit (named in the message).
pub fn action(step: &Step) -> Result<Action, String> {
    let p = &step.payload;
    let field = |name: &str| {
        p.get(name)
            .ok_or_else(|| format!("{} needs payload.{name}", step.action_type))
    };
    let int = |name: &str| -> Result<i32, String> {
        field(name)?
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .ok_or_else(|| format!("payload.{name} must be an integer"))
    };
    match step.action_type.as_str() {
        "TYPE_TEXT" => Ok(Action::TypeText(
            field("text")?
                .as_str()
                .ok_or("payload.text must be a string")?
                .to_owned(),
        )),
        "KEY_COMBO" => {
            let keys = field("keys")?
                .as_array()
                .ok_or("payload.keys must be an array")?
                .iter()
                .map(|k| k.as_str().map(str::to_owned).ok_or("payload.keys holds strings"))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Action::KeyCombo(keys))
        }
        "MOUSE_MOVE" => Ok(Action::MouseMove(Movement {
            x: int("x")?,
            y: int("y")?,
        })),
        "MOUSE_CLICK" => {
            let button = match field("button")?.as_str() {
                Some("left") => MouseButton::Left,
                Some("right") => MouseButton::Right,
                Some("middle") => MouseButton::Middle,
                _ => return Err("payload.button must be left, right or middle".into()),
            };
            Ok(Action::MouseClick(button))
        }
        other => Err(format!(
            "action_type {other:?} is not TYPE_TEXT, KEY_COMBO, MOUSE_MOVE or MOUSE_CLICK"
        )),
    }
}

fn outcome(step: usize, id: Option<String>, o: Outcome) -> StepOutcome {
    let (outcome, detail) = match o {
        Outcome::Executed(e) => ("executed", e),
        Outcome::Rejected(r) => ("rejected", r),
        Outcome::NotExecuted(r) => ("not_executed", r),
        Outcome::Failed(r) => ("failed", r),
        Outcome::Pending => ("pending", "no decision in time".to_owned()),
    };
    StepOutcome {
        step,
        proposal_id: id,
        outcome: outcome.to_owned(),
        detail,
    }
}

fn step_no(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn assist(_task: &Task, input: Input) -> Result<Output, Failure> {
    if input.steps.is_empty() || input.steps.len() > 64 {
        return Err(Failure::input("steps must hold 1 to 64 actions"));
    }
    let actions = input
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| action(s).map_err(|e| Failure::input(format!("steps/{i}: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let timeout_ms = u64::from(input.decision_timeout_s.unwrap_or(300)) * 1000;
    log::info(&format!("{}: {} steps to propose", input.goal, actions.len()));
    let mut steps = Vec::new();
    for (i, (action, step)) in actions.iter().zip(&input.steps).enumerate() {
        let id = match hid::propose(action, &step.rationale) {
            Ok(id) => id,
            Err(HostError::InvalidArgument(m)) => {
                steps.push(StepOutcome {
                    step: i,
                    proposal_id: None,
                    outcome: "refused".into(),
                    detail: m,
                });
                break;
            }
            Err(e) => return Err(Failure::from(e).at("propose", step_no(i))),
        };
        let o = hid::wait_decided(&id, timeout_ms, 1000).map_err(|e| Failure::from(e).at("wait", step_no(i)))?;
        let done = outcome(i, Some(id), o);
        log::info(&format!("step {i}: {}", done.outcome));
        let go_on = matches!(done.outcome.as_str(), "executed" | "not_executed");
        steps.push(done);
        if !go_on {
            break;
        }
    }
    let executed = steps.iter().filter(|s| s.outcome == "executed").count();
    Ok(Output {
        all_executed: executed == input.steps.len(),
        executed,
        steps,
    })
}

hcp_guest::export_capability!(assist);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(action_type: &str, payload: Value) -> Step {
        Step {
            action_type: action_type.into(),
            payload,
            rationale: "because the protocol says so".into(),
        }
    }

    #[test]
    fn steps_become_actions() {
        assert!(matches!(
            action(&step("TYPE_TEXT", json!({"text": "hello"}))),
            Ok(Action::TypeText(t)) if t == "hello"
        ));
        assert!(matches!(
            action(&step("KEY_COMBO", json!({"keys": ["ctrl", "s"]}))),
            Ok(Action::KeyCombo(k)) if k == ["ctrl", "s"]
        ));
        assert!(matches!(
            action(&step("MOUSE_MOVE", json!({"x": -5, "y": 7}))),
            Ok(Action::MouseMove(Movement { x: -5, y: 7 }))
        ));
        assert!(matches!(
            action(&step("MOUSE_CLICK", json!({"button": "right"}))),
            Ok(Action::MouseClick(MouseButton::Right))
        ));
    }

    #[test]
    fn malformed_steps_are_named() {
        for (t, p, want) in [
            ("TYPE_TEXT", json!({}), "TYPE_TEXT needs payload.text"),
            ("TYPE_TEXT", json!({"text": 3}), "payload.text must be a string"),
            ("KEY_COMBO", json!({"keys": "ctrl"}), "payload.keys must be an array"),
            ("MOUSE_MOVE", json!({"x": 1e12, "y": 0}), "payload.x must be an integer"),
            ("MOUSE_MOVE", json!({"x": 4294967296_i64, "y": 0}), "payload.x must be an integer"),
            ("MOUSE_CLICK", json!({"button": "thumb"}), "payload.button must be left, right or middle"),
            ("SHELL", json!({}), "action_type \"SHELL\" is not"),
        ] {
            let e = action(&step(t, p)).expect_err(t);
            assert!(e.contains(want), "{e}");
        }
    }
}
