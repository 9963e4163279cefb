//! The command line's conventions: `--json` on every command that prints
//! data and text for people without it; each command takes only the
//! directories it uses; `HCP_LISTEN`; the server's request log; a closed
//! pipe ends a command quietly; `hcp evidence verify` says when it did not
//! check the pack's origin; `hcp surface` on a bundle; completions and
//! manual pages.

use super::{Hcp, code, doc_manifest, seed_submit, stderr, stdout, write_json};
use hcp::engine::{Host, HostConfig, HostPaths};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::Value;
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Stdout as JSON, whatever the exit code.
fn json_of_any(out: &Output) -> Value {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}{}", stdout(out), stderr(out)))
}

fn json_of(out: &Output, args: &[&str]) -> Value {
    assert_eq!(code(out), 0, "{args:?}\n{}{}", stdout(out), stderr(out));
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}):\n{}", stdout(out)))
}

/// Runs `args` with `--json` (JSON parsed and returned) and without (text
/// that is not JSON and holds `expect`).
fn both(hcp: &Hcp, args: &[&str], expect: &str) -> Value {
    let mut with = args.to_vec();
    with.push("--json");
    let value = json_of(&hcp.run(&with), &with);
    let out = hcp.run(args);
    assert_eq!(code(&out), 0, "{args:?}\n{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "{args:?} prints JSON without --json:\n{text}"
    );
    assert!(text.contains(expect), "{args:?}: no {expect:?} in\n{text}");
    value
}

/// A data directory with document-analysis and cvd-material-synthesis
/// installed, one document-analysis task completed and one CVD task
/// waiting for an operator.
/// The host of `hcp`'s data directory with the seed's two capabilities
/// installed.
fn installed(hcp: &Hcp) -> Host {
    let host = Host::open(
        HostPaths {
            data_dir: hcp.data.path().to_path_buf(),
            cache_dir: cache_dir(),
            policies_dir: Path::new(REPO_ROOT).join("policies"),
        },
        HostConfig::default(),
    )
    .expect("host");
    for plugin in ["document-analysis", "cvd-material-synthesis"] {
        host.install_manifest(
            &Path::new(REPO_ROOT).join(format!("plugins/{plugin}/manifest.json")),
        )
        .expect("install");
    }
    host
}

fn lab() -> (Hcp, String, String) {
    let hcp = Hcp::new();
    drop(installed(&hcp));
    let submit = |file: &str, caller: &str| {
        let out = hcp.run(&["submit", "--as", caller, file]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    };
    submit(
        &format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json"),
        "harness-local-01",
    );
    submit(
        &format!("{REPO_ROOT}/plugins/cvd-material-synthesis/examples/task_submit.json"),
        "harness-alpha-001",
    );
    let out = hcp.run(&["tasks", "list", "--json"]);
    let tasks = json_of(&out, &["tasks", "list", "--json"]);
    let id_of = |capability: &str| -> String {
        tasks
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["capability"] == capability)
            .and_then(|t| t["task_id"].as_str())
            .unwrap_or_else(|| panic!("no {capability} task in {tasks}"))
            .to_owned()
    };
    let done = id_of("document-analysis");
    let waiting = id_of("cvd-material-synthesis");
    (hcp, done, waiting)
}

#[test]
fn every_data_command_prints_json_with_json_and_text_without() {
    let (hcp, done, waiting) = lab();
    let tmp = tempfile::tempdir().expect("tempdir");

    let tasks = both(&hcp, &["tasks", "list"], &done);
    let ids: Vec<&str> = tasks
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["task_id"].as_str())
        .collect();
    assert!(
        ids.contains(&done.as_str()) && ids.contains(&waiting.as_str()),
        "{tasks}"
    );
    let task = both(&hcp, &["tasks", "show", &done], "state");
    assert_eq!(task["task_id"], done.as_str());
    assert_eq!(task["state"], "completed", "{task}");
    let shown = stdout(&hcp.run(&["tasks", "show", &done]));
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("state") && l.ends_with("completed")),
        "key: value lines:\n{shown}"
    );
    let approvals = both(&hcp, &["approvals", "list"], &waiting);
    assert!(
        !stdout(&hcp.run(&["approvals", "list"])).contains("no task waits"),
        "a list with a task is not empty"
    );
    assert_eq!(approvals[0]["task_id"], waiting.as_str(), "{approvals}");
    assert!(approvals[0]["expires_at"].is_string(), "{approvals}");
    let approval = both(&hcp, &["approvals", "show", &waiting], "expires_at");
    assert_eq!(approval["task_id"], waiting.as_str());
    assert!(approval["decision"].is_null(), "{approval}");

    let list = both(&hcp, &["list"], "cvd-material-synthesis");
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    let manifest = doc_manifest();
    let checked = both(&hcp, &["manifest", "check", &manifest], "valid");
    assert_eq!(checked["valid"], true);
    assert!(
        checked["capability"]
            .as_str()
            .is_some_and(|c| c.starts_with("document-analysis@")),
        "{checked}"
    );
    let keys = both(&hcp, &["keys", "show"], "key id");
    assert!(
        keys["public_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("ed25519:")),
        "{keys}"
    );
    let surface = both(&hcp, &["surface", &manifest], "verdict: allowed");
    assert_eq!(surface["allowed"], true);
    let store = both(&hcp, &["store", "check"], "ok");
    assert_eq!(store["ok"], true);
    let trust = both(&hcp, &["trust", "list"], "no trusted publishers");
    assert_eq!(trust, Value::Array(Vec::new()));
    let log = both(&hcp, &["hid", "log", "verify"], "chain intact");
    assert_eq!(log["ok"], true);

    let pack = tmp.path().join("all.tar");
    let pack = pack.to_str().expect("utf-8");
    let out = hcp.run(&["evidence", "export", "--all", "-o", pack]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let verified = both(&hcp, &["evidence", "verify", pack], "ok: ");
    assert_eq!(verified["ok"], true, "{verified}");
    assert!(verified["receipts"].as_u64().unwrap_or(0) > 0, "{verified}");
    let replayed = both(&hcp, &["replay", pack], "ok: ");
    assert_eq!(replayed["ok"], true, "{replayed}");
    assert_eq!(replayed["receipts"], verified["receipts"]);
}

#[test]
fn directories_are_options_of_the_commands_that_use_them() {
    let hcp = Hcp::new();
    let data = tempfile::tempdir().expect("tempdir");
    let dir = data.path().to_str().expect("utf-8");
    // After the subcommand, before it (the old global position), and
    // before a group's subcommand: the same data directory.
    for args in [
        vec!["keys", "init", "--data-dir", dir],
        vec!["keys", "show", "--data-dir", dir],
        vec!["--data-dir", dir, "keys", "show"],
        vec!["store", "--data-dir", dir, "check"],
        vec!["store", "check", "--data-dir", dir],
    ] {
        let out = hcp.run(&args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    }
    assert!(data.path().join("keys/host.key").exists());
    assert!(
        !hcp.data.path().join("keys").exists(),
        "--data-dir wins over HCP_DATA_DIR"
    );
    // A command that reads no store has no such option, wherever it is put.
    let manifest = doc_manifest();
    for args in [
        vec!["manifest", "check", &manifest, "--data-dir", dir],
        vec!["--data-dir", dir, "manifest", "check", &manifest],
        vec!["evidence", "verify", "x.tar", "--policies", "policies"],
        vec!["completions", "bash", "--cache-dir", dir],
    ] {
        let out = hcp.run(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("unexpected argument '--"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let help = stdout(&hcp.run(&["manifest", "check", "--help"]));
    assert!(!help.contains("--data-dir"), "{help}");
    let help = stdout(&hcp.run(&["tasks", "list", "--help"]));
    assert!(
        help.contains("--data-dir") && help.contains("--policies"),
        "{help}"
    );
}

/// A free port on loopback (the listener is closed before it returns).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `hcp serve` with `env`, stderr into `log`; returns it and the
/// address of its `listening on` line.
fn serve(
    hcp: &Hcp,
    extra: &[&str],
    env: &[(&str, &str)],
    log: &Path,
) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .arg("serve")
        .args(extra)
        .envs(env.iter().copied())
        .env_remove("HCP_LOG")
        .env_remove("RUST_LOG")
        .env("HCP_DATA_DIR", hcp.data.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .current_dir(REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn hcp serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("the listening line");
    let Some(addr) = first.trim().strip_prefix("listening on http://") else {
        let _ = child.kill();
        panic!(
            "unexpected first line {first:?}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    };
    (child, addr.to_owned())
}

/// Waits (up to a minute: a bound, not a speed claim) for a log line that
/// `wanted` accepts.
fn log_line(log: &Path, wanted: impl Fn(&str) -> bool) -> Option<String> {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| wanted(l)) {
            return Some(line.to_owned());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn get(addr: &str, path: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    agent
        .get(format!("http://{addr}{path}"))
        .call()
        .expect("GET")
        .status()
        .as_u16()
}

#[test]
fn serve_listens_where_hcp_listen_says_and_logs_each_request() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let wanted = format!("127.0.0.1:{port}");
    let log = tmp.path().join("serve.log");
    let (mut child, addr) = serve(&hcp, &[], &[("HCP_LISTEN", &wanted)], &log);
    assert_eq!(addr, wanted, "HCP_LISTEN sets the address");
    assert_eq!(get(&addr, "/healthz"), 200);
    assert_eq!(get(&addr, "/v1/tasks/task-none?token=secret"), 401);
    // Info by default (no HCP_LOG, no RUST_LOG): a refusal is logged; a
    // read that succeeded (a probe, the operator page's polling) only at
    // debug.
    let refused = log_line(&log, |l| l.contains("path=/v1/tasks/task-none"));
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let refused = refused.unwrap_or_else(|| panic!("no request line in:\n{text}"));
    assert!(
        refused.contains("INFO")
            && refused.contains("method=GET")
            && refused.contains("status=401")
            && refused.contains("duration_ms="),
        "{refused}"
    );
    assert!(
        !text.contains("path=/healthz"),
        "a successful read is not logged at info:\n{text}"
    );
    assert!(!text.contains("secret"), "the query is not logged:\n{text}");
}

#[test]
fn serve_logs_json_lines_with_log_format_json() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("serve.log");
    let (mut child, addr) = serve(
        &hcp,
        &["--listen", "127.0.0.1:0", "--log-format", "json"],
        &[],
        &log,
    );
    assert_eq!(get(&addr, "/v1/tasks/task-none"), 401);
    let line = log_line(&log, |l| l.contains("/v1/tasks/task-none"));
    let _ = child.kill();
    let _ = child.wait();
    let line = line.unwrap_or_else(|| {
        panic!(
            "no request line in:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(event["level"], "INFO", "{event}");
    assert_eq!(event["fields"]["method"], "GET", "{event}");
    assert_eq!(event["fields"]["path"], "/v1/tasks/task-none", "{event}");
    assert_eq!(event["fields"]["status"], 401, "{event}");
    assert!(event["fields"]["duration_ms"].is_u64(), "{event}");
}

/// Runs `args` with stdout a pipe whose reading end is already closed.
fn into_closed_pipe(hcp: &Hcp, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(args)
        .env("HCP_DATA_DIR", hcp.data.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .current_dir(REPO_ROOT)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run hcp")
}

#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let hcp = Hcp::new();
    assert_eq!(code(&hcp.run(&["keys", "init"])), 0);
    let manifest = doc_manifest();
    // Written with println! (text), with the JSON writer, with write_all.
    for args in [
        vec!["keys", "show"],
        vec!["keys", "show", "--json"],
        vec!["manifest", "check", &manifest],
        vec!["list"],
        vec!["completions", "bash"],
        vec!["man"],
    ] {
        let out = into_closed_pipe(&hcp, &args);
        assert_eq!(
            (code(&out), stderr(&out).as_str()),
            (0, ""),
            "{args:?} into a closed pipe"
        );
    }

    // As `hcp completions bash | head -1` does it: one line read, then
    // the pipe closed while hcp may still be writing.
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("a line");
    assert!(!first.is_empty());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    let status = child.wait().expect("wait");
    assert_eq!((status.code(), err.as_str()), (Some(0), ""));
}

#[test]
fn verify_says_when_it_did_not_check_the_origin() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let input = write_json(tmp.path(), "submit.json", &seed_submit());
    let out = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        &doc_manifest(),
        "--input",
        input.to_str().expect("utf-8"),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let pack = tmp.path().join("all.tar");
    let pack = pack.to_str().expect("utf-8");
    assert_eq!(
        code(&hcp.run(&["evidence", "export", "--all", "-o", pack])),
        0
    );
    let note = "origin not checked: trusted the keys the pack declares; \
                pass --trust-key to check who signed it";
    let out = hcp.run(&["evidence", "verify", pack]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).starts_with("ok: "), "{}", stdout(&out));
    assert!(stdout(&out).contains(note), "{}", stdout(&out));
    let report = json_of(&hcp.run(&["evidence", "verify", pack, "--json"]), &[]);
    assert_eq!(report["origin_checked"], false, "{report}");
    assert_eq!(report["note"], note, "{report}");

    let keys = json_of(&hcp.run(&["keys", "show", "--json"]), &[]);
    let key = keys["public_key"].as_str().expect("public key");
    let out = hcp.run(&["evidence", "verify", pack, "--trust-key", key]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        !stdout(&out).contains("origin not checked"),
        "{}",
        stdout(&out)
    );
    let report = json_of(
        &hcp.run(&["evidence", "verify", pack, "--trust-key", key, "--json"]),
        &[],
    );
    assert_eq!(report["origin_checked"], true, "{report}");
    assert_eq!(report["trusted_keys"][0], key, "{report}");
}

#[test]
fn surface_reads_a_bundle_as_well_as_a_manifest() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let bundle = tmp.path().join("document-analysis.hcpb");
    let bundle = bundle.to_str().expect("utf-8");
    let plugin = format!("{REPO_ROOT}/plugins/document-analysis");
    let out = hcp.run(&["bundle", "pack", &plugin, "-o", bundle]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let out = hcp.run(&["surface", bundle]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("capability document-analysis@") && text.contains("verdict: allowed"),
        "{text}"
    );
    assert!(
        text.contains("${manifest_dir}/samples -> "),
        "the bundle's own directory by its name, not a temporary path:\n{text}"
    );
    let from_bundle = json_of(&hcp.run(&["surface", bundle, "--json"]), &[]);
    let from_manifest = json_of(&hcp.run(&["surface", &doc_manifest(), "--json"]), &[]);
    assert_eq!(from_bundle["imports"], from_manifest["imports"]);
    assert_eq!(from_bundle["exports"], from_manifest["exports"]);
    assert_eq!(from_bundle["digest"], from_manifest["digest"]);

    // A component alone: checked against no grants, the same imports.
    let wasm = format!("{REPO_ROOT}/plugins/target/wasm32-wasip2/release/document_analysis.wasm");
    let out = hcp.run(&["surface", &wasm]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("is a component without a manifest"),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).starts_with("capability document-analysis@0.0.0")
            && stdout(&out).contains("REFUSED  wasi:http/outgoing-handler@")
            && stdout(&out).contains("allowed  wasi:filesystem/types@0.2.12  (linked, inert: "),
        "{}",
        stdout(&out)
    );
    let bare = json_of_any(&hcp.run(&["surface", &wasm, "--json"]));
    assert_eq!(bare["allowed"], false);
    assert_eq!(bare["digest"], from_manifest["digest"]);
    let names = |report: &Value| -> Vec<Value> {
        report["imports"]
            .as_array()
            .expect("imports")
            .iter()
            .map(|i| i["name"].clone())
            .collect()
    };
    assert_eq!(names(&bare), names(&from_manifest));

    // A file that is none of them: a clear refusal.
    let junk = tmp.path().join("junk.hcpb");
    std::fs::write(&junk, b"not a bundle at all").expect("write");
    let out = hcp.run(&["surface", junk.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).starts_with("error: ")
            && stderr(&out).contains("not a manifest, nor a bundle"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("UTF-8"), "{}", stderr(&out));
}

#[test]
fn completions_and_manual_pages_come_from_the_command_line() {
    let hcp = Hcp::new();
    let out = hcp.run(&["completions", "bash"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let script = stdout(&out);
    assert!(
        script.contains("_hcp()") && script.contains("complete -F _hcp"),
        "{script}"
    );
    for word in ["surface", "completions", "--data-dir", "--json"] {
        assert!(script.contains(word), "no {word} in the bash script");
    }
    for shell in ["zsh", "fish"] {
        let out = hcp.run(&["completions", shell]);
        assert_eq!(code(&out), 0, "{shell}: {}", stderr(&out));
        assert!(stdout(&out).contains("hcp"), "{shell}");
    }
    let out = hcp.run(&["completions", "tcsh"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&out)
    );

    let out = hcp.run(&["man"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains(".TH hcp 1"), "{}", stdout(&out));
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("man1");
    let out = hcp.run(&["man", dir.to_str().expect("utf-8")]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for page in [
        "hcp.1",
        "hcp-serve.1",
        "hcp-tasks-list.1",
        "hcp-evidence-verify.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".SH NAME"), "{page}");
    }
    let pages = std::fs::read_dir(&dir).expect("dir").count();
    assert!(
        stdout(&out).ends_with(&format!(": {pages} manual pages\n")),
        "{} ({pages} files)",
        stdout(&out)
    );
}

#[test]
fn commands_that_act_report_what_they_did_as_json() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| tmp.path().join(name).to_str().expect("utf-8").to_owned();
    let json = |args: &[&str]| json_of(&hcp.run(args), args);
    // Empty lists say so.
    assert_eq!(stdout(&hcp.run(&["tasks", "list"])), "no tasks\n");
    assert_eq!(
        stdout(&hcp.run(&["approvals", "list"])),
        "no task waits for an operator\n"
    );

    let key = path("publisher.key");
    let generated = json(&["keys", "generate", "--out", &key, "--json"]);
    let public = generated["public_key"]
        .as_str()
        .expect("public key")
        .to_owned();
    assert!(public.starts_with("ed25519:"), "{generated}");
    let trusted = json(&["trust", "add", "acme-labs", &public, "--json"]);
    assert_eq!(trusted["already_trusted"], false, "{trusted}");
    assert_eq!(trusted["key_id"], generated["key_id"], "{trusted}");

    let bundle = path("document-analysis.hcpb");
    let plugin = format!("{REPO_ROOT}/plugins/document-analysis");
    let packed = json(&["bundle", "pack", &plugin, "-o", &bundle, "--json"]);
    assert_eq!(packed["signed"], false, "{packed}");
    assert_eq!(
        packed["data_dirs"],
        serde_json::json!(["samples"]),
        "{packed}"
    );
    // The publisher's name comes from the trust store.
    let signed = json(&["bundle", "sign", &bundle, "--key", &key, "--json"]);
    assert_eq!(signed["publisher"], "acme-labs", "{signed}");
    assert_eq!(signed["component_digest"], packed["component_digest"]);
    let installed = json(&["install", &bundle, "--json"]);
    assert_eq!(
        installed["installed"]["name"], "document-analysis",
        "{installed}"
    );
    assert_eq!(
        installed["installed"]["publisher"], "acme-labs",
        "{installed}"
    );
    assert_eq!(installed["installed"]["digest"], packed["component_digest"]);

    let pinned = json(&[
        "manifest",
        "pin",
        &doc_manifest(),
        "-o",
        &path("pinned.json"),
        "--json",
    ]);
    assert_eq!(pinned["digest"], packed["component_digest"], "{pinned}");

    let out = hcp.run(&[
        "submit",
        "--as",
        "harness-local-01",
        "--wait",
        &format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json"),
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let exported = json(&[
        "evidence",
        "export",
        "--all",
        "-o",
        &path("all.tar"),
        "--json",
    ]);
    assert!(exported["receipts"].as_u64().unwrap_or(0) > 0, "{exported}");
    let ran = json(&["tasks", "run-queued", "--json"]);
    assert_eq!(ran, Value::Array(Vec::new()), "nothing is queued");

    let backup = path("backup.db");
    let saved = json(&["store", "backup", &backup, "--json"]);
    assert_eq!(saved["backup"], backup.as_str(), "{saved}");
    assert!(
        saved["store"]["receipts"].as_u64().unwrap_or(0) > 0,
        "{saved}"
    );
    let restored = json(&["store", "restore", &backup, "--json"]);
    assert_eq!(restored["store"], saved["store"], "{restored}");

    let removed = json(&["remove", "document-analysis@1.0.0", "--json"]);
    assert_eq!(removed["removed"], "document-analysis@1.0.0", "{removed}");
    let distrusted = json(&["trust", "remove", "acme-labs", "--json"]);
    assert_eq!(distrusted["still_installed"], Value::Array(Vec::new()));
}

/// A task whose AMQP delivery this host never acknowledged (the host
/// stopped before it recorded the task as its own) is not its own: the
/// broker may give the message to another host, which runs it. With
/// `hcp serve` stopped, `hcp tasks run-queued` and `hcp approvals
/// approve` leave it as it is and say why. (They ran it: the task ran on
/// two hosts.)
#[test]
fn the_command_line_neither_runs_nor_decides_a_task_this_host_does_not_own() {
    let hcp = Hcp::new();
    let host = installed(&hcp);
    let mut ids = Vec::new();
    for (plugin, caller) in [
        ("document-analysis", "harness-local-01"),
        ("cvd-material-synthesis", "harness-alpha-001"),
    ] {
        let path = format!("{REPO_ROOT}/plugins/{plugin}/examples/task_submit.json");
        let message: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
        // As the AMQP transport takes a delivery: the task with its route,
        // not this host's until the delivery is acknowledged.
        let submission = host
            .submit_task_replying(
                hcp::engine::TaskMessage::parse(message).expect("a task_submit"),
                hcp::engine::Auth::Transport(caller),
                Some("reply-q"),
            )
            .expect("submit");
        ids.push(submission.task_id.expect("recorded"));
    }
    drop(host);
    let (queued, waiting) = (&ids[0], &ids[1]);

    let out = hcp.run(&["tasks", "run-queued", "--json"]);
    assert_eq!(
        json_of(&out, &["tasks", "run-queued"]),
        Value::Array(Vec::new())
    );
    assert!(
        stderr(&out).contains(&format!("task {queued}: not run"))
            && stderr(&out).contains("never acknowledged"),
        "{}",
        stderr(&out)
    );
    let out = hcp.run(&[
        "approvals",
        "approve",
        waiting,
        "--operator",
        "operator-lab-01",
        "--reason",
        "looks fine",
    ]);
    assert_ne!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("not this host's to decide"),
        "{}",
        stderr(&out)
    );
    for (id, state) in [(queued, "queued"), (waiting, "pending_approval")] {
        let shown = json_of(
            &hcp.run(&["tasks", "show", id, "--json"]),
            &["tasks", "show"],
        );
        assert_eq!(shown["state"], state, "{shown}");
    }
}
