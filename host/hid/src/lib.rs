//! HID mediation for the HCP host: keyboard and mouse actions that guests
//! propose, operators decide on, and the host alone sends to a USB HID
//! executor over a serial line (seed 004, the lab assistant's contracts).
//!
//! This crate must never:
//! - give a guest the serial port, or anything that reaches it: a guest only
//!   proposes ([`mediator::Mediator::propose`]) and waits for the outcome;
//! - execute an action without an operator's approval on record in the
//!   session log, outside EXECUTE mode, twice, or sooner than
//!   [`action::MIN_ACTION_DELAY_MS`] after the previous one;
//! - write a line to the executor that it did not produce by serializing a
//!   checked value (nothing a guest writes becomes a second line);
//! - go on executing after a timeout, an error or garbled answer, a
//!   disconnect, a disabled kill switch or a contract-version mismatch,
//!   until an operator re-arms it.
//!
//! It knows nothing of wasmtime or HTTP: the host wires [`mediator`] to its
//! WIT interface (`wit/hid.wit`) and its operator UI.
#![deny(missing_docs)]

pub mod action;
pub mod device;
pub mod log;
pub mod mediator;
pub mod proposal;
pub mod sim;
pub mod wire;

/// The credential detector, shared with the rest of the host (task inputs,
/// host-call arguments, outputs): one detector, kept in `hcp_contracts`.
pub use hcp_contracts::credential;
