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

mod rmcp_http;

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

/// One JSON-RPC request to `/mcp` as a 2026-07-28 client sends it (the
/// protocol version in a header and in `_meta`, the method in
/// `Mcp-Method`), with `extra` headers; the status and the JSON-RPC
/// messages of the answer (a JSON body, or each event of a stream).
fn rpc(
    server: &Server,
    token: Option<&str>,
    extra: &[(&str, &str)],
    method: &str,
    params: Value,
) -> (u16, Vec<Value>) {
    let mut params = params;
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut headers = vec![("Mcp-Method", method.to_owned())];
    if method == "tools/call" {
        headers.push(("Mcp-Name", params["name"].as_str().unwrap_or("").to_owned()));
    }
    if method == "resources/read" {
        headers.push(("Mcp-Name", params["uri"].as_str().unwrap_or("").to_owned()));
    }
    for (k, v) in extra {
        headers.push((k, (*v).to_owned()));
    }
    post_mcp(server, token, &headers, body.to_string().into_bytes())
}

/// A POST to `/mcp` of `body` as it is.
fn post_mcp(
    server: &Server,
    token: Option<&str>,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (u16, Vec<Value>) {
    let mut req = server
        .agent
        .post(server.url("/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28");
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let mut resp = req.send(&body[..]).expect("POST /mcp");
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    let messages = if messages.is_empty() && !text.is_empty() {
        vec![Value::String(text)]
    } else {
        messages
    };
    (status, messages)
}

/// The response of a JSON-RPC exchange (the message with an id).
fn response(messages: &[Value]) -> &Value {
    messages
        .iter()
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC response in {messages:?}"))
}

/// A raw HTTP/1.1 exchange, for what an HTTP client will not send (a
/// `Host` of another name).
fn raw(server: &Server, request: &str) -> u16 {
    use std::io::{Read as _, Write as _};
    let addr = server.base.strip_prefix("http://").expect("http base");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .expect("timeout");
    // The server may answer and close before all of it is written.
    let _ = stream.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn hostile_requests_to_mcp_get_clear_errors_and_the_server_keeps_serving() {
    let data = lab();
    let server = Server::start(data.path());
    let list = |token: Option<&str>, extra: &[(&str, &str)]| {
        rpc(&server, token, extra, "tools/list", json!({}))
    };

    // No credential, or one that is nobody's: 401, as on the HTTP API.
    let (status, body) = list(None, &[]);
    assert_eq!(status, 401, "{body:?}");
    let (status, body) = list(Some("not-a-credential"), &[]);
    assert_eq!(status, 401, "{body:?}");
    // A browser page of another origin (the request of a page a user
    // opened, carrying the credential or not): 403.
    let (status, body) = list(Some(LOCAL), &[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{body:?}");
    // A name rebound to this host (DNS rebinding): 403.
    let addr = server
        .base
        .strip_prefix("http://")
        .expect("base")
        .to_owned();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let status = raw(
        &server,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: evil.example:8787\r\nAuthorization: Bearer {LOCAL}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!(status, 403);

    // Malformed JSON-RPC, an unknown method: JSON-RPC errors.
    let (status, body) = post_mcp(
        &server,
        Some(LOCAL),
        &[],
        b"{\"jsonrpc\": \"2.0\", \"id\": 1,".to_vec(),
    );
    assert!(
        (400..500).contains(&status),
        "malformed JSON is a client error: {status} {body:?}"
    );
    let (_, body) = rpc(&server, Some(LOCAL), &[], "no/such/method", json!({}));
    assert_eq!(response(&body)["error"]["code"], -32601, "{body:?}");

    // Oversized arguments: 413 before anything is parsed or recorded
    // (sent raw: the server answers before the body is all sent, and may
    // close the connection while the client still writes).
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "document-analysis", "arguments": {"document_uri": "x".repeat(2 << 20)}}})
    .to_string();
    let status = raw(
        &server,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {LOCAL}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{big}",
            big.len()
        ),
    );
    assert_eq!(status, 413);

    // Arguments off the tool's schema: the gate's invalid_input, with the
    // JSON pointer of what is wrong, and its receipt.
    let (status, body) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "tools/call",
        json!({"name": "document-analysis", "arguments": {"document_uri": 7, "analysis_type": "key_findings_extraction"}}),
    );
    assert_eq!(status, 200, "{body:?}");
    let result = &response(&body)["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["reason_code"], "invalid_input",
        "{result}"
    );
    assert!(
        result["structuredContent"]["reason_message"]
            .as_str()
            .is_some_and(|m| m.contains("/inputs/document_uri")),
        "{result}"
    );
    // A tool that is not installed: refused by the gate, not a crash.
    let (_, body) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "tools/call",
        json!({"name": "no-such-tool", "arguments": {}}),
    );
    assert_eq!(response(&body)["result"]["isError"], true, "{body:?}");

    // `_meta` of the wrong shape: the client's error, naming it.
    let (_, body) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "tools/call",
        json!({"name": "document-analysis", "arguments": {}, "_meta": {"hcp/intent": 5}}),
    );
    assert_eq!(response(&body)["error"]["code"], -32602, "{body:?}");

    // The server still serves.
    let (status, body) = list(Some(LOCAL), &[]);
    assert_eq!(status, 200, "{body:?}");
    assert_eq!(
        response(&body)["result"]["tools"][0]["name"],
        "document-analysis",
        "{body:?}"
    );
    let (status, _) = server.get("/healthz", None);
    assert_eq!(status, 200);
}

#[test]
fn rmcp_client_over_stdio() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::{ConfigureCommandExt as _, TokioChildProcess};

    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_stdio(policies.path(), &["harness-local-01", "harness-beta-002"]);
    let spawn = |caller: &str| {
        TokioChildProcess::new(
            tokio::process::Command::new(env!("CARGO_BIN_EXE_hcp")).configure(|c| {
                c.args(["mcp", "--as", caller])
                    .env("HCP_DATA_DIR", data.path())
                    .env("HCP_POLICIES", policies.path())
                    .env("HCP_CACHE_DIR", cache_dir())
                    .current_dir(REPO_ROOT);
            }),
        )
        .expect("spawn hcp mcp")
    };
    let call = |name: &str, arguments: Value| {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        params
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let local = ().serve(spawn("harness-local-01")).await.expect("connect");
        let tools = local.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["document-analysis"]);
        let done = local
            .call_tool(call(
                "document-analysis",
                serde_json::from_str(&document_args()).expect("json"),
            ))
            .await
            .expect("tools/call");
        assert_eq!(done.is_error, Some(false), "{done:?}");
        assert!(
            done.structured_content
                .as_ref()
                .is_some_and(|s| s["findings"].is_array()),
            "{done:?}"
        );
        local.cancel().await.expect("close");

        let beta = ().serve(spawn("harness-beta-002")).await.expect("connect");
        let refused = beta
            .call_tool(call(
                "cvd-material-synthesis",
                serde_json::from_str(&hot_cvd_args()).expect("json"),
            ))
            .await
            .expect("tools/call");
        assert_eq!(refused.is_error, Some(true), "{refused:?}");
        let s = refused.structured_content.expect("structured");
        assert_eq!(s["reason_code"], "risk_too_high", "{s}");
        assert!(
            s["suggestion"].as_str().is_some_and(|t| t.contains("800")),
            "{s}"
        );
        beta.cancel().await.expect("close");
    });
}

#[test]
fn a_thousand_concurrent_calls_of_one_caller_are_held_by_its_slots_and_quotas() {
    let data = lab();
    let server = Server::start(data.path());
    let args: Value = serde_json::from_str(&document_args()).expect("json");
    let results: Vec<(u16, Vec<Value>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..250)
            .map(|_| {
                s.spawn(|| {
                    (0..4)
                        .map(|_| {
                            rpc(
                                &server,
                                Some(LOCAL),
                                &[],
                                "tools/call",
                                json!({"name": "document-analysis", "arguments": args}),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(results.len(), 1000);
    let (mut completed, mut held) = (0, 0);
    let mut tasks = Vec::new();
    for (status, body) in &results {
        assert_eq!(*status, 200, "{body:?}");
        let result = &response(body)["result"];
        if let Some(t) = result["_meta"]["hcp/task_id"].as_str() {
            tasks.push(t.to_owned());
        }
        if result["isError"] == false {
            assert!(
                result["structuredContent"]["findings"].is_array(),
                "{result}"
            );
            completed += 1;
        } else {
            let code = result["structuredContent"]["reason_code"].as_str();
            assert!(
                matches!(code, Some("resource_unavailable" | "rate_limited")),
                "a call beyond the caller's slots and quotas is refused as such: {result}"
            );
            held += 1;
        }
    }
    assert!(completed > 0, "{held} held, none completed");
    // Nothing lost: every task a call named is final, with its answer.
    for task in &tasks {
        let (status, body) = server.get(&format!("/v1/tasks/{task}/result"), Some(LOCAL));
        assert_eq!(status, 200, "task {task}: {body}");
    }
    let (status, _) = server.get("/healthz", None);
    assert_eq!(status, 200);
}

#[test]
fn a_client_that_never_reads_its_answers_loses_nothing() {
    use std::io::Write as _;
    let data = lab();
    let server = Server::start(data.path());
    let addr = server
        .base
        .strip_prefix("http://")
        .expect("base")
        .to_owned();
    // Ten calls sent on connections whose answers are never read, then
    // dropped.
    let streams: Vec<std::net::TcpStream> = (0..10)
        .map(|i| {
            let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "document-analysis",
            "arguments": serde_json::from_str::<Value>(&document_args()).expect("json"),
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "hcp/message_id": format!("unread-{i}"),
            }}})
            .to_string();
            let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
            write!(
                stream,
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {LOCAL}\r\n\
                 Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
                 Mcp-Name: document-analysis\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .expect("write");
            stream
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(2));
    drop(streams);
    // Every task ran to its final state, with its answer; the server
    // serves the next caller.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let (status, body) = server.get("/v1/tasks?limit=100", Some(LOCAL));
        assert_eq!(status, 200, "{body}");
        let tasks = body["tasks"].as_array().expect("tasks");
        let done = tasks.iter().filter(|t| t["state"] == "completed").count();
        if tasks.len() == 10 && done == 10 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not all final: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (status, body) = rpc(&server, Some(LOCAL), &[], "tools/list", json!({}));
    assert_eq!(status, 200, "{body:?}");
}

/// The task of `caller` waiting for an operator's approval, once there
/// is one.
fn pending_approval(server: &Server) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, body) = server.get("/v1/tasks?state=pending_approval", Some(OPERATOR));
        assert_eq!(status, 200, "{body}");
        if let Some(id) = body["tasks"][0]["task_id"].as_str() {
            return id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no task waits");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn approve(server: &Server, task: &str) {
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{task}"),
        OPERATOR,
        &json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_call_waits_through_an_operators_approval_and_a_bounded_wait_names_its_task() {
    let data = lab();
    let server = Server::start_with(data.path(), &["--mcp-wait", "PT8S"]);
    let url = server.url("/mcp");
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(REPO_ROOT).join("plugins/cvd-material-synthesis/examples/task_submit.json"),
        )
        .expect("example"),
    )
    .expect("json");
    let inputs = seed["payload"]["inputs"].to_string();
    let call = |meta: &str| {
        let (url, inputs, meta) = (url.clone(), inputs.clone(), meta.to_owned());
        std::thread::spawn(move || {
            python(
                &[
                    "--http",
                    &url,
                    "--token",
                    ALPHA,
                    "--meta",
                    &meta,
                    "call",
                    "cvd-material-synthesis",
                    &inputs,
                ],
                &[],
            )
        })
    };
    // The seed's CVD task (R4, the declaration requires an operator): the
    // call waits, with progress notifications, and completes once approved.
    let waiting = call(r#"{"hcp/constraints": {"data_classification": "T2"}}"#);
    let task = pending_approval(&server);
    approve(&server, &task);
    let (code, lines) = waiting.join().expect("python");
    assert_eq!(code, 0, "{lines:?}");
    let done = result(&lines);
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(done["_meta"]["hcp/task_id"], task.as_str(), "{done}");
    assert!(done["structuredContent"].is_object(), "{done}");
    assert!(
        done["progress"]
            .as_array()
            .is_some_and(|p| p.iter().any(|m| m
                .as_str()
                .is_some_and(|m| m.contains("waiting for an operator's approval")))),
        "{done}"
    );

    // Nobody approves within --mcp-wait: the result names the task and how
    // to follow it; called again with the same hcp/message_id once it is
    // approved, the call gets the same task's answer.
    let meta =
        r#"{"hcp/message_id": "mcp-cvd-2", "hcp/constraints": {"data_classification": "T2"}}"#;
    let (code, lines) = call(meta).join().expect("python");
    assert_eq!(code, 1, "{lines:?}");
    let waited = result(&lines);
    assert_eq!(
        waited["structuredContent"]["status"], "pending_approval",
        "{waited}"
    );
    assert_eq!(
        waited["structuredContent"]["state"], "pending_approval",
        "{waited}"
    );
    let task = waited["structuredContent"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    assert!(
        waited["text"][0]
            .as_str()
            .is_some_and(|t| t.contains(&format!("/v1/tasks/{task}"))),
        "{waited}"
    );
    approve(&server, &task);
    let (code, lines) = call(meta).join().expect("python");
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(result(&lines)["_meta"]["hcp/task_id"], task.as_str());
}

#[test]
fn list_changed_goes_out_on_install_remove_and_policy_reload() {
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_stdio(policies.path(), &[]);
    let dir = policies.path().to_str().expect("utf-8").to_owned();
    let server = Server::start_with(data.path(), &["--policies", &dir]);
    let mut child = Command::new("python3")
        .current_dir(REPO_ROOT)
        .args(["examples/mcp_client.py", "--http", &server.url("/mcp")])
        .args(["--token", LOCAL, "listen", "3"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    // Read on a thread of its own: a notification that never comes fails
    // the test after 30 s rather than holding it.
    let rx = lines_of(child.stdout.take().expect("stdout"));
    let next = || -> Value {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("no notifications/tools/list_changed within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    assert!(next().get("protocol_version").is_some());
    assert_eq!(next()["listening"], true);
    let hcp = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_hcp"))
            .args(args)
            .env("HCP_DATA_DIR", data.path())
            .env("HCP_POLICIES", &dir)
            .env("HCP_CACHE_DIR", cache_dir())
            .current_dir(REPO_ROOT)
            .output()
            .expect("hcp");
        assert!(out.status.success(), "{out:?}");
    };

    // A policy reload that lists one more capability for the caller.
    let path = policies.path().join("callers.json");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    for caller in doc["callers"].as_array_mut().expect("callers") {
        if caller["id"] == "harness-local-01" {
            caller["capabilities"] = json!(["document-analysis", "hid-assistant"]);
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).expect("json")).expect("write");
    let (status, body, _) = server.post("/v1/policy/reload", OPERATOR, &json!({}));
    assert_eq!(status, 200, "{body}");
    let event = next();
    assert_eq!(
        event["tools"],
        json!(["document-analysis", "hid-assistant"]),
        "{event}"
    );

    // A removal, by the command line beside the server.
    hcp(&["remove", "hid-assistant@1.0.0"]);
    let event = next();
    assert_eq!(event["tools"], json!(["document-analysis"]), "{event}");

    // An install (the same manifest again).
    let host =
        hcp::engine::Host::open(super::paths(data.path()), Default::default()).expect("host");
    host.install_manifest(&Path::new(REPO_ROOT).join("plugins/hid-assistant/manifest.json"))
        .expect("install");
    let event = next();
    assert_eq!(
        event["tools"],
        json!(["document-analysis", "hid-assistant"]),
        "{event}"
    );
    let status = child.wait().expect("python");
    assert!(status.success());
}

#[test]
fn a_client_that_cancels_its_call_stops_the_task_with_a_receipt() {
    use std::io::Write as _;
    let data = super::shutdown::sleeper_lab(None);
    let server = Server::start(data.path());
    let addr = server
        .base
        .strip_prefix("http://")
        .expect("base")
        .to_owned();
    // A call of a task that sleeps a minute, on a connection the client
    // then closes (how a Streamable HTTP client cancels a call it waits
    // for).
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "document-analysis",
    "arguments": {"ms": 60_000},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "hcp/capability_version": "9.x",
        "hcp/constraints": {"max_duration": "PT2M", "data_classification": "T1"},
    }}})
    .to_string();
    let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {LOCAL}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: document-analysis\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let task = loop {
        let (_, body) = server.get("/v1/tasks?state=running", Some(LOCAL));
        if let Some(id) = body["tasks"][0]["task_id"].as_str() {
            break id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "never ran: {body}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let cancelled = std::time::Instant::now();
    drop(stream);
    // Stopped within seconds (not the minute it sleeps), failed, with a
    // gate.abandoned receipt.
    let answer = server.wait_result(&task, LOCAL);
    assert!(
        cancelled.elapsed() < std::time::Duration::from_secs(30),
        "the task ran on: {answer}"
    );
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert!(
        answer["payload"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("cancelled")),
        "{answer}"
    );
    let (status, body) = server.get(&format!("/v1/receipts?task={task}"), Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    assert!(
        body["receipts"]
            .as_array()
            .expect("receipts")
            .iter()
            .any(|r| r["call"] == "gate.abandoned"),
        "{body}"
    );
}

#[test]
fn artifacts_are_resource_links_readable_by_their_caller_only() {
    let data = lab();
    let src = tempfile::tempdir().expect("tempdir");
    let host =
        hcp::engine::Host::open(super::paths(data.path()), Default::default()).expect("host");
    // The probe guest as document-analysis 7.0.0 (every interface it
    // imports granted), which makes the artifacts it is asked for.
    host.install_manifest(
        &hcp_tests::ManifestBuilder::new("document-analysis", hcp_tests::PROBE)
            .set("/capability/version", json!("7.0.0"))
            .set(
                "/grants/network",
                json!([{"host": "localhost", "port": 9, "allow_private": true}]),
            )
            .set("/grants/instruments", json!(["cvd-rig"]))
            .write(src.path()),
    )
    .expect("install the probe");
    drop(host);
    let server = Server::start(data.path());
    let (status, body) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "tools/call",
        json!({
            "name": "document-analysis",
            "arguments": {"action": "artifacts", "count": 1, "size": 5},
            "_meta": {"hcp/capability_version": "=7.0.0",
                      "hcp/constraints": {"data_classification": "T1"}},
        }),
    );
    assert_eq!(status, 200, "{body:?}");
    let result = &response(&body)["result"];
    assert_eq!(result["isError"], false, "{result}");
    let link = result["content"]
        .as_array()
        .expect("content")
        .iter()
        .find(|c| c["type"] == "resource_link")
        .unwrap_or_else(|| panic!("no resource link: {result}"));
    let uri = link["uri"].as_str().expect("uri");
    assert!(uri.starts_with("hcp://"), "{link}");

    // Its caller reads it.
    let (status, body) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "resources/read",
        json!({"uri": uri}),
    );
    assert_eq!(status, 200, "{body:?}");
    let contents = &response(&body)["result"]["contents"][0];
    assert_eq!(contents["uri"], uri, "{body:?}");
    assert_eq!(contents["blob"], "BwcHBwc=", "five bytes of 7: {body:?}");
    // Another caller (an operator too) finds nothing there, as for an
    // artifact that does not exist.
    for token in [ALPHA, OPERATOR] {
        let (_, body) = rpc(
            &server,
            Some(token),
            &[],
            "resources/read",
            json!({"uri": uri}),
        );
        assert!(response(&body).get("error").is_some(), "{body:?}");
    }
    let (_, missing) = rpc(
        &server,
        Some(LOCAL),
        &[],
        "resources/read",
        json!({"uri": "hcp://session-nope/artifacts/x"}),
    );
    assert_eq!(
        response(&missing)["error"]["code"],
        response(&body_of(&server, uri))["error"]["code"],
    );
}

/// Another caller's read of `uri`.
fn body_of(server: &Server, uri: &str) -> Vec<Value> {
    rpc(
        server,
        Some(ALPHA),
        &[],
        "resources/read",
        json!({"uri": uri}),
    )
    .1
}
/// The lines a child writes to `stdout`, read on a thread of their own:
/// a line that never comes fails a test at its `recv_timeout` rather than
/// holding it.
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A child process killed when the test ends, also by a failed assertion
/// (left running, it holds the test runner's output open).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A data directory with the sleeper guest installed as
/// `document-analysis` 9.0.0 with one session at a time
/// (`concurrent_limit` 1): a second task is queued behind the first.
fn one_slot_sleeper_lab() -> tempfile::TempDir {
    let data = tempfile::tempdir().expect("tempdir");
    let host =
        hcp::engine::Host::open(super::paths(data.path()), Default::default()).expect("host");
    let src = tempfile::tempdir().expect("tempdir");
    let manifest = hcp_tests::ManifestBuilder::new("document-analysis", hcp_tests::SLEEPER)
        .set("/capability/version", json!("9.0.0"))
        .set(
            "/capability/constraints",
            json!({"max_duration": "PT2M", "concurrent_limit": 1}),
        );
    host.install_manifest(&manifest.write(src.path()))
        .expect("install the sleeper");
    data
}

/// A `tools/call` of the sleeper (sleeping `ms`) sent on a connection of
/// its own whose answer is never read: dropping the stream is how a
/// Streamable HTTP client cancels a call it waits for.
fn sleeper_call(server: &Server, ms: u64, message_id: &str) -> std::net::TcpStream {
    use std::io::Write as _;
    let addr = server.base.strip_prefix("http://").expect("base");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "document-analysis",
    "arguments": {"ms": ms},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "hcp/capability_version": "9.x",
        "hcp/message_id": message_id,
        "hcp/constraints": {"max_duration": "PT2M", "data_classification": "T1"},
    }}})
    .to_string();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {LOCAL}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: document-analysis\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    stream
}

/// The first task of `token`'s caller in `state`, once there is one.
fn task_in(server: &Server, token: &str, state: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, body) = server.get(&format!("/v1/tasks?state={state}"), Some(token));
        if let Some(id) = body["tasks"][0]["task_id"].as_str() {
            return id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "none {state}: {body}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The final answer of `task` within `within`, or the test fails with
/// the task's state then.
fn final_within(server: &Server, task: &str, within: std::time::Duration) -> Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let (status, body) = server.get(&format!("/v1/tasks/{task}/result"), Some(OPERATOR));
        if status == 200 {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {task} was not stopped within {within:?}: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Its `gate.abandoned` receipt names `transport` (in its decision input,
/// as an evidence pack of `data` carries it).
fn abandoned_over(server: &Server, data: &Path, task: &str, transport: &str) {
    let (status, body) = server.get(&format!("/v1/receipts?task={task}"), Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    let abandoned: Vec<&Value> = body["receipts"]
        .as_array()
        .expect("receipts")
        .iter()
        .filter(|r| r["call"] == "gate.abandoned")
        .collect();
    assert_eq!(abandoned.len(), 1, "{body}");
    let pack = data.join(format!("abandoned-{task}.tar"));
    let out = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["evidence", "export", "--all", "-o"])
        .arg(&pack)
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", cache_dir())
        .current_dir(REPO_ROOT)
        .output()
        .expect("hcp");
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(&pack).expect("pack");
    let needle = format!(
        "cancelled its tools/call or closed the connection\",\"transport\":\"{transport}\""
    );
    assert!(
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "no gate.abandoned input naming {transport} in the pack"
    );
}

#[test]
fn a_cancelled_call_queued_for_a_slot_withdraws_its_task_with_a_receipt() {
    let data = one_slot_sleeper_lab();
    let server = Server::start(data.path());
    // The first call's task takes the one slot for a minute; the second
    // is queued behind it.
    let first = sleeper_call(&server, 60_000, "mcp-slot-1");
    let running = task_in(&server, LOCAL, "running");
    let second = sleeper_call(&server, 1, "mcp-slot-2");
    let queued = task_in(&server, LOCAL, "queued");
    assert_ne!(queued, running);
    // Its client goes away: the queued task is withdrawn now (not run once
    // the slot frees, a minute later, for nobody).
    drop(second);
    let answer = final_within(&server, &queued, std::time::Duration::from_secs(15));
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert!(
        answer["payload"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("cancelled") && m.contains("queued")),
        "{answer}"
    );
    abandoned_over(&server, data.path(), &queued, "mcp/http");
    // The running task is not the cancelled one's: it still runs.
    let (_, job) = server.get(&format!("/v1/tasks/{running}"), Some(LOCAL));
    assert_eq!(job["status"], "running", "{job}");
    drop(first);
    let answer = final_within(&server, &running, std::time::Duration::from_secs(15));
    assert_eq!(answer["type"], "task_failed", "{answer}");
    abandoned_over(&server, data.path(), &running, "mcp/http");
    // Never ran: its session has no receipt but the admission and the
    // withdrawal.
    let (_, body) = server.get(&format!("/v1/receipts?task={queued}"), Some(OPERATOR));
    assert!(
        !body.to_string().contains("session.open"),
        "the withdrawn task ran: {body}"
    );
}

#[test]
fn a_call_cancelled_while_it_waits_for_an_approval_withdraws_it_from_the_queue() {
    use std::io::Write as _;
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_stdio(policies.path(), &["harness-alpha-001"]);
    let dir = policies.path().to_str().expect("utf-8").to_owned();
    // The operators' server beside the agent's `hcp mcp`, on one data
    // directory.
    let server = Server::start_with(data.path(), &["--policies", &dir]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["mcp", "--as", "harness-alpha-001"])
        .env("HCP_DATA_DIR", data.path())
        .env("HCP_POLICIES", &dir)
        .env("HCP_CACHE_DIR", cache_dir())
        .current_dir(REPO_ROOT)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("hcp mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut child = Reaped(child);
    let rx = lines_of(stdout);
    // The seed's CVD task (R4: an operator approves it), called over
    // stdio by a 2026-07-28 client.
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(REPO_ROOT).join("plugins/cvd-material-synthesis/examples/task_submit.json"),
        )
        .expect("example"),
    )
    .expect("json");
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
    "name": "cvd-material-synthesis",
    "arguments": seed["payload"]["inputs"],
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "hcp/constraints": {"data_classification": "T2"},
    }}});
    writeln!(stdin, "{call}").expect("write");
    let task = pending_approval(&server);
    // The client cancels the call.
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the user stopped the agent"}});
    writeln!(stdin, "{cancel}").expect("write");
    stdin.flush().expect("flush");
    let answer = final_within(&server, &task, std::time::Duration::from_secs(15));
    assert_eq!(answer["type"], "task_failed", "{answer}");
    assert!(
        answer["payload"]["error_message"]
            .as_str()
            .is_some_and(|m| m.contains("cancelled") && m.contains("approval")),
        "{answer}"
    );
    abandoned_over(&server, data.path(), &task, "mcp/stdio");
    // Gone from the operators' queue, and a decision on it is refused.
    let (status, body) = server.get("/v1/approvals", Some(OPERATOR));
    assert_eq!(status, 200, "{body}");
    assert!(!body.to_string().contains(&task), "still queued: {body}");
    let (status, body, _) = server.post(
        &format!("/v1/approvals/{task}"),
        OPERATOR,
        &json!({"decision": "approve", "reason": "recipe within the lab's SOP"}),
    );
    assert_eq!(status, 409, "{body}");
    // The stdio server still serves.
    let list = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    writeln!(stdin, "{list}").expect("write");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .expect("no answer to tools/list");
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if message["id"] == 8 {
            assert!(message["result"]["tools"].is_array(), "{message}");
            break;
        }
    }
    drop(stdin);
    let status = child.0.wait().expect("hcp mcp");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_client_of_an_earlier_revision_gets_list_changed_on_its_session() {
    let data = lab();
    let policies = tempfile::tempdir().expect("tempdir");
    policies_with_stdio(policies.path(), &["harness-local-01"]);
    // The Python SDK forced to the initialize handshake (a client before
    // 2026-07-28, which has no subscriptions/listen), over stdio.
    let mut child = Command::new("python3")
        .current_dir(REPO_ROOT)
        .args(["examples/mcp_client.py", "--legacy", "--stdio-as"])
        .args(["harness-local-01", "--hcp", env!("CARGO_BIN_EXE_hcp")])
        .args(["listen", "2"])
        .env("HCP_DATA_DIR", data.path())
        .env("HCP_POLICIES", policies.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let rx = lines_of(child.stdout.take().expect("stdout"));
    let mut child = Reaped(child);
    let next = || -> Value {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("no notifications/tools/list_changed within 30 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    let version = next();
    let version = version["protocol_version"].as_str().expect("version");
    assert!(version < "2026-07-28", "negotiated {version}");
    assert_eq!(next()["listening"], true);
    // A removal and an install, by the command line beside the server.
    let out = Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(["remove", "hid-assistant@1.0.0"])
        .env("HCP_DATA_DIR", data.path())
        .env("HCP_POLICIES", policies.path())
        .env("HCP_CACHE_DIR", cache_dir())
        .current_dir(REPO_ROOT)
        .output()
        .expect("hcp");
    assert!(out.status.success(), "{out:?}");
    let event = next();
    assert_eq!(event["event"], "ToolListChangedNotification", "{event}");
    assert_eq!(event["tools"], json!(["document-analysis"]), "{event}");
    let host =
        hcp::engine::Host::open(super::paths(data.path()), Default::default()).expect("host");
    host.install_manifest(&Path::new(REPO_ROOT).join("plugins/hid-assistant/manifest.json"))
        .expect("install");
    let event = next();
    assert_eq!(event["event"], "ToolListChangedNotification", "{event}");
    let status = child.0.wait().expect("python");
    assert!(status.success());
}

#[test]
fn rmcp_client_over_streamable_http() {
    use rmcp::ServiceExt as _;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let data = lab();
    let server = Server::start(data.path());
    let url = server.url("/mcp");
    let connect = |token: &str| {
        StreamableHttpClientTransport::with_client(
            rmcp_http::HyperClient,
            StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token),
        )
    };
    let call = |name: &str, arguments: Value, meta: Option<Value>| {
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments.as_object().cloned();
        params.meta = meta.and_then(|m| serde_json::from_value(m).ok());
        params
    };
    let seed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(REPO_ROOT).join("plugins/cvd-material-synthesis/examples/task_submit.json"),
        )
        .expect("example"),
    )
    .expect("json");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    std::thread::scope(|s| {
        runtime.block_on(async {
            // The caller's tools, and the document-analysis task.
            let local = ().serve(connect(LOCAL)).await.expect("connect");
            let tools = local.list_all_tools().await.expect("tools/list");
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            assert_eq!(names, ["document-analysis"]);
            let done = local
                .call_tool(call(
                    "document-analysis",
                    serde_json::from_str(&document_args()).expect("json"),
                    None,
                ))
                .await
                .expect("tools/call");
            assert_eq!(done.is_error, Some(false), "{done:?}");
            assert!(
                done.structured_content
                    .as_ref()
                    .is_some_and(|s| s["findings"].is_array()),
                "{done:?}"
            );
            local.cancel().await.expect("close");

            // The CVD task at 1200 °C: refused, with the seed's suggestion.
            let beta = ().serve(connect(BETA)).await.expect("connect");
            let refused = beta
                .call_tool(call(
                    "cvd-material-synthesis",
                    serde_json::from_str(&hot_cvd_args()).expect("json"),
                    None,
                ))
                .await
                .expect("tools/call");
            assert_eq!(refused.is_error, Some(true), "{refused:?}");
            let st = refused.structured_content.expect("structured");
            assert_eq!(st["reason_code"], "risk_too_high", "{st}");
            assert!(
                st["suggestion"].as_str().is_some_and(|t| t.contains("800")),
                "{st}"
            );
            beta.cancel().await.expect("close");

            // The seed's CVD task within its envelope: the call waits
            // through an operator's approval, given meanwhile.
            let approver = s.spawn(|| {
                let task = pending_approval(&server);
                approve(&server, &task);
                task
            });
            let alpha = ().serve(connect(ALPHA)).await.expect("connect");
            let approved = alpha
                .call_tool(call(
                    "cvd-material-synthesis",
                    seed["payload"]["inputs"].clone(),
                    Some(json!({"hcp/constraints": {"data_classification": "T2"}})),
                ))
                .await
                .expect("tools/call");
            let task = approver.join().expect("approver");
            assert_eq!(approved.is_error, Some(false), "{approved:?}");
            assert_eq!(
                approved.meta.as_ref().and_then(|m| m.get("hcp/task_id")),
                Some(&json!(task)),
                "{approved:?}"
            );
            alpha.cancel().await.expect("close");
        });
    });
}
