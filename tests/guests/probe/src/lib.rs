//! The probe: one capability that performs, on request, one operation a
//! hostile capability would try, and reports what happened. Tests pair it with
//! manifests granting more or less and assert the host's answer.

use hcp_guest::{Failure, Task, artifacts, checkpoints, instrument, log};
use serde::Deserialize;
use serde_json::{Value, json};
use std::hint::black_box;
use std::io::{Read, Write};

#[derive(Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum Action {
    /// Returns the inputs and the task as seen.
    Echo,
    ReadFile {
        path: String,
    },
    WriteFile {
        path: String,
        content: String,
    },
    ListDir {
        path: String,
    },
    Connect {
        addr: String,
    },
    Lookup {
        name: String,
    },
    /// Tries to accept connections on `addr`.
    Listen {
        addr: String,
    },
    /// Tries to send a UDP datagram to `addr`.
    Udp {
        addr: String,
    },
    HttpGet {
        url: String,
    },
    Env {
        name: String,
    },
    Args,
    /// Spins `iterations` times, or forever without it.
    Spin {
        iterations: Option<u64>,
    },
    /// Allocates and touches `bytes`.
    Grow {
        bytes: usize,
    },
    /// Recurses `depth` levels, or without end.
    Recurse {
        depth: Option<u64>,
    },
    FloodStdout {
        bytes: usize,
    },
    FloodLog {
        lines: u64,
    },
    /// Makes `count` log calls (a host-call-heavy workload).
    LogCalls {
        count: u64,
    },
    Artifacts {
        count: u32,
        size: usize,
    },
    Checkpoint {
        label: String,
        state: Value,
    },
    LoadCheckpoint {
        id: String,
    },
    /// Makes one log call with `message`.
    Log {
        message: String,
    },
    /// Sends `command` with `arguments` to `instrument`.
    Instrument {
        instrument: String,
        command: String,
        arguments: Value,
    },
    /// Reads `instrument`.
    InstrumentRead {
        instrument: String,
    },
    Mkdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Remove {
        path: String,
    },
    Stat {
        path: String,
    },
    /// Runs each action in turn; returns their reports in order.
    Each {
        actions: Vec<Value>,
    },
    /// Returns `outputs` as given.
    Output {
        outputs: Value,
    },
    /// Fails with `code` (an L4 error code name) and optional partial outputs.
    Fail {
        code: String,
        message: String,
        partial: Option<Value>,
    },
    Panic,
}

fn report(result: std::io::Result<Value>) -> Value {
    match result {
        Ok(value) => json!({"ok": true, "value": value}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

/// Recursion with small frames: it exhausts the wasm call stack (not the
/// shadow stack in linear memory).
fn recurse(depth: Option<u64>, n: u64) -> u64 {
    if depth.is_some_and(|d| n >= d) {
        return n;
    }
    black_box(recurse(depth, black_box(n + 1))).wrapping_add(1)
}

fn probe(task: &Task, action: Action) -> Result<Value, Failure> {
    Ok(match action {
        Action::Echo => json!({
            "task_id": task.task_id,
            "session_id": task.session_id,
            "caller_id": task.caller_id,
            "intent": task.intent,
            "constraints": task.constraints,
            "resume_from": task.resume_from,
            "deadline_ms": task.deadline_ms,
        }),
        Action::ReadFile { path } => report(std::fs::read_to_string(&path).map(Value::from)),
        Action::WriteFile { path, content } => report(
            std::fs::File::create(&path)
                .and_then(|mut f| f.write_all(content.as_bytes()))
                .map(|()| Value::Null),
        ),
        Action::ListDir { path } => report(std::fs::read_dir(&path).and_then(|entries| {
            let mut names = Vec::new();
            for e in entries {
                names.push(Value::from(e?.file_name().to_string_lossy().into_owned()));
            }
            names.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            Ok(Value::from(names))
        })),
        Action::Connect { addr } => {
            report(std::net::TcpStream::connect(&addr).and_then(|mut s| {
                let mut banner = String::new();
                s.read_to_string(&mut banner)?;
                Ok(Value::from(banner))
            }))
        }
        Action::Lookup { name } => report({
            use std::net::ToSocketAddrs;
            (name.as_str(), 0)
                .to_socket_addrs()
                .map(|addrs| Value::from(addrs.map(|a| a.ip().to_string()).collect::<Vec<_>>()))
        }),
        Action::Listen { addr } => report(
            std::net::TcpListener::bind(&addr)
                .and_then(|l| Ok(Value::from(l.local_addr()?.to_string()))),
        ),
        Action::Udp { addr } => report(
            std::net::UdpSocket::bind("0.0.0.0:0")
                .and_then(|s| s.send_to(b"exfiltrate", &addr))
                .map(Value::from),
        ),
        Action::HttpGet { url } => match hcp_guest::http::get(&url, 1 << 20) {
            Ok(r) => json!({"ok": true, "value": String::from_utf8_lossy(&r.body)}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        },
        Action::Env { name } => match std::env::var(&name) {
            Ok(v) => json!({"ok": true, "value": v}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        },
        Action::Args => json!({"ok": true, "value": std::env::args().collect::<Vec<_>>()}),
        Action::Spin { iterations } => {
            let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut i = 0u64;
            while iterations.is_none_or(|n| i < n) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x = black_box(x);
                i += 1;
            }
            json!({"ok": true, "value": x})
        }
        Action::Grow { bytes } => {
            let mut v: Vec<u8> = Vec::with_capacity(bytes);
            v.resize(bytes, 1);
            json!({"ok": true, "value": black_box(&v).len()})
        }
        Action::Recurse { depth } => json!({"ok": true, "value": recurse(depth, 0)}),
        Action::FloodStdout { bytes } => {
            let chunk = [b'x'; 1024];
            let mut out = std::io::stdout();
            let mut written = 0;
            while written < bytes {
                let _ = out.write_all(&chunk);
                written += chunk.len();
            }
            json!({"ok": true, "value": written})
        }
        Action::FloodLog { lines } => {
            for i in 0..lines {
                log::info(&format!("line {i} of a flood"));
            }
            json!({"ok": true, "value": lines})
        }
        Action::LogCalls { count } => {
            for _ in 0..count {
                log::debug("x");
            }
            json!({"ok": true, "value": count})
        }
        Action::Artifacts { count, size } => {
            let mut uris = Vec::new();
            for i in 0..count {
                match artifacts::create(
                    &format!("part-{i}.bin"),
                    "application/octet-stream",
                    &vec![7u8; size],
                ) {
                    Ok(uri) => uris.push(Value::from(uri)),
                    Err(e) => {
                        return Ok(json!({"ok": false, "created": uris, "error": format!("{e:?}")}));
                    }
                }
            }
            json!({"ok": true, "value": uris})
        }
        Action::Checkpoint { label, state } => match checkpoints::save(&label, &state) {
            Ok(id) => json!({"ok": true, "value": id}),
            Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
        },
        Action::LoadCheckpoint { id } => match checkpoints::load::<Value>(&id) {
            Ok(state) => json!({"ok": true, "value": state}),
            Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
        },
        Action::Log { message } => {
            log::info(&message);
            json!({"ok": true, "value": null})
        }
        Action::Instrument {
            instrument: name,
            command,
            arguments,
        } => match instrument::command(&name, &command, &arguments) {
            Ok(reading) => json!({"ok": true, "value": reading}),
            Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
        },
        Action::InstrumentRead { instrument: name } => match instrument::read(&name) {
            Ok(reading) => json!({"ok": true, "value": reading}),
            Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
        },
        Action::Mkdir { path } => report(std::fs::create_dir(&path).map(|()| Value::Null)),
        Action::Rename { from, to } => report(std::fs::rename(&from, &to).map(|()| Value::Null)),
        Action::Remove { path } => report(std::fs::remove_file(&path).map(|()| Value::Null)),
        Action::Stat { path } => {
            report(std::fs::metadata(&path).map(|m| Value::from(m.len())))
        }
        Action::Each { actions } => {
            let mut reports = Vec::new();
            for a in actions {
                match serde_json::from_value::<Action>(a) {
                    Ok(action) => reports.push(probe(task, action)?),
                    Err(e) => reports.push(json!({"ok": false, "error": e.to_string()})),
                }
            }
            json!({"ok": true, "value": reports})
        }
        Action::Output { outputs } => return Ok(outputs),
        Action::Fail {
            code,
            message,
            partial,
        } => {
            use hcp_guest::ErrorCode as C;
            let code = match code.as_str() {
                "timeout" => C::Timeout,
                "safety_violation" => C::SafetyViolation,
                "resource_unavailable" => C::ResourceUnavailable,
                "internal_error" => C::InternalError,
                "input_error" => C::InputError,
                _ => C::ExecutionError,
            };
            let mut f = Failure::new(code, message).at("probe", 1);
            if let Some(p) = partial {
                f = f.with_partial_outputs(p);
            }
            return Err(f);
        }
        Action::Panic => panic!("the probe panicked on request"),
    })
}

hcp_guest::export_capability!(probe);
