//! What is done with one host call, whatever its interface: a call whose
//! target says it all ([`Call::bare`]), the bytes it charges, the copy that
//! goes into a receipt's decision input ([`Call::into_owned`]) and its
//! canonical form. The call itself (operation, target, arguments) is
//! declared with the arguments of every interface, in `super::interfaces`.
//!
//! A [`Call`] borrows from the host call it describes (no copy on the hot
//! path). Its JSON form is canonical (RFC 8785): every struct declares its
//! fields in key order, so serde_json's compact output is the JCS form (a
//! test checks it against `hcp_contracts::jcs` on random calls), except
//! for arguments with floats (instrument plans), which
//! [`Call::canonical_bytes`] hands to the JCS serializer.
//!
//! The arguments' types, and the constructors of calls that carry them,
//! are their interfaces' (`super::interfaces`): nothing here knows one.

use super::cut::Text;
use super::interfaces::{Args, Call, Empty};
use hcp_contracts::interfaces::Op;
use std::borrow::Cow;

impl<'a> Call<'a> {
    /// A call whose target says it all: `instrument.read`, `net.lookup`,
    /// `net.bind`, `net.listen`, `net.accept`, `net.udp`, `hid.wait` (the
    /// proposal).
    pub fn bare(op: Op, target: impl Into<Text<'a>>) -> Self {
        Self {
            op,
            target: target.into(),
            args: Args::Empty(Empty {}),
        }
    }

    /// Bytes the call moves through the host, for the `bytes` budget:
    /// what its interface charges (log text, artifact and checkpoint
    /// content, bytes written into files, instrument arguments, the
    /// request path, the paths of a filesystem call, ...).
    pub fn bytes(&self) -> u64 {
        self.args.budget_bytes(&self.target)
    }

    /// The same call, owning its text.
    pub fn into_owned(self) -> Call<'static> {
        Call {
            args: self.args.into_static(),
            op: self.op,
            target: Cow::Owned(self.target.into_owned()),
        }
    }

    /// The call's RFC 8785 form; its SHA-256 is a receipt's `args_hash`.
    ///
    /// # Errors
    ///
    /// A non-finite number in an instrument plan.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(128);
        self.write_canonical(&mut out)?;
        Ok(out)
    }

    /// Appends [`Call::canonical_bytes`] to `out` (a buffer used again,
    /// so that a call's form costs no allocation). On an error, `out` may
    /// hold part of it.
    ///
    /// # Errors
    ///
    /// As [`Call::canonical_bytes`].
    pub fn write_canonical(&self, out: &mut Vec<u8>) -> Result<(), String> {
        if self.args.floats() {
            out.extend_from_slice(&hcp_contracts::jcs::canonical_bytes(self)?);
            return Ok(());
        }
        // Strings and integers only, fields in key order: serde_json's
        // compact form is the canonical one.
        serde_json::to_writer(&mut *out, self).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::Op;
    use hcp_contracts::interfaces::INTERFACES;

    /// The PEP's operations are exactly those of the table of interfaces,
    /// each under the WIT interface the table gives it.
    #[test]
    fn operations_are_the_tables() {
        let table: Vec<&str> = INTERFACES
            .iter()
            .flat_map(|i| i.operations.iter().map(|o| o.name))
            .collect();
        let mut ops: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
        let mut sorted = table.clone();
        ops.sort_unstable();
        sorted.sort_unstable();
        assert_eq!(ops, sorted);
        for op in Op::ALL {
            assert!(op.interface().contains(':'), "{op}");
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
        assert_eq!(Op::NetUdp.interface(), "wasi:sockets/udp");
        assert_eq!(Op::HttpRequest.interface(), "wasi:http/outgoing-handler");
    }
}
