//! The HCP host: the `hcp` command line.
//!
//! The top layer of the host (store → evidence → engine → serve → cli):
//! the command line drives the engine (`hcp-engine`) and starts the server
//! (`hcp-serve`); below them the store (`hcp-store`) and the receipts
//! (`hcp-evidence`), with this crate the only ones that touch the data
//! directory. Each layer is a crate of its own, re-exported here under the
//! names the host's modules and its tests have always used.
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
