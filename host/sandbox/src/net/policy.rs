//! The destinations one task may reach ([`NetPolicy`]), from its manifest's
//! `grants.network`: address literals as granted, names resolved by the
//! host on first use and pinned for the rest of the task.
//!
//! # Ambient authority
//!
//! Performs DNS lookups of granted names.

use super::addresses::{canonical, is_public, normalize_name};
use crate::tasklog::TaskLog;
use hcp_contracts::manifest::{NetGrant, NetHost};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The destinations a task may reach. Granted names are resolved on first
/// use and pinned for the rest of the task.
#[derive(Debug, Default)]
pub(crate) struct NetPolicy {
    /// Granted address literals.
    addrs: BTreeSet<SocketAddr>,
    /// Granted names (lower-case) → their grants.
    names: BTreeMap<String, NameGrant>,
    log: Option<TaskLog>,
}

#[derive(Debug)]
struct NameGrant {
    ports: BTreeSet<u16>,
    allow_private: bool,
    /// Addresses admitted for this name, resolved once.
    pinned: tokio::sync::OnceCell<Vec<IpAddr>>,
}

impl NetPolicy {
    /// The policy of `grants`; notes in `log` what resolution drops and why.
    pub(crate) fn new(grants: &[NetGrant], log: &TaskLog) -> Self {
        let mut policy = Self {
            log: Some(log.clone()),
            ..Self::default()
        };
        for grant in grants {
            match &grant.host {
                NetHost::Ip(ip) => {
                    policy.addrs.insert(SocketAddr::new(*ip, grant.port));
                }
                NetHost::Name(name) => {
                    let entry = policy
                        .names
                        .entry(name.clone())
                        .or_insert_with(|| NameGrant {
                            ports: BTreeSet::new(),
                            allow_private: false,
                            pinned: tokio::sync::OnceCell::new(),
                        });
                    entry.ports.insert(grant.port);
                    // Two grants of one name: private addresses only if both allow.
                    entry.allow_private = if entry.ports.len() == 1 {
                        grant.allow_private
                    } else {
                        entry.allow_private && grant.allow_private
                    };
                }
            }
        }
        policy
    }

    fn note(&self, message: &str) {
        if let Some(log) = &self.log {
            log.host_note(message);
        }
    }

    /// The admitted addresses of a granted name, resolving it on first use.
    async fn pinned(&self, name: &str, grant: &NameGrant) -> Vec<IpAddr> {
        grant
            .pinned
            .get_or_init(|| async {
                let resolved = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio::net::lookup_host((name, 0)),
                )
                .await;
                let found: Vec<IpAddr> = match resolved {
                    Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
                    Ok(Err(e)) => {
                        self.note(&format!("granted host {name} did not resolve: {e}"));
                        Vec::new()
                    }
                    Err(_) => {
                        self.note(&format!("granted host {name} did not resolve in 5 s"));
                        Vec::new()
                    }
                };
                let mut pinned = Vec::new();
                for ip in found {
                    if grant.allow_private || is_public(ip) {
                        if !pinned.contains(&ip) {
                            pinned.push(ip);
                        }
                    } else {
                        self.note(&format!(
                            "granted host {name} resolved to non-public {ip}; dropped (the grant does not allow_private)"
                        ));
                    }
                }
                pinned
            })
            .await
            .clone()
    }

    /// The grant that admits a TCP connect to `addr`: `Some(None)` for an
    /// address literal, `Some(Some(name))` for a granted name whose pinned
    /// addresses hold it, `None` when nothing grants it.
    pub(crate) async fn grant_of(&self, addr: SocketAddr) -> Option<Option<&str>> {
        let addr = canonical(addr);
        if self.addrs.contains(&addr) {
            return Some(None);
        }
        for (name, grant) in &self.names {
            if grant.ports.contains(&addr.port())
                && self.pinned(name, grant).await.contains(&addr.ip())
            {
                return Some(Some(name));
            }
        }
        None
    }

    /// The addresses a guest's lookup of `name` is answered with: the
    /// pinned addresses of a granted name (resolved on first use), none for
    /// a name not granted.
    pub(crate) async fn pinned_of(&self, name: &str) -> Vec<IpAddr> {
        let name = normalize_name(name);
        match self.names.get(&name) {
            Some(grant) => self.pinned(&name, grant).await,
            None => Vec::new(),
        }
    }

    /// Whether `name` is a granted name (any port).
    pub(crate) fn may_lookup(&self, name: &str) -> bool {
        self.names.contains_key(&normalize_name(name))
    }

    /// Where an HTTP request to `host:port` may connect (empty when its
    /// granted name resolves to nothing the grant allows), or `None` when
    /// the destination is not granted (nothing is resolved then).
    pub(crate) async fn http_targets(&self, host: &str, port: u16) -> Option<Vec<SocketAddr>> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            let addr = SocketAddr::new(ip, port);
            return self.addrs.contains(&canonical(addr)).then(|| vec![addr]);
        }
        let name = normalize_name(host);
        let grant = self.names.get(&name).filter(|g| g.ports.contains(&port))?;
        let pinned = self.pinned(&name, grant).await;
        Some(
            pinned
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl NetPolicy {
        /// Pins `name`'s addresses as its first resolution would.
        pub(crate) fn pin(&self, name: &str, addresses: Vec<IpAddr>) {
            self.names
                .get(name)
                .expect("a granted name")
                .pinned
                .set(addresses)
                .expect("not pinned yet");
        }

        /// Whether a TCP connect to `addr` is granted.
        async fn may_connect(&self, addr: SocketAddr) -> bool {
            self.grant_of(addr).await.is_some()
        }
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_dropped_unless_allowed() {
        let log = TaskLog::new(10_000);
        let grant = |allow_private| NetGrant {
            host: NetHost::Name("localhost".into()),
            port: 8080,
            allow_private,
        };
        let strict = NetPolicy::new(&[grant(false)], &log);
        assert!(
            !strict
                .may_connect("127.0.0.1:8080".parse().expect("addr"))
                .await
        );
        assert!(strict.may_lookup("localhost"));
        assert_eq!(strict.http_targets("localhost", 8080).await, Some(vec![]));
        assert_eq!(strict.http_targets("localhost", 8081).await, None);

        let allowed = NetPolicy::new(&[grant(true)], &log);
        assert!(
            allowed
                .may_connect("127.0.0.1:8080".parse().expect("addr"))
                .await
        );
        assert!(
            !allowed
                .may_connect("127.0.0.1:8081".parse().expect("addr"))
                .await
        );
        assert!(allowed.http_targets("LOCALHOST.", 8080).await.is_some());
        assert!(!allowed.may_lookup("example.com"));
    }

    #[tokio::test]
    async fn ip_grants_admit_exactly_their_address() {
        let log = TaskLog::new(10_000);
        let policy = NetPolicy::new(
            &[NetGrant {
                host: NetHost::Ip("127.0.0.1".parse().expect("ip")),
                port: 9,
                allow_private: false,
            }],
            &log,
        );
        assert!(
            policy
                .may_connect("127.0.0.1:9".parse().expect("addr"))
                .await
        );
        assert!(
            policy
                .may_connect("[::ffff:127.0.0.1]:9".parse().expect("addr"))
                .await
        );
        assert!(
            !policy
                .may_connect("127.0.0.2:9".parse().expect("addr"))
                .await
        );
        assert!(policy.http_targets("127.0.0.1", 9).await.is_some());
        assert!(policy.http_targets("127.0.0.1", 10).await.is_none());
        assert!(!policy.may_lookup("127.0.0.1"));
    }
}
