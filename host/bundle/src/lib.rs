//! Signed capability bundles (`.hcpb`).
//!
//! A bundle is one deterministic ustar archive, zstd-compressed when that
//! pays (see [`container`]), holding a capability's manifest (its component
//! digest pinned, `component.path` pointing inside the bundle), the
//! component, the WIT package it targets, read-only data its manifest
//! grants as `${manifest_dir}/<dir>`, and, once signed, the publisher's
//! detached Ed25519 signature (`signature.json`) over the RFC 8785
//! canonical manifest and the digest of every other entry. See [`layout`]
//! for the entries and their limits, [`signature`] for what is signed.
//!
//! - [`Bundle::read`] refuses anything hostile with an exact message: not a
//!   bundle, truncated, a corrupt zstd frame or one that decompresses past
//!   the limits, path traversal, links and other non-regular entries,
//!   PAX/GNU extension headers, oversized entries, duplicate or unexpected
//!   entries, a component that is not the one the manifest pins.
//! - [`pack_dir`] packs a plugin directory; [`Bundle::sign`] signs;
//!   [`Bundle::signature_status`] and [`check_trust`] verify.
//! - [`diff::compare`] says what a new version may do that an installed one
//!   may not; [`receipt`] is the host-signed record of an install;
//!   [`review`] assembles and renders the reviewer's report.
//!
//! # What this crate must never do
//!
//! It is pure logic: it must never depend on wasmtime, HTTP or SQLite. The
//! only files it reads are those [`pack_dir`] is pointed at; it writes
//! none. It never trusts a key by itself: trust is the host's list, passed
//! in. It never prints or stores a private key.
#![deny(missing_docs)]

mod bundle;
pub mod container;
pub mod diff;
mod error;
pub mod layout;
mod pack;
pub mod receipt;
pub mod review;
pub mod signature;
mod tar_io;
pub mod wit;

pub use bundle::Bundle;
pub use container::Container;
pub use error::BundleError;
pub use layout::{Limits, PublisherName};
pub use pack::{WitSource, pack_dir};
pub use receipt::{InstallReceipt, InstallRecord, PublisherRecord};
pub use signature::{SignatureStatus, Signer, TrustError, TrustedKey, check_trust};
