//! The HCP host: the `hcp` command line, the task lifecycle and the engine.
//!
//! This crate wires the pure crates (`hcp-contracts`) to the sandbox and to
//! durable state: the store (`hcp-store`) and the receipts
//! (`hcp-evidence`), the layers below it and, with it, the only crates
//! that touch the data directory.
#![deny(missing_docs)]

/// A phase of a task's path (`name`), as a span that lives until dropped:
/// timed by a subscriber that asks for target `hcp::phase` and level
/// TRACE (the `task_path` bench), free otherwise.
macro_rules! phase {
    ($name:literal) => {
        tracing::trace_span!(target: "hcp::phase", $name)
    };
}

pub mod cli;
pub mod compile_child;
pub mod engine;
pub mod hid;
pub mod install;
pub mod lifecycle;
pub mod serve;
pub mod token;
mod views;

// The layers below, each a crate of its own, under the names the host's
// modules and its tests have always used.
pub use hcp_evidence as evidence;
pub use hcp_evidence::hostkey;
pub use hcp_store as store;
use hcp_store::private_dir;
pub use hcp_store::{seal, withhold};
