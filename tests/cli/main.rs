//! The `hcp` command line, end to end: the real binary on real components.
//!
//! Built as an integration test of the `hcp` package (it needs the binary);
//! the guests come from `hcp-tests`. Golden files live in `tests/cli/golden/`
//! (`BLESS=1` rewrites them); machine-specific paths and digests are
//! replaced by placeholders before comparing.

mod author;
mod budgets;
mod bundles;
mod config;
mod conventions;
mod dev;
mod fs_containment;
mod init;
mod lost;
mod physical;
mod python;
mod reading;

use hcp_contracts::message::{Envelope, MessageType};
use hcp_tests::{ManifestBuilder, REPO_ROOT, cache_dir, http_server};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod evidence;

struct Hcp {
    data: tempfile::TempDir,
}

impl Hcp {
    fn new() -> Self {
        Self {
            data: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_under(&[], args)
    }

    /// `hcp args` run by the command `wrapper` (a program and its
    /// arguments, given hcp's path and `args` after them).
    fn run_under(&self, wrapper: &[&str], args: &[&str]) -> Output {
        let hcp = env!("CARGO_BIN_EXE_hcp");
        let mut command = match wrapper.split_first() {
            None => Command::new(hcp),
            Some((program, wrapper_args)) => {
                let mut c = Command::new(program);
                c.args(wrapper_args).arg(hcp);
                c
            }
        };
        command
            .args(args)
            .env("HCP_DATA_DIR", self.data.path())
            .env("HCP_CACHE_DIR", cache_dir())
            .current_dir(REPO_ROOT)
            .output()
            .expect("run hcp")
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

/// Replaces this machine's paths and every digest with placeholders.
fn portable(text: &str, tmp: Option<&Path>) -> String {
    let mut text = text.replace(REPO_ROOT, "<repo>");
    if let Some(tmp) = tmp {
        let canonical = tmp.canonicalize().expect("canonical").display().to_string();
        text = text
            .replace(&canonical, "<tmp>")
            .replace(&tmp.display().to_string(), "<tmp>");
    }
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("sha256:") {
        out.push_str(&rest[..i]);
        let hex = &rest[i + 7..];
        let n = hex.chars().take_while(char::is_ascii_hexdigit).count();
        out.push_str(if n == 64 {
            "sha256:<digest>"
        } else {
            "sha256:"
        });
        rest = &hex[if n == 64 { n } else { 0 }..];
    }
    out.push_str(rest);
    out
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(REPO_ROOT).join("tests/cli/golden").join(name);
    if std::env::var_os("BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with BLESS=1 to create it)", path.display()));
    assert_eq!(
        expected,
        actual,
        "{} differs (BLESS=1 rewrites it)",
        path.display()
    );
}

fn parse_answer(o: &Output) -> Envelope {
    let value: Value = serde_json::from_str(&stdout(o)).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    });
    Envelope::parse(&value).unwrap_or_else(|p| panic!("answer is not a valid HCP message: {p:?}"))
}

fn doc_manifest() -> String {
    format!("{REPO_ROOT}/plugins/document-analysis/manifest.json")
}

fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).expect("json")).expect("write");
    path
}

fn seed_submit() -> Value {
    let path = format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("example")).expect("json")
}

#[test]
fn surface_names_an_ungranted_import_and_exits_1() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest =
        ManifestBuilder::new("undeclared", hcp_tests::UNDECLARED_IMPORT).write(tmp.path());
    let manifest = manifest.to_str().expect("utf8");
    let out = hcp.run(&["surface", manifest]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stdout(&out).contains(
        "REFUSED  evil:backdoor/shell@1.0.0  (evil:backdoor is not provided by this host)"
    ));
    golden(
        "surface-undeclared-import.txt",
        &portable(&stdout(&out), Some(tmp.path())),
    );

    let out = hcp.run(&["surface", "--json", manifest]);
    assert_eq!(code(&out), 1);
    let report: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(report["allowed"], false);
    let refused: Vec<&Value> = report["imports"]
        .as_array()
        .expect("imports")
        .iter()
        .filter(|i| i["verdict"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["name"], "evil:backdoor/shell@1.0.0");
}

#[test]
fn surface_of_the_example_is_allowed() {
    let hcp = Hcp::new();
    let out = hcp.run(&["surface", &doc_manifest()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    golden(
        "surface-document-analysis.txt",
        &portable(&stdout(&out), None),
    );
}

#[test]
fn the_seeds_document_analysis_task_completes() {
    let hcp = Hcp::new();
    let input = format!("{REPO_ROOT}/plugins/document-analysis/examples/task_submit.json");
    let out = hcp.run(&["run", "--manifest", &doc_manifest(), "--input", &input]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskCompleted);
    assert!(
        answer
            .session_id
            .as_deref()
            .is_some_and(|s| s.starts_with("session-"))
    );
    let findings = answer.payload["outputs"]["findings"]
        .as_array()
        .expect("findings");
    assert!(!findings.is_empty());
    let sample = std::fs::read_to_string(format!(
        "{REPO_ROOT}/plugins/document-analysis/samples/paper-123.md"
    ))
    .expect("sample");
    for f in findings {
        let statement = f["statement"].as_str().expect("statement");
        assert!(
            sample.contains(statement),
            "{statement:?} is not in the document"
        );
        let c = f["confidence"].as_f64().expect("confidence");
        assert!((0.0..=1.0).contains(&c));
    }
    assert!(
        findings
            .iter()
            .any(|f| f["source_section"] == "Results, Section 3.2")
    );
    let summary = &answer.payload["execution_summary"];
    assert!(
        summary["duration"]
            .as_str()
            .is_some_and(|d| d.starts_with("PT"))
    );
    assert_eq!(summary["steps_executed"], 2, "{summary}");
    // The task log went to stderr, the warning about the unpinned digest too.
    assert!(stderr(&out).contains("fetching file:///documents/paper-123.md"));
}

#[test]
fn document_analysis_reads_a_granted_web_page() {
    let hcp = Hcp::new();
    let html = "<html><body><h1>Notes</h1><h2>Results</h2><p>We found that the new \
                membrane is 3-fold more permeable than the reference.</p></body></html>";
    let web = http_server("text/html", html.into());
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(doc_manifest()).expect("read"))
            .expect("json");
    manifest["component"]["path"] = json!(format!(
        "{REPO_ROOT}/plugins/target/wasm32-wasip2/release/document_analysis.wasm"
    ));
    manifest["grants"] = json!({
        "filesystem": [{"path": format!("{REPO_ROOT}/plugins/document-analysis/samples"), "guest_path": "/documents", "access": "read-only"}],
        "network": [{"host": "localhost", "port": web.port(), "allow_private": true}]
    });
    let manifest = write_json(tmp.path(), "manifest.json", &manifest);
    let mut submit = seed_submit();
    submit["payload"]["inputs"]["document_uri"] =
        json!(format!("http://localhost:{}/notes.html", web.port()));
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let answer = parse_answer(&out);
    assert_eq!(
        answer.payload["outputs"]["findings"],
        json!([{
            "statement": "We found that the new membrane is 3-fold more permeable than the reference.",
            "confidence": 0.87,
            "source_section": "Results"
        }])
    );

    // Without allow_private, a name resolving to loopback is not reachable.
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("read")).expect("json");
    m["grants"]["network"][0]["allow_private"] = json!(false);
    write_json(tmp.path(), "manifest.json", &m);
    let out = hcp.run(&[
        "run",
        "--manifest",
        manifest.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskFailed);
    assert_eq!(answer.payload["error_code"], "resource_unavailable");
    assert!(
        stderr(&out).contains("granted host localhost resolved to non-public 127.0.0.1; dropped (the grant does not allow_private)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn inputs_off_the_schema_are_rejected_naming_the_field() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut submit = seed_submit();
    submit["payload"]["inputs"]["analysis_type"] = json!("summarize_everything");
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "--manifest",
        &doc_manifest(),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 1);
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskRejected);
    assert_eq!(answer.payload["reason_code"], "invalid_input");
    assert_eq!(
        answer.payload["reason_message"],
        "inputs do not match the input_schema of document-analysis@1.0.0:\n  \
         /payload/inputs/analysis_type: \"summarize_everything\" is not one of \"key_findings_extraction\""
    );
}

#[test]
fn bad_invocations_exit_2_with_a_clear_error() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let not_json = tmp.path().join("bad.json");
    std::fs::write(&not_json, "{ not json").expect("write");
    let wrong_type = write_json(
        tmp.path(),
        "wrong.json",
        &json!({"hcp_version": "1.0", "message_id": "m", "timestamp": "t", "session_id": "s",
                "type": "task_completed", "payload": {"outputs": {}}}),
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "run".into(),
                "--manifest".into(),
                doc_manifest(),
                "--input".into(),
                not_json.display().to_string(),
            ],
            "error: <tmp>/bad.json: not valid JSON: key must be a string at line 1 column 3\n",
        ),
        (
            vec![
                "run".into(),
                "--manifest".into(),
                doc_manifest(),
                "--input".into(),
                wrong_type.display().to_string(),
            ],
            "error: <tmp>/wrong.json: expected a task_submit message, got task_completed\n",
        ),
        (
            vec![
                "run".into(),
                "--manifest".into(),
                "/nonexistent/manifest.json".into(),
                "--input".into(),
                "x".into(),
            ],
            "error: /nonexistent/manifest.json: cannot read manifest: No such file or directory (os error 2)\n",
        ),
        (
            vec![
                "surface".into(),
                format!("{REPO_ROOT}/schemas/fixtures/capability/invalid/relative-grant-path.json"),
            ],
            "error: <repo>/schemas/fixtures/capability/invalid/relative-grant-path.json: invalid manifest:\n  \
             /grants/filesystem/0/path: \"data\" is not absolute: grant an absolute directory, or one under ${manifest_dir}/\n",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = hcp.run(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let err = portable(&stderr(&out), Some(tmp.path()));
        let err: String = err
            .lines()
            .filter(|l| !l.starts_with("warning:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(err, expected, "{args:?}");
        assert!(stdout(&out).is_empty());
    }
}

#[test]
fn a_run_past_max_duration_fails_with_timeout() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    // The probe imports files, sockets and instruments, so its manifest grants a little.
    let probe = ManifestBuilder::new("probe", hcp_tests::PROBE)
        .set(
            "/grants/filesystem",
            json!([{"path": tmp.path(), "access": "read-only"}]),
        )
        .set("/grants/network", json!([{"host": "localhost", "port": 9}]))
        .set("/grants/instruments", json!(["cvd-rig"]))
        .write(tmp.path());
    let mut submit = seed_submit();
    submit["payload"]["capability"] = json!("probe");
    submit["payload"]["inputs"] = json!({"action": "spin"});
    submit["payload"]["constraints"]["max_duration"] = json!("PT1S");
    submit["payload"]
        .as_object_mut()
        .expect("payload")
        .remove("expected_output");
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        probe.to_str().expect("utf8"),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskFailed);
    assert_eq!(answer.payload["error_code"], "timeout");
    assert_eq!(
        answer.payload["error_message"],
        "stopped at its deadline of PT1S"
    );
    assert_eq!(
        answer.payload["execution_summary"]["risk_events"],
        json!(["timeout"])
    );
}

#[test]
fn outputs_missing_a_required_field_fail_the_task() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut submit = seed_submit();
    submit["payload"]["expected_output"]["required_fields"] = json!(["findings", "summary"]);
    let input = write_json(tmp.path(), "submit.json", &submit);
    let out = hcp.run(&[
        "run",
        "-q",
        "--manifest",
        &doc_manifest(),
        "--input",
        input.to_str().expect("utf8"),
    ]);
    assert_eq!(code(&out), 1);
    let answer = parse_answer(&out);
    assert_eq!(answer.kind, MessageType::TaskFailed);
    assert_eq!(answer.payload["error_code"], "execution_error");
    assert_eq!(
        answer.payload["error_message"],
        "outputs lack the required field summary (expected_output.required_fields)"
    );
}

#[test]
fn a_pinned_manifest_refuses_a_changed_component() {
    let hcp = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let component = tmp.path().join("trivial.wasm");
    std::fs::copy(hcp_tests::TRIVIAL, &component).expect("copy");
    let manifest = ManifestBuilder::new("trivial", "trivial.wasm").write(tmp.path());
    let m = manifest.to_str().expect("utf8");
    let out = hcp.run(&["manifest", "pin", m]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let pinned: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).expect("read")).expect("json");
    let digest = pinned["component"]["digest"]
        .as_str()
        .expect("digest")
        .to_owned();
    assert!(digest.starts_with("sha256:") && digest.len() == 71);
    let out = hcp.run(&["surface", m]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("does not pin"));

    // One byte appended: refused before anything runs.
    let mut bytes = std::fs::read(&component).expect("read");
    bytes.push(0);
    std::fs::write(&component, bytes).expect("write");
    let out = hcp.run(&["surface", m]);
    assert_eq!(code(&out), 2);
    let err = portable(&stderr(&out), Some(tmp.path()));
    assert_eq!(
        err,
        "error: <tmp>/manifest.json: invalid manifest:\n  /component/digest: does not match the component: \
         <tmp>/trivial.wasm has sha256:<digest>, the manifest pins sha256:<digest>\n"
    );
}
