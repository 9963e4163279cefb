//! The probe guest's world, set up once for every test that drives it.

use crate::{ManifestBuilder, PROBE, http_server, listener};
use serde_json::{Value, json};
use std::net::SocketAddr;

/// A temporary directory holding `data/hello.txt` (`"hi"`) and an empty
/// `out/`, three servers on loopback, and the probe's manifest granting:
/// `data/` read-only at `/data`, `out/` read-write at `/out`, the `granted`
/// listener by address, the `web` server by name (`localhost`, private
/// addresses allowed), and the simulated CVD rig. The `other` listener is
/// granted to nobody.
///
/// A test adds what it needs to [`ProbeWorld::manifest`] before loading or
/// writing it.
#[derive(Debug)]
pub struct ProbeWorld {
    /// The directory; removed when the world is dropped.
    pub tmp: tempfile::TempDir,
    /// A listener answering `granted-banner`, granted by address.
    pub granted: SocketAddr,
    /// A listener answering `other-banner`, not granted.
    pub other: SocketAddr,
    /// An HTTP server answering `web body` as `text/plain`, granted by name.
    pub web: SocketAddr,
    /// The probe's manifest with the grants above.
    pub manifest: ManifestBuilder,
}

impl ProbeWorld {
    /// Creates the directories, starts the servers and writes nothing else.
    ///
    /// # Panics
    ///
    /// The temporary directory cannot be created or written.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let data = tmp.path().join("data");
        let out = tmp.path().join("out");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::create_dir(&out).expect("mkdir");
        std::fs::write(data.join("hello.txt"), "hi").expect("write");
        let granted = listener("granted-banner");
        let other = listener("other-banner");
        let web = http_server("text/plain", "web body".into());
        let manifest = ManifestBuilder::new("probe", PROBE)
            .set(
                "/grants/filesystem",
                json!([
                    {"path": data, "guest_path": "/data", "access": "read-only"},
                    {"path": out, "guest_path": "/out", "access": "read-write"}
                ]),
            )
            .set(
                "/grants/network",
                json!([
                    {"host": "127.0.0.1", "port": granted.port()},
                    {"host": "localhost", "port": web.port(), "allow_private": true}
                ]),
            )
            .set("/grants/instruments", json!(["cvd-rig"]));
        Self {
            tmp,
            granted,
            other,
            web,
            manifest,
        }
    }
}

impl Default for ProbeWorld {
    fn default() -> Self {
        Self::new()
    }
}

/// The probe's manifest granting `filesystem` (a `/grants/filesystem`
/// array); the probe imports every interface, so the rest is granted too: a
/// name on a port nothing listens on, and the simulated CVD rig.
pub fn probe_granting_files(filesystem: Value) -> ManifestBuilder {
    ManifestBuilder::new("probe", PROBE)
        .set("/grants/filesystem", filesystem)
        .set(
            "/grants/network",
            json!([{"host": "localhost", "port": 9, "allow_private": true}]),
        )
        .set("/grants/instruments", json!(["cvd-rig"]))
}
