//! The PEP's rules of `hcp:capability/checkpoints`: every capability may
//! save and load checkpoints, with safe labels and ids, as many as
//! `limits.checkpoints` and each within `limits.checkpoint_bytes`.

use super::{Args, Call, InterfaceRules, OwnArgs, de, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{Counters, Decision, args_invalid, exceeded, is_safe_name};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `checkpoints.save`: the state itself is not recorded, only its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointSaveArgs<'a> {
    /// State size.
    pub bytes: u64,
    /// The label.
    pub label: Text<'a>,
}

/// `checkpoints.load`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointLoadArgs<'a> {
    /// The checkpoint id.
    pub id: Text<'a>,
}

impl<'a> Call<'a> {
    /// `checkpoints.save`.
    pub fn checkpoint_save(label: &'a str, bytes: u64) -> Self {
        Self {
            op: Op::CheckpointSave,
            target: Text::Borrowed(""),
            args: Args::CheckpointSave(CheckpointSaveArgs {
                bytes,
                label: t(label),
            }),
        }
    }

    /// `checkpoints.load`.
    pub fn checkpoint_load(id: &'a str) -> Self {
        Self {
            op: Op::CheckpointLoad,
            target: Text::Borrowed(""),
            args: Args::CheckpointLoad(CheckpointLoadArgs { id: t(id) }),
        }
    }
}

impl OwnArgs for CheckpointSaveArgs<'_> {
    type Static = CheckpointSaveArgs<'static>;

    fn into_static(self) -> CheckpointSaveArgs<'static> {
        CheckpointSaveArgs {
            bytes: self.bytes,
            label: Cow::Owned(self.label.into_owned()),
        }
    }

    /// The state saved.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.bytes
    }

    fn text_len(&self) -> usize {
        self.label.len()
    }

    fn cut(&self, c: &mut Cutter) -> CheckpointSaveArgs<'static> {
        CheckpointSaveArgs {
            bytes: self.bytes,
            label: c.cut(&self.label),
        }
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.label, Exposure::NAME, signals);
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer == "/label"
    }
}

impl OwnArgs for CheckpointLoadArgs<'_> {
    type Static = CheckpointLoadArgs<'static>;

    fn into_static(self) -> CheckpointLoadArgs<'static> {
        CheckpointLoadArgs {
            id: Cow::Owned(self.id.into_owned()),
        }
    }

    fn text_len(&self) -> usize {
        self.id.len()
    }

    fn cut(&self, c: &mut Cutter) -> CheckpointLoadArgs<'static> {
        CheckpointLoadArgs {
            id: c.cut(&self.id),
        }
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.id, Exposure::NAME, signals);
    }

    fn kept(&self, pointer: &str) -> bool {
        pointer == "/id"
    }
}

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

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(match op {
            Op::CheckpointSave => Args::CheckpointSave(de(op, raw)?),
            _ => Args::CheckpointLoad(de(op, raw)?),
        })
    }
}
