//! The host's side of the serial line to the HID executor.
//!
//! Drives both kinds of executor the same way:
//! - one that reports `device_status` (answers `{"type":"get_status"}` with
//!   its status, kill switch included, and may send status lines on its
//!   own): a kill switch reported DISABLED is an error here, and the
//!   contract version it reports must be this host's major
//!   ([`wire::CONTRACT_MAJOR`]);
//! - the public firmware, which reports no status and answers every line
//!   with ok/error (`get_status` gets "Unknown command type"): its physical
//!   kill switch cuts the line, which shows here as a timeout or a
//!   disconnect.
//!
//! Every request waits for its answer with a deadline; lines are bounded
//! ([`wire::MAX_ANSWER_BYTES`]). Any failure is returned, never retried:
//! the mediator halts on it.

use crate::action::Mode;
use crate::wire::{
    self, ActionExecute, Answer, AnswerStatus, DeviceStatus, Incoming, KillSwitch, LineBuffer,
    WireError,
};
use serialport::{ClearBuffer, SerialPort};
use std::io::{ErrorKind, Read as _, Write as _};
use std::time::{Duration, Instant};

/// How to reach the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceConfig {
    /// The serial port's path (`/dev/ttyACM0`, or a simulator's pty).
    pub path: String,
    /// How long to wait for each answer.
    pub answer_timeout: Duration,
}

impl DeviceConfig {
    /// The port at `path`, with a one-second answer timeout.
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            answer_timeout: Duration::from_secs(1),
        }
    }
}

/// What the handshake found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceKind {
    /// An executor that reports its status.
    Reporting {
        /// Its id.
        device_id: String,
        /// The contract version it speaks, if it says.
        contract_version: Option<String>,
    },
    /// The public firmware: no status, ok/error answers only.
    PublicFirmware,
}

/// A failure talking to the executor. Each one halts HID execution.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The port cannot be opened.
    #[error("HID executor {path}: cannot open: {source}")]
    Open {
        /// The port.
        path: String,
        /// Why.
        #[source]
        source: serialport::Error,
    },
    /// No answer in time.
    #[error("HID executor did not answer {request} within {waited_ms} ms")]
    Timeout {
        /// What the host had sent.
        request: &'static str,
        /// How long it waited.
        waited_ms: u128,
    },
    /// The line is gone.
    #[error("HID executor disconnected during {request}: {reason}")]
    Disconnected {
        /// What the host was doing.
        request: &'static str,
        /// What the port said.
        reason: String,
    },
    /// An answer that is not one.
    #[error("HID executor answered {request} with garbage: {reason}")]
    Garbage {
        /// What the host had sent.
        request: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// An error answer.
    #[error("HID executor refused {request}: {message}")]
    Refused {
        /// What the host had sent.
        request: &'static str,
        /// The device's message.
        message: String,
    },
    /// The kill switch is off.
    #[error("HID executor {device_id} reports its kill switch DISABLED")]
    KillSwitchDisabled {
        /// The device.
        device_id: String,
    },
    /// The device speaks another major version of the contracts.
    #[error(
        "HID executor {device_id} speaks contract version {device}, this host speaks {}",
        wire::CONTRACT_MAJOR
    )]
    VersionMismatch {
        /// The device.
        device_id: String,
        /// Its version.
        device: String,
    },
    /// The line was refused before it was written.
    #[error("HID line not written: {0}")]
    Wire(#[from] WireError),
    /// Writing failed before any byte of the line reached the port (the
    /// line is gone, or it would not take the bytes in time): the device
    /// received nothing.
    #[error("HID executor disconnected during {request}: {reason} (nothing was written)")]
    NotWritten {
        /// What the host was sending.
        request: &'static str,
        /// What the port said.
        reason: String,
    },
}

/// An open line to the executor.
pub struct Device {
    port: Box<dyn SerialPort>,
    buf: LineBuffer,
    config: DeviceConfig,
    kind: Option<DeviceKind>,
    last_status: Option<DeviceStatus>,
    /// Whether a byte of the last request's line reached the port.
    line_started: bool,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("path", &self.config.path)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// Opens the serial port at 115200 baud, exclusively, and drops any
    /// stale input.
    ///
    /// # Ambient authority
    ///
    /// This is the only code that opens a serial port: it opens the path in
    /// `config`, which an operator chose. Guests never reach it.
    ///
    /// # Errors
    ///
    /// [`DeviceError::Open`].
    pub fn open(config: DeviceConfig) -> Result<Self, DeviceError> {
        let open_err = |source| DeviceError::Open {
            path: config.path.clone(),
            source,
        };
        let port = serialport::new(config.path.as_str(), wire::BAUD_RATE)
            .timeout(config.answer_timeout)
            .open()
            .map_err(open_err)?;
        port.clear(ClearBuffer::Input).map_err(open_err)?;
        Ok(Self {
            port,
            buf: LineBuffer::new(wire::MAX_ANSWER_BYTES),
            config,
            kind: None,
            last_status: None,
            line_started: false,
        })
    }

    /// The port's path.
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// What the last handshake found.
    pub fn kind(&self) -> Option<&DeviceKind> {
        self.kind.as_ref()
    }

    /// The last status the device reported.
    pub fn last_status(&self) -> Option<&DeviceStatus> {
        self.last_status.as_ref()
    }

    /// Drops stale input, asks for the device's status and checks its
    /// contract version and kill switch. An executor that reports no status
    /// (answers "Unknown command type") is the public firmware.
    ///
    /// # Errors
    ///
    /// [`DeviceError::VersionMismatch`], [`DeviceError::KillSwitchDisabled`],
    /// or any failure of the exchange.
    pub fn handshake(&mut self) -> Result<DeviceKind, DeviceError> {
        const REQUEST: &str = "get_status";
        self.kind = None;
        self.buf.clear();
        // Best effort: a port that cannot clear still works.
        let _ = self.port.clear(ClearBuffer::Input);
        self.write(&wire::get_status_line()?, REQUEST)?;
        let kind = match self.read(REQUEST, self.deadline())? {
            Incoming::Status(status) => {
                if let Some(version) = &status.contract_version
                    && version.split('.').next() != Some(wire::CONTRACT_MAJOR)
                {
                    return Err(DeviceError::VersionMismatch {
                        device_id: status.device_id.clone(),
                        device: version.clone(),
                    });
                }
                DeviceKind::Reporting {
                    device_id: status.device_id.clone(),
                    contract_version: status.contract_version.clone(),
                }
            }
            Incoming::Answer(Answer {
                status: AnswerStatus::Error,
                message: Some(m),
                ..
            }) if m.starts_with("Unknown command type") => DeviceKind::PublicFirmware,
            Incoming::Answer(a) => {
                return Err(DeviceError::Garbage {
                    request: REQUEST,
                    reason: format!("an answer instead of a status: {}", describe(&a)),
                });
            }
        };
        self.kind = Some(kind.clone());
        Ok(kind)
    }

    /// The device's current status, or `None` for the public firmware
    /// (which reports none; nothing is sent).
    ///
    /// # Errors
    ///
    /// [`DeviceError::KillSwitchDisabled`], or any failure of the exchange.
    pub fn status(&mut self) -> Result<Option<DeviceStatus>, DeviceError> {
        const REQUEST: &str = "get_status";
        if matches!(self.kind, Some(DeviceKind::PublicFirmware)) {
            return Ok(None);
        }
        self.take_unasked(REQUEST)?;
        let deadline = self.deadline();
        self.write(&wire::get_status_line()?, REQUEST)?;
        match self.read(REQUEST, deadline)? {
            Incoming::Status(s) => Ok(Some(s)),
            Incoming::Answer(a) => Err(DeviceError::Garbage {
                request: REQUEST,
                reason: format!("an answer instead of a status: {}", describe(&a)),
            }),
        }
    }

    /// Sets the device's mode.
    ///
    /// # Errors
    ///
    /// [`DeviceError::Refused`] on an error answer, or any failure of the
    /// exchange.
    pub fn set_mode(&mut self, mode: Mode) -> Result<Answer, DeviceError> {
        let request = match mode {
            Mode::Execute => "set_mode EXECUTE",
            Mode::Suggest => "set_mode SUGGEST",
            Mode::Observe => "set_mode OBSERVE",
        };
        let line = wire::set_mode_line(mode)?;
        self.answer(&line, request)
    }

    /// Runs one action: writes its `action_execute` line (checked as the
    /// firmware checks it) and waits for the answer.
    ///
    /// # Errors
    ///
    /// [`DeviceError::Wire`] before anything is written;
    /// [`DeviceError::Refused`] on an error answer; any failure of the
    /// exchange.
    pub fn execute(&mut self, cmd: &ActionExecute) -> Result<Answer, DeviceError> {
        const REQUEST: &str = "action_execute";
        self.line_started = false;
        let line = wire::execute_line(cmd)?;
        let answer = self.answer(&line, REQUEST)?;
        // An answer that names another action is not this one's (a device
        // out of step with the host): never taken as its execution.
        if let Some(action) = &answer.action
            && !action.eq_ignore_ascii_case(cmd.action_type.as_str())
        {
            return Err(DeviceError::Garbage {
                request: REQUEST,
                reason: format!(
                    "an answer for {action} to an execution of {}",
                    cmd.action_type
                ),
            });
        }
        Ok(answer)
    }

    /// Whether any byte of the last request's line reached the port: when
    /// it failed, `false` says the device received nothing of it (what the
    /// device reported unasked refused it first, the line could not be
    /// encoded, or nothing could be written).
    pub fn line_started(&self) -> bool {
        self.line_started
    }

    fn answer(&mut self, line: &[u8], request: &'static str) -> Result<Answer, DeviceError> {
        self.line_started = false;
        self.take_unasked(request)?;
        // One deadline for the whole request: status lines the device
        // sends meanwhile do not extend it.
        let deadline = self.deadline();
        self.write(line, request)?;
        loop {
            match self.read(request, deadline)? {
                // A status the device sent on its own: noted (and checked)
                // by `read`; keep waiting for the answer.
                Incoming::Status(_) => {}
                Incoming::Answer(a) if a.status == AnswerStatus::Ok => return Ok(a),
                Incoming::Answer(a) => {
                    return Err(DeviceError::Refused {
                        request,
                        message: a.message.unwrap_or_else(|| "(no message)".into()),
                    });
                }
            }
        }
    }

    /// Writes `line`. A failure before the first byte was taken is
    /// [`DeviceError::NotWritten`] (the device received nothing); after it,
    /// a timeout or a disconnect (part of the line may have arrived).
    fn write(&mut self, line: &[u8], request: &'static str) -> Result<(), DeviceError> {
        let mut written = 0;
        while written < line.len() {
            match self.port.write(&line[written..]) {
                Ok(0) => {
                    return Err(self.write_error(
                        written,
                        request,
                        std::io::Error::from(ErrorKind::WriteZero),
                    ));
                }
                Ok(n) => {
                    written += n;
                    self.line_started = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.write_error(written, request, e)),
            }
        }
        self.port
            .flush()
            .map_err(|e| self.write_error(line.len(), request, e))
    }

    fn write_error(&self, written: usize, request: &'static str, e: std::io::Error) -> DeviceError {
        match e.kind() {
            _ if written == 0 => DeviceError::NotWritten {
                request,
                reason: e.to_string(),
            },
            ErrorKind::TimedOut => DeviceError::Timeout {
                request,
                waited_ms: self.config.answer_timeout.as_millis(),
            },
            _ => DeviceError::Disconnected {
                request,
                reason: e.to_string(),
            },
        }
    }

    /// The deadline of a request starting now.
    fn deadline(&self) -> Instant {
        Instant::now() + self.config.answer_timeout
    }

    /// Before a request: what the device sent unasked and the host has not
    /// read is read now. A status is recorded (a DISABLED kill switch
    /// refuses the request); an answer nobody waits for (one sent twice,
    /// or late to a request given up on) is dropped, so that it is never
    /// taken for this request's answer; so is a line that does not parse.
    fn take_unasked(&mut self, request: &'static str) -> Result<(), DeviceError> {
        if let Ok(waiting) = self.port.bytes_to_read()
            && waiting > 0
        {
            let mut chunk = vec![0u8; usize::try_from(waiting).unwrap_or(0).min(64 << 10)];
            if let Ok(n) = self.port.read(&mut chunk) {
                self.buf.push(&chunk[..n]);
            }
        }
        while let Some(line) = self.buf.next_line() {
            match line.and_then(|l| wire::parse_line(&l)) {
                Ok(Incoming::Status(s)) => {
                    self.last_status = Some(s.clone());
                    if s.kill_switch_state == KillSwitch::Disabled {
                        return Err(DeviceError::KillSwitchDisabled {
                            device_id: s.device_id,
                        });
                    }
                }
                Ok(Incoming::Answer(a)) => tracing::warn!(
                    "HID executor {}: dropped an answer no request waits for, before {request}: {}",
                    self.config.path,
                    describe(&a)
                ),
                Err(e) => tracing::warn!(
                    "HID executor {}: dropped a line that does not parse, before {request}: {e}",
                    self.config.path
                ),
            }
        }
        Ok(())
    }

    /// The next line from the device, by `deadline`. A status line is
    /// recorded and a DISABLED kill switch is an error.
    fn read(&mut self, request: &'static str, deadline: Instant) -> Result<Incoming, DeviceError> {
        loop {
            if let Some(line) = self.buf.next_line() {
                let incoming =
                    line.and_then(|l| wire::parse_line(&l))
                        .map_err(|e| DeviceError::Garbage {
                            request,
                            reason: match e {
                                WireError::Garbage(s) => s,
                                other => other.to_string(),
                            },
                        })?;
                if let Incoming::Status(s) = &incoming {
                    self.last_status = Some(s.clone());
                    if s.kill_switch_state == KillSwitch::Disabled {
                        return Err(DeviceError::KillSwitchDisabled {
                            device_id: s.device_id.clone(),
                        });
                    }
                }
                return Ok(incoming);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(DeviceError::Timeout {
                    request,
                    waited_ms: self.config.answer_timeout.as_millis(),
                });
            }
            let _ = self.port.set_timeout(deadline - now);
            let mut chunk = [0u8; 512];
            match self.port.read(&mut chunk) {
                Ok(0) => {
                    return Err(DeviceError::Disconnected {
                        request,
                        reason: "end of file".into(),
                    });
                }
                Ok(n) => self.buf.push(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => {
                    return Err(DeviceError::Disconnected {
                        request,
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
}

fn describe(a: &Answer) -> String {
    serde_json::to_string(a).unwrap_or_else(|_| format!("{a:?}"))
}
