//! The executor's protocol, as the lab assistant's public firmware speaks it:
//! newline-delimited JSON at 115200 baud.
//!
//! Host to device, one JSON object per line:
//! - `{"type":"set_mode","mode":"EXECUTE"}` / `"OBSERVE"`: the device's mode;
//! - `{"type":"get_status"}`: asks for a `device_status` line (this host's
//!   addition; the public firmware answers it with an error, which is how
//!   the host tells it reports no status);
//! - an `action_execute` object ([`ActionExecute`]): runs one action.
//!
//! Device to host, one line per line received: an answer
//! `{"status":"ok"|"error","message":...,"action":...}`, or a
//! `device_status` object (recognised by its `kill_switch_state`), which
//! executors may also send on their own.
//!
//! Every line the host writes is produced by serializing a value
//! ([`encode`]): serde_json escapes control characters inside strings, so
//! nothing inside a value (a guest's newline, NUL, quote) can end the line;
//! [`encode`] still refuses any line holding a raw line break or longer than
//! [`MAX_LINE_BYTES`]. An `action_execute` line passes the firmware's own
//! checks ([`firmware_check`]) and the shipped schema before it is written.
//! Answers are read through [`LineBuffer`], bounded by [`MAX_ANSWER_BYTES`].

use crate::action::{
    ActionType, CheckedAction, ExecutionId, MAX_KEYS, MAX_TEXT_LENGTH, MIN_ACTION_DELAY_MS, Mode,
    OperatorId, ProposalId, is_wire_id, safety_bounds,
};
use hcp_contracts::problem::{self, Problem};
use hcp_contracts::schema::SchemaId;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The line's speed.
pub const BAUD_RATE: u32 = 115_200;
/// Longest line the host writes, newline excluded. The longest legal action
/// (1024 printable ASCII characters, each escaped as at most two bytes) is
/// well below it.
pub const MAX_LINE_BYTES: usize = 4096;
/// Longest line the host accepts from the device, newline excluded.
pub const MAX_ANSWER_BYTES: usize = 2048;
/// The major version of the HID contracts this host speaks.
pub const CONTRACT_MAJOR: &str = "1";

/// What went wrong producing or reading a line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The value could not be serialized.
    #[error("cannot serialize the line: {0}")]
    Serialize(String),
    /// A serialized line held a raw line break (never expected from
    /// serde_json; refused all the same).
    #[error("refusing to write a line holding a raw line break")]
    LineBreak,
    /// A line over the length bound.
    #[error("line of {bytes} bytes is over the bound of {max}")]
    TooLong {
        /// Its length so far.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// The line would fail the firmware's own checks.
    #[error("the executor's firmware would refuse the line: {0}")]
    Firmware(#[from] FirmwareRefusal),
    /// The line does not fit the shipped `action_execute` schema.
    #[error("the line does not fit action_execute:\n{}", problem::list(.0))]
    Contract(Vec<Problem>),
    /// A line from the device that is neither an answer nor a status report.
    #[error("garbled line from the device: {0}")]
    Garbage(String),
}

/// The operator approval an execution carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorApproval {
    /// When the operator approved (RFC 3339).
    pub decision_timestamp: String,
    /// Who approved.
    pub operator_id: String,
}

/// Seed 004's `action_execute`: one approved action for the executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionExecute {
    /// This execution's id.
    pub execution_id: String,
    /// The approved proposal's id.
    pub proposal_id: String,
    /// When the host initiated the execution (RFC 3339).
    pub timestamp: String,
    /// Always `EXECUTE`.
    pub mode: Mode,
    /// The action's kind.
    pub action_type: ActionType,
    /// The action's payload.
    pub payload: Value,
    /// Always `{"max_text_length":1024,"min_action_delay_ms":100}`.
    pub safety_bounds: Value,
    /// The approval on record.
    pub operator_approval: OperatorApproval,
}

impl ActionExecute {
    /// The execution of `action` (of proposal `proposal_id`), approved by
    /// `operator` at `decision_timestamp`.
    pub fn new(
        execution_id: &ExecutionId,
        proposal_id: &ProposalId,
        action: &CheckedAction,
        operator: &OperatorId,
        decision_timestamp: &str,
    ) -> Self {
        Self {
            execution_id: execution_id.as_str().to_owned(),
            proposal_id: proposal_id.as_str().to_owned(),
            timestamp: hcp_contracts::message::now_rfc3339(),
            mode: Mode::Execute,
            action_type: action.action_type(),
            payload: action.payload(),
            safety_bounds: safety_bounds(),
            operator_approval: OperatorApproval {
                decision_timestamp: decision_timestamp.to_owned(),
                operator_id: operator.as_str().to_owned(),
            },
        }
    }
}

/// Serializes `value` as one line, newline included.
///
/// # Errors
///
/// [`WireError::Serialize`], [`WireError::LineBreak`], [`WireError::TooLong`].
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let mut line = serde_json::to_vec(value).map_err(|e| WireError::Serialize(e.to_string()))?;
    if line.iter().any(|b| matches!(b, b'\n' | b'\r')) {
        return Err(WireError::LineBreak);
    }
    if line.len() > MAX_LINE_BYTES {
        return Err(WireError::TooLong {
            bytes: line.len(),
            max: MAX_LINE_BYTES,
        });
    }
    line.push(b'\n');
    Ok(line)
}

/// The `set_mode` line for `mode`.
///
/// # Errors
///
/// As [`encode`] (never, for these small values).
pub fn set_mode_line(mode: Mode) -> Result<Vec<u8>, WireError> {
    encode(&json!({ "type": "set_mode", "mode": mode }))
}

/// The `get_status` line.
///
/// # Errors
///
/// As [`encode`] (never).
pub fn get_status_line() -> Result<Vec<u8>, WireError> {
    encode(&json!({ "type": "get_status" }))
}

/// The `action_execute` line for `cmd`, checked as the firmware checks it
/// and against the shipped schema.
///
/// # Errors
///
/// [`WireError::Firmware`], [`WireError::Contract`], or as [`encode`].
pub fn execute_line(cmd: &ActionExecute) -> Result<Vec<u8>, WireError> {
    let value = serde_json::to_value(cmd).map_err(|e| WireError::Serialize(e.to_string()))?;
    firmware_check(&value)?;
    SchemaId::HidActionExecute
        .validate(&value, "")
        .map_err(WireError::Contract)?;
    encode(&value)
}

/// What the public firmware answers to an `action_execute` object it
/// refuses: its own message, word for word (the firmware's contract, so
/// the simulated executor can answer the same).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FirmwareRefusal(pub String);

/// The public firmware's checks of an `action_execute` object (its
/// `contract_validator.validate_execute_command`, plus the id bounds of its
/// contract), with its messages. The simulated executor runs the same
/// checks; the host runs them before writing.
///
/// # Errors
///
/// The firmware's message for the first check that fails.
pub fn firmware_check(cmd: &Value) -> Result<(), FirmwareRefusal> {
    const REQUIRED: [&str; 7] = [
        "execution_id",
        "proposal_id",
        "timestamp",
        "mode",
        "action_type",
        "payload",
        "safety_bounds",
    ];
    let Some(obj) = cmd.as_object() else {
        return Err(FirmwareRefusal("command is not an object".into()));
    };
    if let Some(missing) = REQUIRED.iter().find(|f| !obj.contains_key(**f)) {
        return Err(FirmwareRefusal(format!(
            "Missing required field: {missing}"
        )));
    }
    for id in ["execution_id", "proposal_id"] {
        if !obj[id].as_str().is_some_and(is_wire_id) {
            return Err(FirmwareRefusal(format!(
                "Invalid {id}: must be 8 to 64 characters from [A-Za-z0-9_-]"
            )));
        }
    }
    if obj["mode"] != "EXECUTE" {
        return Err(FirmwareRefusal(format!(
            "Invalid mode: {} (HID only in EXECUTE mode)",
            obj["mode"]
        )));
    }
    let action_type = obj["action_type"].as_str().unwrap_or_default();
    if !["TYPE_TEXT", "KEY_COMBO", "MOUSE_MOVE", "MOUSE_CLICK"].contains(&action_type) {
        return Err(FirmwareRefusal(format!(
            "Invalid action_type: {}",
            obj["action_type"]
        )));
    }
    let bounds = &obj["safety_bounds"];
    if bounds["max_text_length"] != MAX_TEXT_LENGTH {
        return Err(FirmwareRefusal(
            "safety_bounds.max_text_length must be 1024".into(),
        ));
    }
    if bounds["min_action_delay_ms"] != MIN_ACTION_DELAY_MS {
        return Err(FirmwareRefusal(
            "safety_bounds.min_action_delay_ms must be 100".into(),
        ));
    }
    let payload = &obj["payload"];
    match action_type {
        "TYPE_TEXT" => {
            let Some(text) = payload["text"].as_str() else {
                return Err(FirmwareRefusal(
                    "TYPE_TEXT requires 'text' in payload".into(),
                ));
            };
            let chars = text.chars().count();
            if chars > MAX_TEXT_LENGTH {
                return Err(FirmwareRefusal(format!(
                    "Text length {chars} exceeds MAX_TEXT_LENGTH (1024)"
                )));
            }
        }
        "KEY_COMBO" => {
            let Some(keys) = payload["keys"].as_array() else {
                return Err(FirmwareRefusal(
                    "KEY_COMBO requires 'keys' in payload".into(),
                ));
            };
            if keys.is_empty() || keys.len() > MAX_KEYS {
                return Err(FirmwareRefusal("KEY_COMBO must have 1-5 keys".into()));
            }
        }
        "MOUSE_MOVE" => {
            if !payload["x"].is_i64() || !payload["y"].is_i64() {
                return Err(FirmwareRefusal(
                    "MOUSE_MOVE x and y must be integers".into(),
                ));
            }
        }
        _ => {
            if !["left", "right", "middle"]
                .contains(&payload["button"].as_str().unwrap_or_default())
            {
                return Err(FirmwareRefusal(format!(
                    "Invalid button: {}",
                    payload["button"]
                )));
            }
        }
    }
    Ok(())
}

/// How the device answered a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerStatus {
    /// Done.
    Ok,
    /// Refused or failed.
    Error,
}

/// The device's answer to one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// `ok` or `error`.
    pub status: AnswerStatus,
    /// What happened, in the device's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The action performed (`type_text`, ...), on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// Kill switch state, as a device reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum KillSwitch {
    /// HID may run.
    Armed,
    /// The operator's physical switch is off: nothing may run.
    Disabled,
    /// The device does not know.
    Unknown,
}

/// A `device_status` report (the fields the host acts on; the whole object
/// passed the shipped schema).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStatus {
    /// The executor's id.
    pub device_id: String,
    /// When it reported.
    pub timestamp: String,
    /// Its mode.
    pub mode: Mode,
    /// The HID ARMED LED.
    pub led_state: bool,
    /// The kill switch.
    pub kill_switch_state: KillSwitch,
    /// Seconds since boot.
    pub uptime_seconds: u64,
    /// The contract version it speaks, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
    /// Its firmware version, if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<String>,
}

/// One line from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// An answer to a line the host wrote.
    Answer(Answer),
    /// A status report.
    Status(DeviceStatus),
}

/// Parses one line from the device (without its newline).
///
/// # Errors
///
/// [`WireError::Garbage`] for anything that is neither a well-formed answer
/// nor a `device_status` passing the schema.
pub fn parse_line(line: &[u8]) -> Result<Incoming, WireError> {
    let garbage = || WireError::Garbage(excerpt(line));
    let text = std::str::from_utf8(line).map_err(|_| garbage())?;
    let value: Value = serde_json::from_str(text.trim_end_matches('\r')).map_err(|_| garbage())?;
    if value.get("status").is_some() {
        return serde_json::from_value(value)
            .map(Incoming::Answer)
            .map_err(|_| garbage());
    }
    if value.get("kill_switch_state").is_some() {
        if let Err(problems) = SchemaId::HidDeviceStatus.validate(&value, "") {
            return Err(WireError::Garbage(format!(
                "{} (device_status: {})",
                excerpt(line),
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        return serde_json::from_value(value)
            .map(Incoming::Status)
            .map_err(|_| garbage());
    }
    Err(garbage())
}

/// At most 80 bytes of `line`, ASCII-escaped, for messages and logs.
pub fn excerpt(line: &[u8]) -> String {
    let shown = &line[..line.len().min(80)];
    let mut s = shown.escape_ascii().to_string();
    if line.len() > shown.len() {
        s.push_str(&format!("... ({} bytes)", line.len()));
    }
    format!("\"{s}\"")
}

/// Splits bytes into lines, each bounded.
///
/// A line longer than the bound is an error; the rest of it, up to its
/// newline, is dropped, so the next line starts clean.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    max: usize,
    skipping: bool,
}

impl LineBuffer {
    /// A buffer for lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            max,
            skipping: false,
        }
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Drops everything buffered.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.skipping = false;
    }

    /// The next complete line, without its newline.
    ///
    /// # Errors
    ///
    /// [`WireError::TooLong`] once for a line over the bound.
    pub fn next_line(&mut self) -> Option<Result<Vec<u8>, WireError>> {
        loop {
            match self.buf.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    let line: Vec<u8> = self.buf.drain(..=at).take(at).collect();
                    if self.skipping {
                        self.skipping = false;
                        continue;
                    }
                    if line.len() > self.max {
                        return Some(Err(WireError::TooLong {
                            bytes: line.len(),
                            max: self.max,
                        }));
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some(Ok(line));
                }
                None if self.buf.len() > self.max && !self.skipping => {
                    let bytes = self.buf.len();
                    self.buf.clear();
                    self.skipping = true;
                    return Some(Err(WireError::TooLong {
                        bytes,
                        max: self.max,
                    }));
                }
                None => {
                    if self.skipping {
                        self.buf.clear();
                    }
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
