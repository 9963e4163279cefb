//! `wasi:config` end to end from a Rust guest (`tests/guests/config-probe`):
//! the operator provides values in the policy's `config.json` and seals a
//! secret with `hcp config secret set`; the manifest grants keys
//! (`grants.config`). A key not granted and a secret not granted are
//! denied with receipts; `get-all` answers only granted keys; the secret
//! reaches the guest but never the answer, the evidence pack nor the
//! data directory in clear, where its keyed digest stands instead.

use super::{Hcp, code, parse_answer, stderr, stdout, write_json};
use hcp_tests::{ManifestBuilder, REPO_ROOT};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

const SECRET: &str = "tok-5ecret-A1B2C3D4E5";
const OTHER_SECRET: &str = "other-5ecret-Z9Y8X7W6";

/// `hcp config secret set capability key`, the value on stdin.
fn set_secret(hcp: &Hcp, capability: &str, key: &str, value: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["config", "secret", "set", capability, key])
        .env("HCP_DATA_DIR", hcp.data.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hcp");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{value}\n").as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn config_values_and_secrets_through_the_pep() {
    check_config_guest(hcp_tests::CONFIG_PROBE);
}

/// The same from a Python guest (`tests/guests/python/config`, built with
/// componentize-py 0.25.1 for the world `configured` of `wit/`).
#[test]
fn config_values_and_secrets_from_a_python_guest() {
    let build = tempfile::tempdir().expect("tempdir");
    for (from, into) in [
        ("tests/guests/python/config", "app"),
        ("plugins/python/hcp_guest", "hcp_guest"),
    ] {
        let into = build.path().join(into);
        std::fs::create_dir(&into).expect("mkdir");
        for entry in std::fs::read_dir(format!("{REPO_ROOT}/{from}")).expect("sources") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "py") {
                std::fs::copy(&path, into.join(path.file_name().expect("name"))).expect("copy");
            }
        }
    }
    let wasm = build.path().join("config.wasm");
    let out = Command::new("componentize-py")
        .args([
            "-d",
            &format!("{REPO_ROOT}/wit"),
            "-w",
            "configured",
            "componentize",
            "app",
            "-p",
        ])
        .arg(build.path().join("app"))
        .arg("-p")
        .arg(build.path())
        .arg("-o")
        .arg(&wasm)
        .output()
        .expect("componentize-py (pip install componentize-py==0.25.1)");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    check_config_guest(wasm.to_str().expect("utf8"));
}

fn check_config_guest(component: &str) {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    // The shipped policy set, with this capability's values.
    let policies = tmp.path().join("policies");
    std::fs::create_dir(&policies).expect("mkdir");
    for entry in std::fs::read_dir(format!("{REPO_ROOT}/policies")).expect("policies") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            std::fs::copy(&path, policies.join(path.file_name().expect("name"))).expect("copy");
        }
    }
    write_json(
        &policies,
        "config.json",
        &json!({"capabilities": {"config-probe": {
            "greeting": {"value": "hello-operator"},
            "api_token": {"secret": true},
            "other_secret": {"secret": true},
            "not_granted": {"value": "nope"}
        }}}),
    );
    set_secret(&hcp, "config-probe", "api_token", SECRET);
    set_secret(&hcp, "config-probe", "other_secret", OTHER_SECRET);

    let manifest = ManifestBuilder::new("config-probe", component)
        .set("/grants/config", json!(["greeting", "api_token", "unset"]))
        .write(tmp.path());
    let submit = json!({
        "hcp_version": "1.0",
        "message_id": "msg-config",
        "timestamp": "2025-01-15T08:30:00.000Z",
        "session_id": null,
        "type": "task_submit",
        "payload": {
            "capability": "config-probe",
            "caller_id": "harness-local-01",
            "intent": "read the runtime configuration",
            "inputs": {
                "get": ["greeting", "api_token", "not_granted", "other_secret", "unset"],
                "get_all": true
            },
            "constraints": {"max_duration": "PT30S", "data_classification": "T1"}
        }
    });
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "--policies",
        policies.to_str().expect("utf8"),
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let answer = parse_answer(&out);
    let got = &answer.payload["outputs"]["get"];
    // A plain value, granted and provided.
    assert_eq!(
        got["greeting"],
        json!({"ok": true, "value": "hello-operator"})
    );
    // The secret reached the guest (it answered it), but the caller gets
    // its keyed digest, never the value.
    let token = got["api_token"]["value"].as_str().expect("a value");
    assert!(
        token.starts_with("[withheld: hmac-sha256:") && token.len() > 70,
        "{token}"
    );
    assert!(!stdout(&out).contains(SECRET), "{}", stdout(&out));
    assert!(!stderr(&out).contains(SECRET), "{}", stderr(&out));
    // Not granted (a plain value, and a secret): denied by the PEP.
    for key in ["not_granted", "other_secret"] {
        let said = got[key]["upstream"].as_str().unwrap_or_default();
        assert!(
            said.starts_with(&format!(
                "denied (DENY_TOOL_NOT_FOUND): config key \"{key}\" is not granted to config-probe@1.0.0"
            )),
            "{key}: {}",
            got[key]
        );
    }
    // Granted but not provided by the policy.
    let said = got["unset"]["upstream"].as_str().unwrap_or_default();
    assert!(said.contains("provides no value for it"), "{said}");
    // get-all: the granted keys the policy provides, nothing else.
    let pairs = answer.payload["outputs"]["get_all"]["pairs"]
        .as_array()
        .expect("pairs");
    let keys: Vec<&str> = pairs.iter().filter_map(|p| p[0].as_str()).collect();
    assert_eq!(keys, ["api_token", "greeting"], "{pairs:?}");
    assert_eq!(pairs[0][1].as_str(), Some(token));
    assert!(!stdout(&out).contains(OTHER_SECRET));

    // Every call has its receipt; the pack names the secret by its keyed
    // digest and never holds it in clear.
    let pack = tmp.path().join("all.hcpe");
    let o = hcp.run(&[
        "evidence",
        "export",
        "--all",
        "-o",
        pack.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let bytes = std::fs::read(&pack).expect("pack");
    let text = String::from_utf8_lossy(&bytes);
    assert!(!contains(&bytes, SECRET), "the secret is in the pack");
    assert!(
        !contains(&bytes, OTHER_SECRET),
        "the other secret is in the pack"
    );
    assert!(
        contains(&bytes, token),
        "the secret's digest is not in the pack"
    );
    for (op, n) in [("\"config.get\"", 5), ("\"config.get_all\"", 1)] {
        assert!(text.matches(op).count() >= n, "{op} receipts");
    }
    assert!(text.contains("DENY_TOOL_NOT_FOUND"));
    let o = hcp.run(&["evidence", "verify", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let o = hcp.run(&["replay", pack.to_str().expect("utf8")]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));

    // Nothing under the data directory holds either secret in clear.
    let mut all = Vec::new();
    files(hcp.data.path(), &mut all);
    assert!(all.iter().any(|(p, _)| p.ends_with("api_token.sealed")));
    for (path, bytes) in &all {
        assert!(!contains(bytes, SECRET), "{path} holds the secret");
        assert!(
            !contains(bytes, OTHER_SECRET),
            "{path} holds the other secret"
        );
    }
    let _: Value = answer.payload.clone();
}
