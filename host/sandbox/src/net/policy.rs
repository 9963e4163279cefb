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
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

/// The destinations a task may reach. Granted names are resolved on first
/// use and pinned for the rest of the task.
#[derive(Debug, Default)]
pub(crate) struct NetPolicy {
    /// Granted address literals.
    addrs: BTreeSet<SocketAddr>,
    /// Granted names (lower-case) → their grants.
    names: BTreeMap<String, NameGrant>,
    log: Option<TaskLog>,
    /// How names are resolved: the system's resolver unless a test says.
    resolver: Option<Resolver>,
}

/// A name's resolution.
pub(super) type Resolver =
    fn(String) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;

/// The system's resolver (`getaddrinfo`, on a blocking thread).
fn system_resolver(name: String) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
    Box::pin(async move {
        Ok(tokio::net::lookup_host((name.as_str(), 0))
            .await?
            .map(|a| a.ip())
            .collect())
    })
}

/// The longest a name's resolution may take; past it the name has no
/// address for the rest of the task.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct NameGrant {
    ports: BTreeSet<u16>,
    allow_private: bool,
    /// The name's one resolution in this task, and then its admitted
    /// addresses. Started by the first use and run on a task of its own,
    /// so that whoever started it (a guest's lookup it then drops, say)
    /// neither cancels it nor keeps the other uses waiting on it.
    resolution: OnceLock<watch::Receiver<Option<Vec<IpAddr>>>>,
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
                            resolution: OnceLock::new(),
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
        let mut resolution = grant
            .resolution
            .get_or_init(|| self.start_resolution(name, grant.allow_private))
            .clone();
        match resolution.wait_for(Option::is_some).await {
            Ok(found) => found.clone().unwrap_or_default(),
            // The resolving task ended without an answer (the runtime is
            // shutting down).
            Err(_) => Vec::new(),
        }
    }

    /// Starts resolving `name` on a task of its own (bounded by
    /// [`RESOLVE_TIMEOUT`]); its admitted addresses are sent once.
    fn start_resolution(
        &self,
        name: &str,
        allow_private: bool,
    ) -> watch::Receiver<Option<Vec<IpAddr>>> {
        let (found, resolution) = watch::channel(None);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.note(&format!("granted host {name} not resolved: no runtime"));
            let _ = found.send(Some(Vec::new()));
            return resolution;
        };
        let resolve = self.resolver.unwrap_or(system_resolver);
        let (name, log) = (name.to_owned(), self.log.clone());
        runtime.spawn(async move {
            let note = |message: String| {
                if let Some(log) = &log {
                    log.host_note(&message);
                }
            };
            let resolved = tokio::time::timeout(RESOLVE_TIMEOUT, resolve(name.clone())).await;
            let mut pinned = Vec::new();
            match resolved {
                Ok(Ok(addrs)) => {
                    for ip in addrs {
                        let ip = ip.to_canonical();
                        if allow_private || is_public(ip) {
                            if !pinned.contains(&ip) {
                                pinned.push(ip);
                            }
                        } else {
                            note(format!(
                                "granted host {name} resolved to non-public {ip}; dropped (the grant does not allow_private)"
                            ));
                        }
                    }
                }
                Ok(Err(e)) => note(format!("granted host {name} did not resolve: {e}")),
                Err(_) => note(format!(
                    "granted host {name} did not resolve in {} s",
                    RESOLVE_TIMEOUT.as_secs()
                )),
            }
            let _ = found.send(Some(pinned));
        });
        resolution
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
        /// The policy, resolving names with `resolver`.
        pub(crate) fn resolving_with(mut self, resolver: Resolver) -> Self {
            self.resolver = Some(resolver);
            self
        }

        /// Pins `name`'s addresses as its first resolution would.
        pub(crate) fn pin(&self, name: &str, addresses: Vec<IpAddr>) {
            let (_, resolution) = watch::channel(Some(addresses));
            self.names
                .get(name)
                .expect("a granted name")
                .resolution
                .set(resolution)
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
