//! The `hcp:capability` host interfaces, one unit per WIT interface and
//! named after it: [`log`], [`artifacts`], [`checkpoints`], [`instrument`],
//! [`hid`] and [`types`] (the reason codes). Each implements its
//! interface's `Host` trait on the task's [`context::HcpCtx`] and asks the
//! PEP through it before doing anything.

pub(crate) mod artifacts;
pub(crate) mod checkpoints;
pub(crate) mod context;
pub(crate) mod hid;
pub(crate) mod instrument;
pub(crate) mod log;
pub(crate) mod types;
