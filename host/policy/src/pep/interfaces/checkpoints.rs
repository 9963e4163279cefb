//! The PEP's rules of `hcp:capability/checkpoints`: every capability may
//! save and load checkpoints, with safe labels and ids, as many as
//! `limits.checkpoints` and each within `limits.checkpoint_bytes`.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{Counters, Decision, args_invalid, exceeded, is_safe_name, malformed};
use crate::pep::scope::Scope;

/// `checkpoints.save`, `checkpoints.load`.
#[derive(Debug)]
pub(crate) struct Checkpoints;

impl InterfaceRules for Checkpoints {
    fn surface(&self, _: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        match (call.op, &call.args) {
            (Op::CheckpointSave, Args::CheckpointSave(_))
            | (Op::CheckpointLoad, Args::CheckpointLoad(_)) => Ok(()),
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        let shown = |s: &str| s.escape_debug().to_string();
        match &call.args {
            Args::CheckpointSave(a) if !is_safe_name(&a.label, 64) => args_invalid(format!(
                "checkpoint label \"{}\" must be 1-64 characters from [A-Za-z0-9._-], not starting with '.'",
                shown(&a.label)
            )),
            Args::CheckpointLoad(a) if !is_safe_name(&a.id, 128) => args_invalid(format!(
                "checkpoint id \"{}\" must be 1-128 characters from [A-Za-z0-9._-]",
                shown(&a.id)
            )),
            _ => Ok(()),
        }
    }

    fn limits(&self, scope: &Scope, c: &Counters, call: &Call<'_>) -> Result<(), Decision> {
        let l = &scope.facts.limits;
        let Args::CheckpointSave(a) = &call.args else {
            return Ok(());
        };
        if c.checkpoints >= l.checkpoints {
            return exceeded(format!(
                "checkpoint {}: the task may save {} checkpoints (limits.checkpoints)",
                a.label, l.checkpoints
            ));
        }
        if a.bytes > l.checkpoint_bytes {
            return exceeded(format!(
                "checkpoint {}: {} bytes is over limits.checkpoint_bytes ({})",
                a.label, a.bytes, l.checkpoint_bytes
            ));
        }
        Ok(())
    }
}
