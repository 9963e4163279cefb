//! The simulated executor's behaviour, line by line, on its own clock: a
//! pure state machine the serving thread drives.
//!
//! It answers like the public firmware (`{"status":"ok"|"error",...}`,
//! with its messages), runs the firmware's checks on every `action_execute`
//! ([`wire::firmware_check`]), refuses actions outside EXECUTE mode, and
//! enforces the rate limit on its own clock. Where it differs, it is
//! stricter, so that tests catch a host that misbehaves: an action sooner
//! than 100 ms after the previous one is refused (`rate_limited`, as the
//! ESP32 firmware does) where the Pico firmware would sleep; and commands of
//! the firmware's legacy protocol (`{"type":"type_text",...}`, which carry
//! no approval) are refused.

use super::{Flavour, Performed};
use crate::action::Mode;
use crate::wire::{self, KillSwitch};
use serde_json::{Value, json};
use std::time::Duration;

/// The executor's state.
#[derive(Debug)]
pub(super) struct Firmware {
    pub(super) flavour: Flavour,
    pub(super) device_id: String,
    pub(super) contract_version: Option<String>,
    pub(super) min_delay: Duration,
    pub(super) mode: Mode,
    pub(super) kill_switch: KillSwitch,
    last_action: Option<Duration>,
    actions: u64,
}

impl Firmware {
    pub(super) fn new(
        flavour: Flavour,
        device_id: String,
        contract_version: Option<String>,
        min_delay: Duration,
    ) -> Self {
        Self {
            flavour,
            device_id,
            contract_version,
            min_delay,
            mode: Mode::Observe,
            kill_switch: KillSwitch::Armed,
            last_action: None,
            actions: 0,
        }
    }

    /// Flips the kill switch; turning it off drops the device to OBSERVE.
    pub(super) fn set_kill_switch(&mut self, state: KillSwitch) {
        self.kill_switch = state;
        if state == KillSwitch::Disabled {
            self.mode = Mode::Observe;
        }
    }

    /// Handles one line received at `now` (device clock). Returns the answer
    /// line (without newline), or `None` when the line is cut (the public
    /// firmware with its kill switch off), and the action performed.
    pub(super) fn handle(
        &mut self,
        line: &[u8],
        now: Duration,
    ) -> (Option<Value>, Option<Performed>) {
        if self.flavour == Flavour::PublicFirmware && self.kill_switch == KillSwitch::Disabled {
            // The physical switch cuts the line: nothing arrives, nothing
            // answers.
            return (None, None);
        }
        let command: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return (Some(error(&format!("JSON parse error: {e}"))), None),
        };
        if command.get("execution_id").is_some() {
            return self.execute(&command, now);
        }
        let answer = match command["type"].as_str().unwrap_or_default() {
            "set_mode" => self.set_mode(&command),
            "get_status" if self.flavour == Flavour::Reporting => self.status(),
            other => error(&format!("Unknown command type: {other}")),
        };
        (Some(answer), None)
    }

    fn set_mode(&mut self, command: &Value) -> Value {
        let requested = command["mode"].as_str().unwrap_or_default().to_uppercase();
        let Ok(mode) = requested.parse::<Mode>() else {
            return error(&format!("Invalid mode: {requested}"));
        };
        if mode == Mode::Execute && self.kill_switch == KillSwitch::Disabled {
            return error("kill switch DISABLED");
        }
        self.mode = mode;
        json!({ "status": "ok", "message": format!("Mode changed to {mode}") })
    }

    pub(super) fn status(&self) -> Value {
        let mut status = json!({
            "device_id": self.device_id,
            "timestamp": hcp_contracts::message::now_rfc3339(),
            "mode": self.mode,
            "led_state": self.mode == Mode::Execute,
            "kill_switch_state": self.kill_switch,
            "uptime_seconds": 0,
            "firmware_version": "v1.0.0",
            "action_count": self.actions,
        });
        if let Some(v) = &self.contract_version {
            status["contract_version"] = json!(v);
        }
        status
    }

    fn execute(&mut self, command: &Value, now: Duration) -> (Option<Value>, Option<Performed>) {
        if let Err(e) = wire::firmware_check(command) {
            return (
                Some(error(&format!("Contract validation failed: {e}"))),
                None,
            );
        }
        if self.kill_switch == KillSwitch::Disabled {
            return (Some(error("kill switch DISABLED")), None);
        }
        if self.mode != Mode::Execute {
            return (
                Some(error(&format!("HID disabled in {} mode", self.mode))),
                None,
            );
        }
        if let Some(last) = self.last_action
            && now.saturating_sub(last) < self.min_delay
        {
            return (Some(error("rate_limited")), None);
        }
        if command["action_type"] == "KEY_COMBO"
            && command["payload"]["keys"].as_array().is_some_and(|keys| {
                keys.iter()
                    .any(|k| !k.as_str().is_some_and(|k| crate::action::KEYS.contains(&k)))
            })
        {
            return (Some(error("Key combo error: unknown key")), None);
        }
        self.last_action = Some(now);
        self.actions += 1;
        let action_type = command["action_type"].as_str().unwrap_or_default();
        let performed = Performed {
            at_us: u64::try_from(now.as_micros()).unwrap_or(u64::MAX),
            timestamp: hcp_contracts::message::now_rfc3339(),
            execution_id: command["execution_id"].as_str().unwrap_or_default().into(),
            proposal_id: command["proposal_id"].as_str().unwrap_or_default().into(),
            action_type: action_type.into(),
            payload: command["payload"].clone(),
        };
        let answer = json!({ "status": "ok", "action": action_type.to_lowercase() });
        (Some(answer), Some(performed))
    }
}

fn error(message: &str) -> Value {
    json!({ "status": "error", "message": message })
}
