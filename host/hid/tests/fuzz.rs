//! Whatever the serial port sends, reading it answers with an answer, a
//! status or a clear error, never a panic, and holds at most one bounded
//! line: arbitrary bytes, and good device lines with bytes flipped,
//! inserted, deleted or cut, through the line buffer and the parser.
//! `PROPTEST_CASES` sets the number of cases (64 by default;
//! `scripts/fuzz` runs many more).

use hcp_fuzzkit::{config, mutate};
use hcp_hid::wire::{LineBuffer, WireError, parse_line};
use proptest::prelude::*;

const LINES: [&[u8]; 3] = [
    br#"{"status":"ok","action":"type_text"}"#,
    br#"{"status":"error","message":"HID disabled in OBSERVE mode"}"#,
    br#"{"device_id":"sim-hid-0001","timestamp":"2026-01-15T08:30:00.000Z","mode":"OBSERVE","led_state":false,"kill_switch_state":"DISABLED","uptime_seconds":3,"contract_version":"1"}"#,
];

const MAX_LINE: usize = 512;

/// Feeds `bytes` in `chunk`-sized pieces; every line is parsed.
fn read_stream(bytes: &[u8], chunk: usize) {
    let mut buffer = LineBuffer::new(MAX_LINE);
    for piece in bytes.chunks(chunk.max(1)) {
        buffer.push(piece);
        while let Some(line) = buffer.next_line() {
            match line {
                Ok(line) => {
                    assert!(line.len() <= MAX_LINE, "a line over the bound");
                    parse(&line);
                }
                Err(e) => {
                    assert!(matches!(e, WireError::TooLong { .. }), "{e}");
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }
}

fn parse(line: &[u8]) {
    if let Err(e) = parse_line(line) {
        let text = e.to_string();
        assert!(!text.is_empty());
        assert!(
            text.len() < 1024,
            "the error quotes a bounded excerpt: {text}"
        );
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..64) {
        parse(&bytes);
        read_stream(&bytes, chunk);
    }

    #[test]
    fn mutated_device_lines(
        which in 0usize..3,
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
        chunk in 1usize..64,
    ) {
        let line = mutate(LINES[which], &edits, cut);
        parse(&line);
        let mut stream = line.clone();
        stream.push(b'\n');
        stream.extend_from_slice(LINES[which]);
        stream.push(b'\n');
        read_stream(&stream, chunk);
    }
}

#[test]
fn the_unmutated_lines_parse() {
    for line in LINES {
        parse_line(line).expect("a good line");
    }
}
