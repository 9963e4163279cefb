//! Outbound network: exactly the destinations `grants.network` names.
//!
//! The host resolves a granted name itself, the first time the task needs
//! it, and pins the addresses for the rest of the task; a name that resolves to a loopback, private,
//! link-local or otherwise non-public address is dropped unless its grant
//! says `allow_private` (no DNS rebinding onto the host's own network). Every
//! choke point asks the same [`NetPolicy`]:
//!
//! - `socket_addr_check` (TCP connect; only the ephemeral bind of a client
//!   connect; never listen, accept or UDP),
//! - `wasi:sockets/ip-name-lookup` (only granted names resolve),
//! - `wasi:http` outgoing requests (only granted host:port, connected to the
//!   pinned addresses, TLS verified against the granted name).
//!
//! # Ambient authority
//!
//! This module opens outbound TCP connections and performs DNS lookups on the
//! guest's behalf, only for granted destinations.

use crate::tasklog::TaskLog;
use hcp_contracts::manifest::{NetGrant, NetHost};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
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
    /// Name lookups under way: stream → (name, addresses handed out).
    lookups: Mutex<HashMap<u32, (String, usize)>>,
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

    /// Whether a TCP connect to `addr` is granted.
    pub(crate) async fn may_connect(&self, addr: SocketAddr) -> bool {
        self.grant_of(addr).await.is_some()
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

    /// A lookup of `name` started as `stream`.
    pub(crate) fn lookup_started(&self, stream: u32, name: String) {
        self.lookups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(stream, (name, 0));
    }

    /// Whether the lookup `stream` may hand `ip` to the guest: public, or
    /// the grant of its name allows private addresses (the rule a connect
    /// to a granted name follows). Counts what it hands out; notes what it
    /// drops.
    pub(crate) fn lookup_admits(&self, stream: u32, ip: IpAddr) -> bool {
        let mut lookups = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        let Some((name, given)) = lookups.get_mut(&stream) else {
            return false;
        };
        let allow_private = self
            .names
            .get(&normalize_name(name))
            .is_some_and(|g| g.allow_private);
        if allow_private || is_public(ip) {
            *given += 1;
            true
        } else {
            let note = format!(
                "name lookup of {:?}: non-public {ip} dropped (the grant does not allow_private)",
                crate::tasklog::escape_controls(name)
            );
            drop(lookups);
            self.note(&note);
            false
        }
    }

    /// The lookup `stream` has no more addresses (it is forgotten): its
    /// name when it handed out none (the lookup failed), `None` otherwise.
    pub(crate) fn lookup_ended(&self, stream: u32) -> Option<String> {
        let mut lookups = self.lookups.lock().unwrap_or_else(|e| e.into_inner());
        match lookups.remove(&stream) {
            Some((name, 0)) => Some(name),
            _ => None,
        }
    }

    /// The guest dropped the lookup `stream`.
    pub(crate) fn lookup_dropped(&self, stream: u32) {
        self.lookups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&stream);
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

fn normalize_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// IPv4-mapped IPv6 addresses are compared as the IPv4 address they carry.
fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

/// Whether `ip` is a globally routable unicast address.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local
        || (s[0] & 0xffc0) == 0xfe80 // link local
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x0064 && s[1] == 0xff9b)) // NAT64 can reach private v4
}

pub(crate) mod http;
pub(crate) mod lookup;
pub(crate) mod sockets;

pub(crate) use sockets::socket_check;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_private_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(!is_public(private.parse().expect("ip")), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().expect("ip")), "{public}");
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
