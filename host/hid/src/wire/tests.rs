use super::*;
use crate::action::{Action, CheckedAction, ExecutionId, OperatorId, ProposalId};

fn execute(action: Action) -> ActionExecute {
    ActionExecute::new(
        &ExecutionId::new(),
        &ProposalId::new(),
        &CheckedAction(action),
        &"alice".parse::<OperatorId>().expect("operator"),
        "2026-01-15T08:30:00.000Z",
    )
}

fn one_line(bytes: &[u8]) -> Value {
    assert_eq!(bytes.last(), Some(&b'\n'));
    assert_eq!(
        bytes.iter().filter(|&&b| b == b'\n' || b == b'\r').count(),
        1,
        "{}",
        String::from_utf8_lossy(bytes)
    );
    serde_json::from_slice(bytes).expect("one JSON value")
}

#[test]
fn execute_lines_pass_the_firmware_checks_and_the_schema() {
    for action in [
        Action::TypeText {
            text: r#"echo "quoted" \ and 'single'"#.into(),
        },
        Action::KeyCombo {
            keys: vec!["ctrl".into(), "c".into()],
        },
        Action::MouseMove { x: -3, y: 7 },
        Action::MouseClick {
            button: crate::action::MouseButton::Right,
        },
    ] {
        let cmd = execute(action);
        let line = execute_line(&cmd).expect("encodes");
        let value = one_line(&line);
        firmware_check(&value).expect("firmware accepts");
        assert_eq!(value["mode"], "EXECUTE");
        assert_eq!(
            value["safety_bounds"],
            json!({"max_text_length": 1024, "min_action_delay_ms": 100})
        );
        let back: ActionExecute = serde_json::from_value(value).expect("round trip");
        assert_eq!(back, cmd);
    }
}

#[test]
fn nothing_inside_a_value_becomes_a_second_line() {
    let hostile = "a\nb\r\n{\"type\":\"set_mode\",\"mode\":\"EXECUTE\"}\n\u{0}\u{1b}[2J\"}\u{2028}";
    let line = encode(&json!({ "text": hostile })).expect("encodes");
    let value = one_line(&line);
    assert_eq!(value["text"], hostile);
    // An execute line with the same text is refused before the wire: the
    // schema allows printable ASCII only.
    let err = execute_line(&execute(Action::TypeText {
        text: hostile.into(),
    }))
    .expect_err("refused");
    assert!(
        matches!(&err, WireError::Contract(p) if p[0].pointer == "/payload/text"),
        "{err}"
    );
}

#[test]
fn huge_payloads_are_refused() {
    let err = encode(&json!({ "text": "\u{0}".repeat(1000) })).expect_err("too long");
    assert_eq!(
        err,
        WireError::TooLong {
            bytes: 6011,
            max: MAX_LINE_BYTES
        }
    );
    let err = execute_line(&execute(Action::TypeText {
        text: "x".repeat(1025),
    }))
    .expect_err("too long");
    assert_eq!(
        err,
        WireError::Firmware(FirmwareRefusal(
            "Text length 1025 exceeds MAX_TEXT_LENGTH (1024)".into()
        ))
    );
}

#[test]
fn the_firmware_checks_say_what_they_refuse() {
    let good = serde_json::to_value(execute(Action::MouseMove { x: 1, y: 1 })).expect("value");
    let with = |pointer: &str, v: Value| {
        let mut c = good.clone();
        *c.pointer_mut(pointer).expect("field") = v;
        c
    };
    let without = |field: &str| {
        let mut c = good.clone();
        c.as_object_mut().expect("object").remove(field);
        c
    };
    for (cmd, expected) in [
        (
            without("safety_bounds"),
            "Missing required field: safety_bounds",
        ),
        (without("timestamp"), "Missing required field: timestamp"),
        (
            with("/mode", json!("SUGGEST")),
            "Invalid mode: \"SUGGEST\" (HID only in EXECUTE mode)",
        ),
        (
            with("/execution_id", json!("short")),
            "Invalid execution_id: must be 8 to 64 characters from [A-Za-z0-9_-]",
        ),
        (
            with("/proposal_id", json!("prop 0000000001")),
            "Invalid proposal_id: must be 8 to 64 characters from [A-Za-z0-9_-]",
        ),
        (
            with("/safety_bounds/max_text_length", json!(2048)),
            "safety_bounds.max_text_length must be 1024",
        ),
        (
            with("/safety_bounds/min_action_delay_ms", json!(0)),
            "safety_bounds.min_action_delay_ms must be 100",
        ),
        (
            with("/payload/x", json!(1.5)),
            "MOUSE_MOVE x and y must be integers",
        ),
        (
            with("/action_type", json!("KEY_COMBO")),
            "KEY_COMBO requires 'keys' in payload",
        ),
        (
            with("/action_type", json!("RUN")),
            "Invalid action_type: \"RUN\"",
        ),
    ] {
        assert_eq!(
            firmware_check(&cmd),
            Err(FirmwareRefusal(expected.to_owned()))
        );
    }
}

#[test]
fn answers_status_reports_and_garbage() {
    assert_eq!(
        parse_line(br#"{"status":"ok","action":"type_text"}"#),
        Ok(Incoming::Answer(Answer {
            status: AnswerStatus::Ok,
            message: None,
            action: Some("type_text".into())
        }))
    );
    assert_eq!(
        parse_line(b"{\"status\":\"error\",\"message\":\"HID disabled in OBSERVE mode\"}\r"),
        Ok(Incoming::Answer(Answer {
            status: AnswerStatus::Error,
            message: Some("HID disabled in OBSERVE mode".into()),
            action: None
        }))
    );
    let status = br#"{"device_id":"sim-hid-0001","timestamp":"2026-01-15T08:30:00.000Z","mode":"OBSERVE","led_state":false,"kill_switch_state":"DISABLED","uptime_seconds":3,"contract_version":"1"}"#;
    match parse_line(status) {
        Ok(Incoming::Status(s)) => {
            assert_eq!(s.kill_switch_state, KillSwitch::Disabled);
            assert_eq!(s.contract_version.as_deref(), Some("1"));
        }
        other => panic!("{other:?}"),
    }
    for (line, expected) in [
        (
            &b"\xff\xfe\x00garbage"[..],
            r#"garbled line from the device: "\xff\xfe\x00garbage""#,
        ),
        (
            b"esp32_hid_executor native-usb ready",
            r#"garbled line from the device: "esp32_hid_executor native-usb ready""#,
        ),
        (
            br#"{"status":"maybe"}"#,
            r#"garbled line from the device: "{\"status\":\"maybe\"}""#,
        ),
        (
            br#"{"type":"ack"}"#,
            r#"garbled line from the device: "{\"type\":\"ack\"}""#,
        ),
        (
            br#"{"kill_switch_state":"OFF"}"#,
            r#"garbled line from the device: "{\"kill_switch_state\":\"OFF\"}" (device_status: (document): "device_id" is a required property; (document): "led_state" is a required property; (document): "mode" is a required property; (document): "timestamp" is a required property; (document): "uptime_seconds" is a required property; /kill_switch_state: "OFF" is not one of "ARMED", "DISABLED", "UNKNOWN")"#,
        ),
    ] {
        assert_eq!(parse_line(line).expect_err("garbage").to_string(), expected);
    }
}

#[test]
fn line_buffer_bounds_lines_and_recovers() {
    let mut b = LineBuffer::new(8);
    b.push(b"{\"a\":1}\n\n  \nxx");
    assert_eq!(b.next_line(), Some(Ok(b"{\"a\":1}".to_vec())));
    assert_eq!(b.next_line(), None);
    b.push(b"xxxxxxxxxx");
    assert_eq!(
        b.next_line(),
        Some(Err(WireError::TooLong { bytes: 12, max: 8 }))
    );
    b.push(b"still the long line\nok\n");
    assert_eq!(b.next_line(), Some(Ok(b"ok".to_vec())));
    assert_eq!(b.next_line(), None);
    b.push(b"123456789\n");
    assert_eq!(
        b.next_line(),
        Some(Err(WireError::TooLong { bytes: 9, max: 8 }))
    );
}

proptest::proptest! {
    /// Whatever a string holds, serialized it stays one line.
    #[test]
    fn any_string_stays_one_line(s in proptest::prelude::any::<String>()) {
        match encode(&json!({ "text": s })) {
            Ok(line) => {
                proptest::prop_assert_eq!(line.iter().filter(|&&b| b == b'\n' || b == b'\r').count(), 1);
                proptest::prop_assert_eq!(line.last(), Some(&b'\n'));
                let back: Value = serde_json::from_slice(&line).expect("JSON");
                proptest::prop_assert_eq!(&back["text"], &json!(s));
            }
            Err(WireError::TooLong { .. }) => {}
            Err(e) => proptest::prop_assert!(false, "{e}"),
        }
    }

    /// Every text a proposal accepts makes a line the firmware accepts.
    #[test]
    fn accepted_texts_pass_the_firmware(s in "[ -~]{1,1024}") {
        let proposal = crate::proposal::check(
            "s",
            ProposalId::new(),
            crate::proposal::ProposalRequest {
                action: Action::TypeText { text: s },
                rationale: "Property test rationale.".into(),
            },
            crate::action::Mode::Execute,
        )
        .expect("accepted");
        let cmd = ActionExecute::new(
            &ExecutionId::new(),
            &proposal.id,
            &proposal.action,
            &"alice".parse::<OperatorId>().expect("operator"),
            "2026-01-15T08:30:00.000Z",
        );
        let line = execute_line(&cmd).expect("encodes");
        firmware_check(&one_line(&line)).expect("firmware accepts");
    }
}
