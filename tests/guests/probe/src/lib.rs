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
    /// Removes the empty directory `path`.
    RemoveDir {
        path: String,
    },
    /// Creates, in the preopened directory `preopen`, the symbolic link
    /// `name` holding `target` (`wasi:filesystem` `symlink-at`).
    Symlink {
        preopen: String,
        target: String,
        name: String,
    },
    /// Writes `bytes` bytes to the new file `path`, `chunk` bytes per
    /// write call; reports how many were written before an error.
    WriteLarge {
        path: String,
        bytes: u64,
        chunk: usize,
    },
    /// Sets the length of the file `path` (created when missing).
    SetLen {
        path: String,
        len: u64,
    },
    /// Writes `data` at `offset` of the file `name` of the preopen
    /// `preopen` (created when missing): with `stream`, through its
    /// output stream opened there; else with one positioned write.
    /// Reports the error's `filesystem-error-code` name.
    WriteAt {
        preopen: String,
        name: String,
        offset: u64,
        data: String,
        #[serde(default)]
        stream: bool,
    },
    /// Writes `bytes` bytes to the new file `name` of the preopen `preopen`
    /// through its `wasi:filesystem` output stream, 4 KiB a call; reports
    /// the `filesystem-error-code` of a failed write.
    StreamWrite {
        preopen: String,
        name: String,
        bytes: u64,
    },
    /// Makes `count` log calls of `size` bytes each.
    BigLogs {
        count: u64,
        size: usize,
    },
    /// Creates up to `count` TCP sockets and holds them.
    Sockets {
        count: u32,
    },
    /// Opens `path` up to `count` times and holds the descriptors.
    OpenFiles {
        path: String,
        count: u32,
    },
    /// Starts `count` listings of the preopen `preopen` (`read-directory`),
    /// reads the first entry of each, and holds them all open.
    HoldListings {
        preopen: String,
        count: u32,
    },
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

/// See [`Action::HoldListings`].
fn hold_listings(preopen: &str, count: u32) -> Value {
    let dirs = wasip2::filesystem::preopens::get_directories();
    let Some((dir, _)) = dirs.iter().find(|(_, p)| p == preopen) else {
        return json!({"ok": false, "error": format!("no preopen {preopen}")});
    };
    let mut held = Vec::new();
    for _ in 0..count {
        let first = dir
            .read_directory()
            .and_then(|listing| listing.read_directory_entry().map(|e| (listing, e)));
        match first {
            Ok((listing, Some(_))) => held.push(listing),
            Ok((_, None)) => return json!({"ok": false, "held": held.len(), "error": "empty"}),
            Err(e) => {
                return json!({"ok": false, "held": held.len(), "error": format!("{e:?}")});
            }
        }
    }
    json!({"ok": true, "value": held.len()})
}

/// See [`Action::StreamWrite`].
fn stream_write(preopen: &str, name: &str, bytes: u64) -> Value {
    use wasip2::filesystem::types::{
        DescriptorFlags, OpenFlags, PathFlags, filesystem_error_code,
    };
    use wasip2::io::streams::StreamError;
    let dirs = wasip2::filesystem::preopens::get_directories();
    let Some((dir, _)) = dirs.iter().find(|(_, p)| p == preopen) else {
        return json!({"ok": false, "error": format!("no preopen {preopen}")});
    };
    let stream = dir
        .open_at(
            PathFlags::empty(),
            name,
            OpenFlags::CREATE,
            DescriptorFlags::WRITE,
        )
        .and_then(|file| file.write_via_stream(0));
    let stream = match stream {
        Ok(s) => s,
        Err(e) => return json!({"ok": false, "error": format!("{e:?}")}),
    };
    let chunk = [b's'; 4096];
    let mut written = 0u64;
    while written < bytes {
        let n = usize::try_from(bytes - written).map_or(chunk.len(), |r| r.min(chunk.len()));
        match stream.blocking_write_and_flush(&chunk[..n]) {
            Ok(()) => written += n as u64,
            Err(StreamError::LastOperationFailed(e)) => {
                return json!({
                    "ok": false,
                    "written": written,
                    "error": filesystem_error_code(&e).map_or("none", |c| c.name()),
                });
            }
            Err(StreamError::Closed) => {
                return json!({"ok": false, "written": written, "error": "closed"});
            }
        }
    }
    json!({"ok": true, "value": written})
}

fn write_at(preopen: &str, name: &str, offset: u64, data: &[u8], stream: bool) -> Value {
    use wasip2::filesystem::types::{
        DescriptorFlags, OpenFlags, PathFlags, filesystem_error_code,
    };
    use wasip2::io::streams::StreamError;
    let dirs = wasip2::filesystem::preopens::get_directories();
    let Some((dir, _)) = dirs.iter().find(|(_, p)| p == preopen) else {
        return json!({"ok": false, "error": format!("no preopen {preopen}")});
    };
    let file = match dir.open_at(
        PathFlags::empty(),
        name,
        OpenFlags::CREATE,
        DescriptorFlags::WRITE,
    ) {
        Ok(f) => f,
        Err(e) => return json!({"ok": false, "error": e.name()}),
    };
    if !stream {
        return match file.write(data, offset) {
            Ok(n) => json!({"ok": true, "value": n}),
            Err(e) => json!({"ok": false, "error": e.name()}),
        };
    }
    let out = match file.write_via_stream(offset) {
        Ok(s) => s,
        Err(e) => return json!({"ok": false, "error": e.name()}),
    };
    match out.blocking_write_and_flush(data) {
        Ok(()) => json!({"ok": true, "value": data.len()}),
        Err(StreamError::LastOperationFailed(e)) => json!({
            "ok": false,
            "error": filesystem_error_code(&e).map_or("none", |c| c.name()),
        }),
        Err(StreamError::Closed) => json!({"ok": false, "error": "closed"}),
    }
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
        Action::RemoveDir { path } => report(std::fs::remove_dir(&path).map(|()| Value::Null)),
        Action::Symlink {
            preopen,
            target,
            name,
        } => {
            let dirs = wasip2::filesystem::preopens::get_directories();
            match dirs.iter().find(|(_, p)| *p == preopen) {
                None => json!({"ok": false, "error": format!("no preopen {preopen}")}),
                Some((dir, _)) => match dir.symlink_at(&target, &name) {
                    Ok(()) => json!({"ok": true, "value": null}),
                    Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
                },
            }
        }
        Action::WriteLarge { path, bytes, chunk } => {
            let buf = vec![b'w'; chunk.max(1)];
            let mut written = 0u64;
            let result = std::fs::File::create(&path).and_then(|mut f| {
                while written < bytes {
                    let n = usize::try_from(bytes - written).map_or(buf.len(), |r| r.min(buf.len()));
                    f.write_all(&buf[..n])?;
                    written += n as u64;
                }
                f.flush()
            });
            match result {
                Ok(()) => json!({"ok": true, "value": written}),
                Err(e) => json!({"ok": false, "error": e.to_string(), "written": written}),
            }
        }
        Action::StreamWrite {
            preopen,
            name,
            bytes,
        } => stream_write(&preopen, &name, bytes),
        Action::WriteAt {
            preopen,
            name,
            offset,
            data,
            stream,
        } => write_at(&preopen, &name, offset, data.as_bytes(), stream),
        Action::SetLen { path, len } => report(
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(len))
                .map(|()| Value::Null),
        ),
        Action::BigLogs { count, size } => {
            let message = "x".repeat(size);
            for _ in 0..count {
                log::info(&message);
            }
            json!({"ok": true, "value": count})
        }
        Action::Sockets { count } => {
            use wasip2::sockets::network::IpAddressFamily;
            let mut held = Vec::new();
            for _ in 0..count {
                match wasip2::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
                {
                    Ok(s) => held.push(s),
                    Err(e) => {
                        return Ok(
                            json!({"ok": false, "created": held.len(), "error": format!("{e:?}")}),
                        );
                    }
                }
            }
            json!({"ok": true, "value": held.len()})
        }
        Action::HoldListings { preopen, count } => hold_listings(&preopen, count),
        Action::OpenFiles { path, count } => {
            let mut held = Vec::new();
            for _ in 0..count {
                match std::fs::File::open(&path) {
                    Ok(f) => held.push(f),
                    Err(e) => {
                        return Ok(
                            json!({"ok": false, "created": held.len(), "error": e.to_string()}),
                        );
                    }
                }
            }
            json!({"ok": true, "value": held.len()})
        }
    })
}

hcp_guest::export_capability!(probe);
