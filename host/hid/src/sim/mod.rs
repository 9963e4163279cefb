//! A simulated HID executor on a pseudo-terminal, for tests and for
//! `hcp hid sim`.
//!
//! [`Simulator::start`] opens a pty pair, serves the controller end on a
//! thread, and exposes the path of the device end ([`Simulator::path`]): the
//! host opens it exactly like a real serial port. The simulator acts as the
//! executor ([`firmware`]): modes, the firmware's checks, the rate limit on
//! its own clock, a kill switch, status reports (flavour
//! [`Flavour::Reporting`]) or none ([`Flavour::PublicFirmware`]: answers
//! ok/error only, and its kill switch cuts the line). Tests inject faults
//! ([`Fault`]). Every action it performs ("types", clicks) is recorded with
//! its time on the device clock, in memory ([`Simulator::performed`]) and,
//! when asked, as JSON lines in a file.
//!
//! # Ambient authority
//!
//! Opens a new pseudo-terminal pair, and the record file it is given.

mod firmware;

use crate::wire::{self, KillSwitch, LineBuffer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serialport::{SerialPort as _, TTYPort};
use std::collections::VecDeque;
use std::io::{Read as _, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Which executor to behave like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Reports `device_status` (kill switch, mode, contract version) when
    /// asked with `get_status`.
    Reporting,
    /// The lab assistant's public firmware: no status, ok/error answers
    /// only; its kill switch cuts the line (no answers at all).
    PublicFirmware,
}

/// How the simulator starts.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Which executor.
    pub flavour: Flavour,
    /// Its `device_id`.
    pub device_id: String,
    /// The contract version it reports (`Reporting` only); `None` reports
    /// none.
    pub contract_version: Option<String>,
    /// Where to append a JSON line per performed action.
    pub record: Option<PathBuf>,
    /// Its rate limit (100 ms, as the firmware's).
    pub min_action_delay: Duration,
}

impl SimConfig {
    /// An executor of `flavour` speaking contract version 1.
    pub fn new(flavour: Flavour) -> Self {
        Self {
            flavour,
            device_id: "sim-hid-0001".into(),
            contract_version: Some(wire::CONTRACT_MAJOR.into()),
            record: None,
            min_action_delay: Duration::from_millis(crate::action::MIN_ACTION_DELAY_MS),
        }
    }
}

/// A fault to inject; each applies to the next line received, in the order
/// injected (except [`Fault::Disconnect`], which applies at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Read the line, do nothing, answer nothing.
    NoAnswer,
    /// Answer with bytes that are not an answer.
    Garbage,
    /// Answer `{"status":"error","message":...}` without acting.
    ErrorAnswer(String),
    /// Close the line (the host sees a hang-up).
    Disconnect,
    /// Act as asked, and send the answer twice.
    AnswerTwice,
    /// Answer as usual, then flip the kill switch to this state and report
    /// it at once, in the same write (a switch flipped just after the
    /// answer: the report is waiting before the host's next request).
    ThenStatus(KillSwitch),
    /// Answer nothing, but send `lines` status lines (as the device's
    /// own reports), one every `every`.
    StatusOnly {
        /// How many.
        lines: u32,
        /// The pause before each.
        every: Duration,
    },
}

/// One action the simulator performed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Performed {
    /// When, in microseconds on the device's clock (from start).
    pub at_us: u64,
    /// When, on the wall clock (RFC 3339, UTC, milliseconds).
    pub timestamp: String,
    /// The execution's id.
    pub execution_id: String,
    /// The proposal's id.
    pub proposal_id: String,
    /// `TYPE_TEXT`, ...
    pub action_type: String,
    /// What it typed, pressed, moved or clicked.
    pub payload: Value,
}

/// What went wrong starting or serving the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The pty pair could not be made.
    #[error("HID simulator: cannot open a pseudo-terminal: {0}")]
    Pty(#[from] serialport::Error),
    /// The record file could not be opened.
    #[error("HID simulator: record file {path}: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing the path out failed.
    #[error("HID simulator: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(Debug)]
struct Shared {
    firmware: firmware::Firmware,
    faults: VecDeque<Fault>,
    performed: Vec<Performed>,
    received: Vec<String>,
    record: Option<std::fs::File>,
}

/// A running simulated executor. Dropping it stops it.
#[derive(Debug)]
pub struct Simulator {
    path: String,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    disconnect: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Simulator {
    /// Opens a pty pair and starts serving it.
    ///
    /// # Errors
    ///
    /// [`SimError::Pty`], [`SimError::Record`].
    pub fn start(config: SimConfig) -> Result<Self, SimError> {
        let (mut controller, device) = TTYPort::pair()?;
        let path = device.name().ok_or_else(|| {
            serialport::Error::new(serialport::ErrorKind::Unknown, "pty has no name")
        })?;
        let record = match &config.record {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|source| SimError::Record {
                        path: p.clone(),
                        source,
                    })?,
            ),
            None => None,
        };
        controller.set_timeout(Duration::from_millis(20))?;
        let shared = Arc::new(Mutex::new(Shared {
            firmware: firmware::Firmware::new(
                config.flavour,
                config.device_id,
                config.contract_version,
                config.min_action_delay,
            ),
            faults: VecDeque::new(),
            performed: Vec::new(),
            received: Vec::new(),
            record,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let disconnect = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, stop, disconnect) = (shared.clone(), stop.clone(), disconnect.clone());
            std::thread::Builder::new()
                .name("hid-sim".into())
                .spawn(move || serve_pty(controller, device, &shared, &stop, &disconnect))?
        };
        Ok(Self {
            path,
            shared,
            stop,
            disconnect,
            thread: Some(thread),
        })
    }

    /// The device end's path: open it as the serial port.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Flips the kill switch.
    pub fn set_kill_switch(&self, state: KillSwitch) {
        self.lock().firmware.set_kill_switch(state);
    }

    /// Queues a fault ([`Fault::Disconnect`] closes the line at once).
    pub fn inject(&self, fault: Fault) {
        if fault == Fault::Disconnect {
            self.disconnect.store(true, Ordering::SeqCst);
        } else {
            self.lock().faults.push_back(fault);
        }
    }

    /// Every action performed, in order.
    pub fn performed(&self) -> Vec<Performed> {
        self.lock().performed.clone()
    }

    /// Every line received, in order (as text, lossily).
    pub fn received(&self) -> Vec<String> {
        self.lock().received.clone()
    }

    /// The device's mode.
    pub fn mode(&self) -> crate::action::Mode {
        self.lock().firmware.mode
    }

    /// Stops serving and closes the pty.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Runs a simulator until `stop` is set: writes the device end's path as one
/// line to `out`, then serves. This is what `hcp hid sim` calls.
///
/// # Errors
///
/// As [`Simulator::start`], or writing to `out` failed.
pub fn serve(config: SimConfig, out: &mut dyn Write, stop: &AtomicBool) -> Result<(), SimError> {
    let sim = Simulator::start(config)?;
    writeln!(out, "{}", sim.path())?;
    out.flush()?;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.stop();
    Ok(())
}

fn serve_pty(
    mut controller: TTYPort,
    device: TTYPort,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    disconnect: &AtomicBool,
) {
    // The device end stays open here too, so the pty survives a host that
    // closes and reopens it.
    let _device = device;
    let clock = Instant::now();
    let mut buf = LineBuffer::new(16 * 1024);
    let mut chunk = [0u8; 1024];
    while !stop.load(Ordering::SeqCst) {
        if disconnect.load(Ordering::SeqCst) {
            return;
        }
        match controller.read(&mut chunk) {
            Ok(n) if n > 0 => buf.push(&chunk[..n]),
            Ok(_) => return,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // No device end open (EIO until the host opens it): wait.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        }
        while let Some(line) = buf.next_line() {
            let now = clock.elapsed();
            let reply = {
                let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                match line {
                    Ok(line) => handle(&mut s, &line, now),
                    Err(e) => Reply::one(Some(
                        serde_json::json!({"status": "error", "message": e.to_string()})
                            .to_string()
                            .into_bytes(),
                    )),
                }
            };
            for (i, mut answer) in reply.lines.into_iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(reply.every);
                }
                answer.push(b'\n');
                if controller.write_all(&answer).is_err() {
                    return;
                }
            }
        }
    }
}

/// What the simulator sends back for one line: `lines`, each after a pause
/// of `every` but the first.
struct Reply {
    lines: Vec<Vec<u8>>,
    every: Duration,
}

impl Reply {
    fn one(line: Option<Vec<u8>>) -> Self {
        Self {
            lines: line.into_iter().collect(),
            every: Duration::ZERO,
        }
    }
}

fn handle(s: &mut Shared, line: &[u8], now: Duration) -> Reply {
    s.received.push(String::from_utf8_lossy(line).into_owned());
    let mut twice = false;
    let mut then_status = None;
    match s.faults.pop_front() {
        Some(Fault::AnswerTwice) => twice = true,
        Some(Fault::ThenStatus(state)) => then_status = Some(state),
        Some(Fault::StatusOnly { lines, every }) => {
            let status = s.firmware.status().to_string().into_bytes();
            return Reply {
                lines: vec![status; usize::try_from(lines).unwrap_or(0)],
                every,
            };
        }
        Some(Fault::NoAnswer) => return Reply::one(None),
        Some(Fault::Garbage) => return Reply::one(Some(b"\x00\xffgarbage{not json".to_vec())),
        Some(Fault::ErrorAnswer(m)) => {
            return Reply::one(Some(
                serde_json::json!({"status": "error", "message": m})
                    .to_string()
                    .into_bytes(),
            ));
        }
        Some(Fault::Disconnect) | None => {}
    }
    let (answer, performed) = s.firmware.handle(line, now);
    let answer = answer.map(|a| a.to_string().into_bytes());
    if let Some(p) = performed {
        if let Some(file) = &mut s.record
            && let Ok(mut text) = serde_json::to_vec(&p)
        {
            text.push(b'\n');
            let _ = file.write_all(&text);
        }
        s.performed.push(p);
    }
    match answer {
        Some(a) if twice => Reply {
            lines: vec![a.clone(), a],
            every: Duration::ZERO,
        },
        Some(mut a) if then_status.is_some() => {
            if let Some(state) = then_status {
                s.firmware.set_kill_switch(state);
            }
            a.push(b'\n');
            a.extend(s.firmware.status().to_string().into_bytes());
            Reply::one(Some(a))
        }
        a => Reply::one(a),
    }
}
