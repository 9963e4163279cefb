//! The host's side of the serial line against the simulated executor, over
//! a real pseudo-terminal.

use hcp_hid::action::Mode;
use hcp_hid::device::{Device, DeviceConfig, DeviceError, DeviceKind};
use hcp_hid::sim::{Fault, Flavour, SimConfig, Simulator};
use hcp_hid::wire::KillSwitch;
use std::time::{Duration, Instant};

fn open(sim: &Simulator) -> Device {
    let mut config = DeviceConfig::new(sim.path());
    config.answer_timeout = Duration::from_millis(300);
    Device::open(config).expect("open the pty")
}

#[test]
fn a_reporting_executor_is_recognised() {
    let sim = Simulator::start(SimConfig::new(Flavour::Reporting)).expect("sim");
    let mut dev = open(&sim);
    assert_eq!(
        dev.handshake().expect("handshake"),
        DeviceKind::Reporting {
            device_id: "sim-hid-0001".into(),
            contract_version: Some("1".into())
        }
    );
    dev.set_mode(Mode::Execute).expect("execute");
    assert_eq!(sim.mode(), Mode::Execute);
    let status = dev.status().expect("status").expect("reported");
    assert_eq!(status.kill_switch_state, KillSwitch::Armed);
    sim.set_kill_switch(KillSwitch::Disabled);
    let err = dev.status().expect_err("disabled");
    assert_eq!(
        err.to_string(),
        "HID executor sim-hid-0001 reports its kill switch DISABLED"
    );
}

#[test]
fn the_public_firmware_is_recognised() {
    let sim = Simulator::start(SimConfig::new(Flavour::PublicFirmware)).expect("sim");
    let mut dev = open(&sim);
    assert_eq!(
        dev.handshake().expect("handshake"),
        DeviceKind::PublicFirmware
    );
    assert_eq!(dev.status().expect("no status"), None);
    let ok = dev.set_mode(Mode::Execute).expect("execute");
    assert_eq!(ok.message.as_deref(), Some("Mode changed to EXECUTE"));
    // Its kill switch cuts the line: a timeout.
    sim.set_kill_switch(KillSwitch::Disabled);
    let err = dev.set_mode(Mode::Observe).expect_err("cut");
    assert!(matches!(err, DeviceError::Timeout { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "HID executor did not answer set_mode OBSERVE within 300 ms"
    );
}

#[test]
fn a_version_mismatch_is_refused() {
    let mut config = SimConfig::new(Flavour::Reporting);
    config.contract_version = Some("2.0.0".into());
    let sim = Simulator::start(config).expect("sim");
    let err = open(&sim).handshake().expect_err("mismatch");
    assert_eq!(
        err.to_string(),
        "HID executor sim-hid-0001 speaks contract version 2.0.0, this host speaks 1"
    );
}

/// A device that sends status lines but never answers is given up on at
/// the request's deadline: a status line does not start the wait over
/// (before, one every 100 ms held the host for as long as they came, and
/// with it the operator's switch to OBSERVE).
#[test]
fn status_lines_do_not_hold_a_request_past_its_deadline() {
    let sim = Simulator::start(SimConfig::new(Flavour::Reporting)).expect("sim");
    let mut dev = open(&sim);
    dev.handshake().expect("handshake");
    sim.inject(Fault::StatusOnly {
        lines: 30,
        every: Duration::from_millis(100),
    });
    let started = Instant::now();
    let err = dev.set_mode(Mode::Execute).expect_err("no answer");
    let waited = started.elapsed();
    assert!(matches!(err, DeviceError::Timeout { .. }), "{err}");
    // The deadline is 300 ms; the status lines kept coming for 3 s.
    assert!(waited < Duration::from_secs(2), "waited {waited:?}");
}

/// An answer the device sent twice is never taken for the next request's
/// (an `ok` left over from one action marked the next one executed before
/// the device had read it, and every later answer stayed one behind).
#[test]
fn an_answer_sent_twice_is_not_the_next_requests() {
    let sim = Simulator::start(SimConfig::new(Flavour::PublicFirmware)).expect("sim");
    let mut dev = open(&sim);
    dev.handshake().expect("handshake");
    sim.inject(Fault::AnswerTwice);
    let first = dev.set_mode(Mode::Execute).expect("execute");
    assert_eq!(first.message.as_deref(), Some("Mode changed to EXECUTE"));
    // The copy arrives; the next request gets no answer of its own.
    std::thread::sleep(Duration::from_millis(100));
    sim.inject(Fault::NoAnswer);
    let err = dev
        .set_mode(Mode::Suggest)
        .expect_err("answered by the copy of the last answer");
    assert!(matches!(err, DeviceError::Timeout { .. }), "{err}");
}

#[test]
fn faults_are_errors() {
    let sim = Simulator::start(SimConfig::new(Flavour::Reporting)).expect("sim");
    let mut dev = open(&sim);
    dev.handshake().expect("handshake");
    sim.inject(Fault::Garbage);
    let err = dev.set_mode(Mode::Execute).expect_err("garbage");
    assert_eq!(
        err.to_string(),
        r#"HID executor answered set_mode EXECUTE with garbage: "\x00\xffgarbage{not json""#
    );
    sim.inject(Fault::ErrorAnswer("USB HID failure".into()));
    let err = dev.set_mode(Mode::Execute).expect_err("error");
    assert_eq!(
        err.to_string(),
        "HID executor refused set_mode EXECUTE: USB HID failure"
    );
    sim.inject(Fault::NoAnswer);
    let err = dev.set_mode(Mode::Execute).expect_err("silent");
    assert!(matches!(err, DeviceError::Timeout { .. }), "{err}");
    dev.set_mode(Mode::Execute).expect("recovers");
    sim.inject(Fault::Disconnect);
    std::thread::sleep(Duration::from_millis(100));
    let err = dev.set_mode(Mode::Observe).expect_err("gone");
    // The line was gone before any byte of it was written (issue 12.11).
    assert!(matches!(err, DeviceError::NotWritten { .. }), "{err}");
    assert!(err.to_string().ends_with("(nothing was written)"), "{err}");
}

/// Sends what is written to a channel, line by line.
struct ChannelWriter(std::sync::mpsc::Sender<String>, Vec<u8>);

impl std::io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1.extend_from_slice(buf);
        while let Some(at) = self.1.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.1.drain(..=at).collect();
            let _ = self
                .0
                .send(String::from_utf8_lossy(&line).trim_end().to_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn serve_prints_the_path_and_serves_until_stopped() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            hcp_hid::sim::serve(
                SimConfig::new(Flavour::PublicFirmware),
                &mut ChannelWriter(tx, Vec::new()),
                &stop,
            )
        })
    };
    let path = rx.recv_timeout(Duration::from_secs(5)).expect("the path");
    assert!(path.starts_with("/dev/pts/"), "{path}");
    let mut dev = Device::open(DeviceConfig::new(path)).expect("open");
    assert_eq!(
        dev.handshake().expect("serving"),
        DeviceKind::PublicFirmware
    );
    stop.store(true, Ordering::SeqCst);
    server.join().expect("thread").expect("served");
}
