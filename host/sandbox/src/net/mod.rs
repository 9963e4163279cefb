//! Outbound network: exactly the destinations `grants.network` names.
//!
//! The host resolves a granted name itself, the first time the task needs
//! it, and pins the addresses for the rest of the task; a name that resolves to a loopback, private,
//! link-local or otherwise non-public address is dropped unless its grant
//! says `allow_private` (no DNS rebinding onto the host's own network). Every
//! choke point asks the same [`NetPolicy`] (`policy.rs`):
//!
//! - `socket_addr_check` (TCP connect; only the ephemeral bind of a client
//!   connect; never listen, accept or UDP),
//! - `wasi:sockets/ip-name-lookup` (only granted names resolve, each to its
//!   pinned addresses: the guest never drives a resolution of its own),
//! - `wasi:http` outgoing requests (only granted host:port, connected to the
//!   pinned addresses, TLS verified against the granted name).
//!
//! and each of them decides a use the same way (`decide.rs`): the PEP, then
//! the grants.
//!
//! # Ambient authority
//!
//! This module opens outbound TCP connections and performs DNS lookups on the
//! guest's behalf, only for granted destinations.

mod addresses;
mod decide;
pub(crate) mod http;
pub(crate) mod lookup;
mod policy;
pub(crate) mod sockets;
pub(crate) mod units;

pub(crate) use policy::NetPolicy;
pub(crate) use sockets::socket_check;
