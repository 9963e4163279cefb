//! When the tools change: `notifications/tools/list_changed`.
//!
//! A caller's tools are the installed capabilities its policy lists, as
//! their installed manifests declare them; they change through an install,
//! a removal (by this process or the command line beside it, on the same
//! data directory) or a policy reload. One watcher per server reads what
//! they depend on once a second (the installed capabilities with their
//! component digests, and the policy's digest) and counts the changes;
//! every open `subscriptions/listen` of a client that asked for tool list
//! changes gets a notification at each ([`super::McpServer`]).

use crate::engine::Host;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the watcher looks.
const EVERY: Duration = Duration::from_secs(1);

/// Starts the watcher of `host`'s tools; it stops once every receiver is
/// dropped.
pub(super) fn tools(host: Arc<Host>) -> watch::Receiver<u64> {
    let (tx, rx) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut last = None;
        let mut tick = tokio::time::interval(EVERY);
        loop {
            tick.tick().await;
            if tx.is_closed() {
                return;
            }
            let host = host.clone();
            let now = match tokio::task::spawn_blocking(move || fingerprint(&host)).await {
                Ok(Ok(now)) => now,
                Ok(Err(e)) => {
                    tracing::warn!("MCP tool watcher: {e:#}");
                    continue;
                }
                Err(_) => continue,
            };
            if last.is_some_and(|l| l != now) {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
            last = Some(now);
        }
    });
    rx
}

/// What the tools depend on, hashed.
fn fingerprint(host: &Host) -> anyhow::Result<[u8; 32]> {
    let mut h = Sha256::new();
    h.update(host.policy().digest.to_string().as_bytes());
    for i in host.store.installed()? {
        h.update([0]);
        h.update(i.name.as_bytes());
        h.update([0]);
        h.update(i.version.to_string().as_bytes());
        h.update([0]);
        h.update(i.digest.as_bytes());
    }
    Ok(h.finalize().into())
}
