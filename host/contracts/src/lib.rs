//! Contracts of the HCP host: the capability manifest, the HCP messages, the
//! JSON Schemas they are checked against, and JCS (RFC 8785) hashing.
//!
//! This crate is pure logic. It must never depend on wasmtime, HTTP, SQLite
//! or a serial port; the only files it reads are those it is asked to load
//! (a manifest and the component it names), and it writes none.
#![deny(missing_docs)]

pub mod answer;
pub mod credential;
pub mod duration;
pub mod interfaces;
pub mod jcs;
pub mod levels;
pub mod manifest;
pub mod message;
mod op;
pub mod problem;
pub mod reason;
pub mod schema;
pub mod timestamp;

pub use duration::IsoDuration;
pub use levels::{DataClass, RiskLevel};
pub use manifest::{LoadOptions, Manifest, ManifestError};
pub use problem::Problem;
pub use reason::ReasonCode;
