//! The HCP host: the `hcp` command line, the task lifecycle and the engine.
//!
//! This crate wires the pure crates (`hcp-contracts`) to the sandbox and to
//! durable state: the store (`hcp-store`) and the receipts
//! (`hcp-evidence`), the layers below it and, with it, the only crates
//! that touch the data directory.
#![deny(missing_docs)]

pub mod cli;

// The layers below, each a crate of its own, under the names the host's
// modules and its tests have always used.
pub use hcp_engine as engine;
use hcp_engine::views;
pub use hcp_engine::{compile_child, hid, install, lifecycle, token};
pub use hcp_evidence as evidence;
pub use hcp_evidence::hostkey;
pub use hcp_serve as serve;
pub use hcp_store as store;
pub use hcp_store::{seal, withhold};
