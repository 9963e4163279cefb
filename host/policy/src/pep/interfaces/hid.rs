//! The PEP's rules of `hcp:capability/hid`: only with `grants.devices:
//! hid`; a proposal's action type must be one of seed 004's.

use super::{Args, Call, InterfaceRules, OwnArgs, de, flagged_text, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::scan_json;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Decision, args_invalid, not_found};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `hid.propose`: seed 004's action and the guest's rationale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HidArgs<'a> {
    /// `TYPE_TEXT`, `KEY_COMBO`, `MOUSE_MOVE` or `MOUSE_CLICK`.
    pub action_type: Text<'a>,
    /// The action's `payload` (JSON text).
    pub payload: Text<'a>,
    /// The id the proposal will have: the operator's decision and the
    /// execution name it, and their receipts follow from this call's.
    pub proposal: Text<'a>,
    /// Why the guest proposes it (shown to the operator).
    pub rationale: Text<'a>,
}

impl<'a> Call<'a> {
    /// `hid.propose` of `action_type` with `payload` (JSON text), to become
    /// proposal `proposal`.
    pub fn hid_propose(
        action_type: &'a str,
        payload: &'a str,
        proposal: &'a str,
        rationale: &'a str,
    ) -> Self {
        Self {
            op: Op::HidPropose,
            target: Text::Borrowed("hid"),
            args: Args::Hid(HidArgs {
                action_type: t(action_type),
                payload: t(payload),
                proposal: t(proposal),
                rationale: t(rationale),
            }),
        }
    }
}

impl OwnArgs for HidArgs<'_> {
    type Static = HidArgs<'static>;

    fn into_static(self) -> HidArgs<'static> {
        let o = |t: Text<'_>| -> Text<'static> { Cow::Owned(t.into_owned()) };
        HidArgs {
            action_type: o(self.action_type),
            payload: o(self.payload),
            proposal: o(self.proposal),
            rationale: o(self.rationale),
        }
    }

    /// The payload and the rationale.
    fn budget_bytes(&self, _target: &str) -> u64 {
        (self.payload.len() + self.rationale.len()) as u64
    }

    fn text_len(&self) -> usize {
        self.action_type.len() + self.payload.len() + self.proposal.len() + self.rationale.len()
    }

    /// The action type and the proposal before the target; the payload
    /// and the rationale after it.
    fn cut(&self, c: &mut Cutter) -> HidArgs<'static> {
        let action_type = c.cut(&self.action_type);
        let proposal = c.cut(&self.proposal);
        HidArgs {
            action_type,
            payload: Cow::Owned(String::new()),
            proposal,
            rationale: Cow::Owned(String::new()),
        }
    }

    fn cut_bulk(&self, kept: &mut HidArgs<'static>, c: &mut Cutter) {
        kept.payload = c.cut(&self.payload);
        kept.rationale = c.cut(&self.rationale);
    }

    /// Typed text reaches the operator's screen and a model may read the
    /// rationale: text, not a command. The payload is JSON text: its
    /// strings are scanned as decoded (an escape character is `\u001b` in
    /// the JSON).
    fn scan(&self, s: &Scan, signals: &mut Signals) {
        match serde_json::from_str::<serde_json::Value>(&self.payload) {
            Ok(v) => scan_json(s, &v, Exposure::TEXT, signals),
            Err(_) => s.scan(&self.payload, Exposure::TEXT, signals),
        }
        s.scan(&self.rationale, Exposure::TEXT, signals);
    }

    fn flagged(&self) -> bool {
        flagged_text(&self.payload)
            || flagged_text(&self.rationale)
            || serde_json::from_str::<serde_json::Value>(&self.payload)
                .is_ok_and(|v| hcp_contracts::credential::json_flagged(&v))
    }

    /// The payload is withheld whole when any of its strings is flagged,
    /// as the HID session log withholds the text.
    fn json_text(&self) -> Option<(&'static str, &str)> {
        Some(("payload", &self.payload))
    }

    fn kept(&self, pointer: &str) -> bool {
        matches!(pointer, "/action_type" | "/proposal")
    }
}

/// `hid.propose`, `hid.wait`.
#[derive(Debug)]
pub(crate) struct Hid;

impl InterfaceRules for Hid {
    fn surface(&self, scope: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        match (call.op, &call.args) {
            (Op::HidPropose, Args::Hid(_)) | (Op::HidWait, Args::Empty(_)) => {
                if scope.facts.surface.devices.iter().any(|d| d == "hid") {
                    Ok(())
                } else {
                    not_found(format!(
                        "{}: the hid device is not granted to {}",
                        call.op, scope.facts.capability
                    ))
                }
            }
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        match &call.args {
            Args::Hid(a)
                if !matches!(
                    &*a.action_type,
                    "TYPE_TEXT" | "KEY_COMBO" | "MOUSE_MOVE" | "MOUSE_CLICK"
                ) =>
            {
                args_invalid(format!(
                    "HID action type \"{}\" is unknown",
                    a.action_type.escape_debug()
                ))
            }
            _ => Ok(()),
        }
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(match op {
            Op::HidPropose => Args::Hid(de(op, raw)?),
            _ => Args::Empty(de(op, raw)?),
        })
    }
}
