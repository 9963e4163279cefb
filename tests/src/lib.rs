//! Test programs and helpers shared by the end-to-end tests.
//!
//! The build script builds every guest; each is named here by a constant
//! holding the absolute path of its component. [`ManifestBuilder`] writes a
//! manifest for a guest into a temporary directory, with the grants a test
//! asks for; [`listener`] and [`http_server`] start real servers on loopback;
//! [`ProbeWorld`] sets up the probe guest's directories, servers and grants.

use serde_json::{Value, json};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

pub mod broker;
pub mod phases;
pub mod registry;

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

mod probe;

pub use probe::{ProbeWorld, probe_granting_files};

/// A manifest under construction for a test.
#[derive(Debug, Clone)]
pub struct ManifestBuilder {
    doc: Value,
}

impl ManifestBuilder {
    /// A minimal R1 manifest for `component`, named `name`, with no grants.
    pub fn new(name: &str, component: &str) -> Self {
        Self {
            doc: json!({
                "capability": {
                    "name": name,
                    "version": "1.0.0",
                    "description": format!("test capability {name}"),
                    "input_schema": {"type": "object"},
                    "output_schema": {"type": "object"},
                    "safety": {
                        "risk_ceiling": "R1",
                        "requires_human_approval": false,
                        "involves_physical_resources": false
                    },
                    "constraints": {"max_duration": "PT30S", "concurrent_limit": 4}
                },
                "component": {
                    "path": component,
                    "world": "hcp:capability/capability@1.0.0"
                }
            }),
        }
    }

    /// Sets `pointer` (e.g. `/grants/network`) to `value`, creating objects
    /// on the way.
    pub fn set(mut self, pointer: &str, value: Value) -> Self {
        let mut node = &mut self.doc;
        let tokens: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
        for (i, token) in tokens.iter().enumerate() {
            if i + 1 == tokens.len() {
                node[*token] = value;
                break;
            }
            if node.get(*token).is_none() {
                node[*token] = json!({});
            }
            node = &mut node[*token];
        }
        self
    }

    /// The document.
    pub fn doc(&self) -> &Value {
        &self.doc
    }

    /// Writes the manifest as `manifest.json` in `dir`.
    pub fn write(&self, dir: &Path) -> PathBuf {
        let path = dir.join("manifest.json");
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&self.doc).expect("json"),
        )
        .expect("write manifest");
        path
    }

    /// Writes and loads the manifest.
    pub fn load(&self, dir: &Path) -> hcp_contracts::Manifest {
        let path = self.write(dir);
        hcp_contracts::manifest::load(&path, hcp_contracts::LoadOptions::default())
            .unwrap_or_else(|e| panic!("test manifest invalid: {e}"))
    }
}

/// A TCP listener on loopback that answers every connection with `banner`
/// and closes it. Returns its address.
pub fn listener(banner: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.write_all(banner.as_bytes());
        }
    });
    addr
}

/// A minimal HTTP/1.1 server on loopback answering every request with
/// `200 OK`, `content-type`, and `body`.
pub fn http_server(content_type: &'static str, body: String) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            let mut stream = stream;
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    addr
}

/// A TCP server on loopback that accepts connections and never answers:
/// for deadlines.
pub fn hanging_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in l.incoming().flatten() {
            held.push(stream);
        }
    });
    addr
}

/// A host's answer as its wire carries it (its JSON), for tests that read
/// an answer as a caller does.
pub fn wire(answer: &hcp_contracts::answer::Answer) -> Value {
    serde_json::to_value(answer).expect("an answer as JSON")
}

/// The directory of the shared compiled-code cache of test runs.
pub fn cache_dir() -> PathBuf {
    Path::new(REPO_ROOT).join("target/hcp-test-cache")
}
