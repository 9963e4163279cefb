//! The host as an MCP server, end to end: `hcp serve`'s `/mcp` (Streamable
//! HTTP) and `hcp mcp --as` (stdio), driven by the official Python SDK
//! (`mcp` from PyPI, pinned in scripts/test, through
//! examples/mcp_client.py) and by raw HTTP for what no SDK sends (foreign
//! origins, missing credentials, malformed JSON-RPC).

use super::{ALPHA, LOCAL, OPERATOR, Server, lab};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const BETA: &str = "demo-token-harness-beta-002-not-a-secret";

/// The repository's policies, with `mcp_stdio` for the callers named.
fn policies_with_stdio(to: &Path, callers: &[&str]) {
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
    let path = to.join("callers.json");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    for caller in doc["callers"].as_array_mut().expect("callers") {
        if callers.contains(&caller["id"].as_str().expect("id")) {
            caller["mcp_stdio"] = json!(true);
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).expect("json")).expect("write");
}

/// Runs examples/mcp_client.py; its exit code and its JSON lines.
fn python(args: &[&str], env: &[(&str, &Path)]) -> (i32, Vec<Value>) {
    let out = Command::new("python3")
        .current_dir(REPO_ROOT)
        .arg("examples/mcp_client.py")
        .args(args)
        .env("HCP_CACHE_DIR", cache_dir())
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("not JSON ({e}): {l:?}\n{stdout}\n{stderr} (mcp==2.3.0 is installed by scripts/test)")
            })
        })
        .collect::<Vec<Value>>();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "examples/mcp_client.py {args:?} failed ({code}): {stdout}\n{stderr}"
    );
    (code, lines)
}

fn tool_names(lines: &[Value]) -> Vec<String> {
    let tools = lines
        .iter()
        .find_map(|l| l.get("tools"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no tools in {lines:?}"));
    tools
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

/// The result line of a call.
fn result(lines: &[Value]) -> &Value {
    lines
        .iter()
        .find(|l| l.get("isError").is_some())
        .unwrap_or_else(|| panic!("no result in {lines:?}"))
}

fn document_args() -> String {
    json!({
        "document_uri": "file:///documents/paper-123.md",
        "analysis_type": "key_findings_extraction",
    })
    .to_string()
}

fn hot_cvd_args() -> String {
    json!({
        "target_material": "MoS2",
        "substrate": "SiO2/Si",
        "temperature_range": {"min": 700, "max": 1200, "unit": "celsius"},
    })
    .to_string()
}

const DOC_META: &str = r#"{"hcp/intent": "Extract the key findings", "hcp/constraints": {"data_classification": "T1"}}"#;

/// What both transports must show a Python SDK client: the tools a caller
/// may invoke and no other, the seed's document analysis completed with
/// structured outputs, and the CVD task at 1200 °C refused with the
/// seed's suggestion.
fn sdk_session(connect: &dyn Fn(&str) -> Vec<String>, env: &[(&str, &Path)]) {
    let run = |who: &str, rest: &[&str]| {
        let mut args = connect(who);
        args.extend(rest.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        python(&args, env)
    };
    // tools/list per caller, as callers.json lists them.
    let (code, lines) = run("local", &["list"]);
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(
        lines[0]["protocol_version"], "2026-07-28",
        "the current revision is spoken: {lines:?}"
    );
    assert_eq!(tool_names(&lines), ["document-analysis"], "{lines:?}");
    let tool = &lines[1]["tools"][0];
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(REPO_ROOT).join("plugins/document-analysis/manifest.json"),
        )
        .expect("manifest"),
    )
    .expect("json");
    assert_eq!(tool["inputSchema"], manifest["capability"]["input_schema"]);
    assert_eq!(
        tool["outputSchema"],
        manifest["capability"]["output_schema"]
    );
    assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    assert_eq!(tool["annotations"]["openWorldHint"], true, "{tool}");
    let (_, lines) = run("beta", &["list"]);
    let mut names = tool_names(&lines);
    names.sort();
    assert_eq!(names, ["cvd-material-synthesis", "document-analysis"]);
    let cvd = lines[1]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "cvd-material-synthesis")
        .expect("cvd");
    assert_eq!(cvd["annotations"]["destructiveHint"], true, "{cvd}");

    // The seed's document analysis: completed, outputs structured.
    let (code, lines) = run(
        "local",
        &[
            "--meta",
            DOC_META,
            "call",
            "document-analysis",
            &document_args(),
        ],
    );
    assert_eq!(code, 0, "{lines:?}");
    let done = result(&lines);
    assert_eq!(done["isError"], false, "{done}");
    assert!(done["structuredContent"]["findings"].is_array(), "{done}");
    assert!(
        done["_meta"]["hcp/task_id"]
            .as_str()
            .is_some_and(|t| t.starts_with("task-")),
        "{done}"
    );

    // CVD at 1200 °C by a caller cleared for R3: refused with the seed's
    // suggestion, which an agent can act on.
    let (code, lines) = run(
        "beta",
        &[
            "--meta",
            r#"{"hcp/constraints": {"data_classification": "T2"}}"#,
            "call",
            "cvd-material-synthesis",
            &hot_cvd_args(),
        ],
    );
    assert_eq!(code, 1, "{lines:?}");
    let refused = result(&lines);
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["reason_code"], "risk_too_high",
        "{refused}"
    );
    assert_eq!(
        refused["structuredContent"]["assessed_risk_level"], "R4",
        "{refused}"
    );
    let suggestion = refused["structuredContent"]["suggestion"]
        .as_str()
        .unwrap_or_else(|| panic!("no suggestion: {refused}"));
    assert!(suggestion.contains("800"), "{suggestion}");
    assert!(
        refused["text"][0]
            .as_str()
            .is_some_and(|t| t.contains(suggestion)),
        "the text says it too: {refused}"
    );

    // A tool not listed for the caller is not callable either: the gate's
    // refusal, as over the HTTP API.
    let (code, lines) = run(
        "local",
        &["call", "cvd-material-synthesis", &hot_cvd_args()],
    );
    assert_eq!(code, 1, "{lines:?}");
    let refused = result(&lines);
    assert_eq!(
        refused["structuredContent"]["reason_code"], "forbidden",
        "{refused}"
    );
}

#[test]
fn python_sdk_over_streamable_http() {
    let data = lab();
    let server = Server::start(data.path());
    let url = server.url("/mcp");
    let connect = |who: &str| -> Vec<String> {
        let token = match who {
            "local" => LOCAL,
            "beta" => BETA,
            _ => ALPHA,
        };
        ["--http", &url, "--token", token]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    };
    sdk_session(&connect, &[]);
    evidence_names_the_transport(&server, data.path(), "mcp/http");
}

#[test]
fn python_sdk_over_stdio() {
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_stdio(policies.path(), &["harness-local-01", "harness-beta-002"]);
    let hcp = env!("CARGO_BIN_EXE_hcp");
    let connect = |who: &str| -> Vec<String> {
        let caller = match who {
            "local" => "harness-local-01",
            "beta" => "harness-beta-002",
            _ => "harness-alpha-001",
        };
        ["--hcp", hcp, "--stdio-as", caller]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    };
    let env = [
        ("HCP_DATA_DIR", data.path()),
        ("HCP_POLICIES", policies.path()),
    ];
    sdk_session(&connect, &env);

    // A caller callers.json does not allow over stdio: the host refuses
    // to start for it, saying how an operator allows it.
    let out = Command::new(hcp)
        .args(["mcp", "--as", "harness-alpha-001"])
        .env("HCP_DATA_DIR", data.path())
        .env("HCP_POLICIES", policies.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("hcp mcp");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("\"mcp_stdio\": true"), "{stderr}");

    // Its receipts name the transport; the pack replays.
    let server = Server::start_with(
        data.path(),
        &["--policies", policies.path().to_str().expect("utf-8")],
    );
    evidence_names_the_transport(&server, data.path(), "mcp/stdio");
}

/// The admission receipts of MCP calls name the transport, and an
/// evidence pack of them replays.
fn evidence_names_the_transport(server: &Server, data: &Path, transport: &str) {
    let (status, _) = server.get("/v1/whoami", Some(OPERATOR));
    assert_eq!(status, 200);
    let pack = data.join("mcp-pack.tar");
    let hcp = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(args)
            .env("HCP_DATA_DIR", data)
            .env("HCP_CACHE_DIR", cache_dir())
            .current_dir(REPO_ROOT)
            .output()
            .expect("hcp")
    };
    let out = hcp(&[
        "evidence",
        "export",
        "--all",
        "-o",
        pack.to_str().expect("utf8"),
    ]);
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(&pack).expect("pack");
    let needle = format!("\"transport\":\"{transport}\"");
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "the pack's admission inputs name {transport}"
    );
    let out = hcp(&["replay", pack.to_str().expect("utf8")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("ok: "), "{out:?}");
}
