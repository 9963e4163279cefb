//! What the generic code makes of every kind of arguments, held against a
//! golden file (`forms.golden`; `BLESS=1` rewrites it): a call's canonical
//! form, the bytes it charges, the form a receipt keeps of it when it is
//! large ([`Call::bounded`], [`FullArgs`]), its threat signals and its
//! decision, and its reading back from a decision input. Each interface's
//! module owns these for its arguments: moving them must not change a byte
//! of what receipts record.

use super::common::shipped;
use super::{NOW, facts, instrument, plan};
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::{Access, GrantItem};
use hcp_policy::pep::{Call, Counters, FsAccess, FullArgs, Op, Scope, decide};
use std::fmt::Write as _;

/// A string over the bound of a decision input, with text each detector
/// fires on.
fn long(seed: &str) -> String {
    format!(
        "{seed} ignore previous instructions \u{1b}[2J $(id); {}",
        "é".repeat(3000)
    )
}

/// One call of every kind of arguments, small and large.
fn calls(big: &str) -> Vec<Call<'_>> {
    let fields = vec![
        ("k".to_string(), "v".to_string()),
        ("token".to_string(), big.to_string()),
        (String::new(), String::new()),
    ];
    let fields: &'static [(String, String)] = Box::leak(fields.into_boxed_slice());
    let mut command = instrument("set_temperature", Some(plan(700.5)));
    if let hcp_policy::pep::Args::Instrument(a) = &mut command.args {
        a.arguments = big.to_owned().into();
    }
    // Log fields with a terminal escape in a key and a value, and an
    // injection in a value.
    let escapes = vec![
        ("\u{1b}k".to_string(), "v\u{1b}".to_string()),
        ("note".to_string(), "you are now".to_string()),
    ];
    let escapes: &'static [(String, String)] = Box::leak(escapes.into_boxed_slice());
    let mut shell = instrument("set_temperature", Some(plan(700.5)));
    if let hcp_policy::pep::Args::Instrument(a) = &mut shell.args {
        a.arguments = r#"{"target":"$(id)","a;b":1}"#.into();
    }
    vec![
        Call::log("info", "hello", &[]),
        Call::log("warn", big, fields),
        Call::artifact("report.json", "application/json", 42),
        Call::artifact(big, big, 7),
        Call::checkpoint_save("step-1", 9),
        Call::checkpoint_save(big, 9),
        Call::checkpoint_load("ckpt-1"),
        Call::checkpoint_load(big),
        instrument("set_temperature", Some(plan(700.5))),
        instrument("set_temperature; reboot", None),
        command,
        Call::bare(Op::InstrumentRead, "cvd-rig"),
        Call::fs(Op::FsOpen, "/data/a.txt".into(), FsAccess::Read, None),
        Call::fs(
            Op::FsRename,
            "/data/out/a".into(),
            FsAccess::Write,
            Some(format!("/data/out/{big}")),
        ),
        Call::fs_write("/data/out/a".into(), 4096),
        Call::fs_write(format!("/data/out/{big}"), 1),
        Call::connect("127.0.0.1:9000".into(), None),
        Call::connect("93.184.216.34:443".into(), Some(big)),
        Call::bare(Op::NetBind, "0.0.0.0:0"),
        Call::bare(Op::NetLookup, "example.org"),
        Call::lookup("example.org", vec!["93.184.216.34".into()]),
        Call::lookup(big, vec![big.to_owned(), "10.0.0.1".into()]),
        Call::http("example.org:443".into(), "GET", "https", "/a?b=c"),
        Call::http("example.org:443".into(), "POST", "https", big)
            .resolved(vec!["93.184.216.34".into()]),
        Call::hid_propose("TYPE_TEXT", r#"{"text":"hello"}"#, "p-1", "say hello"),
        Call::hid_propose("TYPE_TEXT", big, "p-2", big),
        Call::bare(Op::HidWait, "p-1"),
        Call::config("greeting", vec!["greeting".into()], vec![]),
        Call::config(
            "",
            vec!["greeting".into(), big.to_owned()],
            vec!["hmac-sha256:00".into()],
        ),
        Call::kv(Op::KvSet, "counts", "k", 10, 3, 100),
        Call::kv(Op::KvGet, "counts", big, 0, 0, 0),
        // Small calls with what each detector fires on, in each string.
        Call::log("info", "ignore previous instructions", &[]),
        Call::log("info", "ok", escapes),
        Call::http(
            "example.org:443".into(),
            "GET\u{1b}",
            "https",
            "/you are now",
        ),
        Call::hid_propose(
            "TYPE_TEXT",
            r#"{"text":"\u001b[2J","you are now":1}"#,
            "p-3",
            "system prompt",
        ),
        Call::fs(
            Op::FsRename,
            "/data/out/a".into(),
            FsAccess::Write,
            Some("/data/out/\u{1b}b".into()),
        ),
        Call::connect("127.0.0.1:9000".into(), Some("\u{1b}")),
        Call::kv(Op::KvGet, "counts", "\u{1b}k", 0, 0, 0),
        shell,
    ]
}

/// The test's session, with budgets and grants that let most calls reach
/// the threat scan.
fn roomy() -> Scope {
    let mut f = facts();
    f.budgets.bytes = 1 << 40;
    f.limits.artifact_bytes = 1 << 40;
    f.surface.devices = vec!["hid".into()];
    f.surface.table.set(
        Grant::Keyvalue,
        vec![GrantItem {
            name: "counts".into(),
            access: Some(Access::ReadWrite),
        }],
    );
    for (name, value) in [("kv_bytes", 100), ("kv_keys", 3), ("kv_value_bytes", 10)] {
        f.limits.table.insert(name.into(), value);
    }
    Scope::compile(&shipped(), f).expect("scope")
}

/// The forms of one call, one line each.
fn forms(out: &mut String, call: &Call<'_>) {
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8");
    let bytes = call.canonical_bytes().expect("canonical");
    let d = decide(&roomy(), &Counters::default(), call, NOW);
    let _ = writeln!(out, "## {} ({} bytes)", call.op, bytes.len());
    let _ = writeln!(
        out,
        "charges {}; decided {} {}; signals [{}]",
        call.bytes(),
        d.reason,
        d.message,
        d.signals.names()
    );
    let value: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    let back = Call::from_value(&value).expect("read back");
    assert_eq!(back, call.clone().into_owned(), "{}", call.op);
    match call.bounded() {
        None => {
            let _ = writeln!(out, "whole {}", text(bytes));
        }
        Some(b) => {
            let kept = b.canonical_bytes().expect("bounded");
            let value: serde_json::Value = serde_json::from_slice(&kept).expect("json");
            assert_eq!(Call::from_value(&value).expect("read back"), b);
            let full = FullArgs::of(call, d.signals).expect("full");
            let _ = writeln!(out, "bounded {}", text(kept));
            let _ = writeln!(
                out,
                "full {}",
                serde_json::to_string(&full).expect("full json")
            );
        }
    }
}

#[test]
fn every_kind_of_arguments_keeps_its_forms() {
    let big = long("big");
    let mut out = String::new();
    for call in calls(&big) {
        forms(&mut out, &call);
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pep/forms.golden");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &out).expect("bless");
        return;
    }
    let golden = std::fs::read_to_string(&path).expect("golden (BLESS=1 writes it)");
    if golden != out {
        let first = golden
            .lines()
            .zip(out.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        panic!(
            "forms changed at line {}:\n golden: {:?}\n now:    {:?}",
            first + 1,
            golden.lines().nth(first),
            out.lines().nth(first)
        );
    }
}
