//! The PEP's rules of `hcp:capability/hid`: only with `grants.devices:
//! hid`; a proposal's action type must be one of seed 004's.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Decision, args_invalid, malformed, not_found};
use crate::pep::scope::Scope;

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
}
