//! The HCP host: the `hcp` command line, the task lifecycle and the store.
//!
//! This crate wires the pure crates (`hcp-contracts`) to the sandbox and to
//! durable state; it is the only one that touches the data directory.
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
pub mod evidence;
pub mod hid;
pub mod hostkey;
pub mod install;
mod keyfile;
pub mod lifecycle;
mod private_dir;
pub mod seal;
pub mod serve;
pub mod store;
pub mod token;
mod views;
pub mod withhold;
