//! The PEP's rules of `hcp:capability/artifacts`: every capability may
//! create artifacts, each with a safe name and a media type, as many and
//! as large as `limits.artifacts`, `budgets.artifacts` and
//! `limits.artifact_bytes` allow.

use super::{Args, Call, InterfaceRules, OwnArgs, de, malformed};
use crate::pep::cut::{Cutter, Text, t};
use crate::pep::error::CallError;
use crate::pep::scope::Scope;
use crate::pep::threat::{Exposure, Scan, Signals};
use crate::pep::verdict::{
    Counters, Decision, args_invalid, exceeded, is_media_type, is_safe_name,
};
use hcp_contracts::interfaces::Op;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// `artifacts.create`: the content itself is not recorded, only its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactArgs<'a> {
    /// Content size.
    pub bytes: u64,
    /// Media type.
    pub mime_type: Text<'a>,
    /// Name within the task.
    pub name: Text<'a>,
}

impl<'a> Call<'a> {
    /// `artifacts.create`.
    pub fn artifact(name: &'a str, mime_type: &'a str, bytes: u64) -> Self {
        Self {
            op: Op::ArtifactCreate,
            target: Text::Borrowed(""),
            args: Args::Artifact(ArtifactArgs {
                bytes,
                mime_type: t(mime_type),
                name: t(name),
            }),
        }
    }
}

impl OwnArgs for ArtifactArgs<'_> {
    type Static = ArtifactArgs<'static>;

    fn into_static(self) -> ArtifactArgs<'static> {
        ArtifactArgs {
            bytes: self.bytes,
            mime_type: Cow::Owned(self.mime_type.into_owned()),
            name: Cow::Owned(self.name.into_owned()),
        }
    }

    /// The content.
    fn budget_bytes(&self, _target: &str) -> u64 {
        self.bytes
    }

    fn text_len(&self) -> usize {
        self.name.len() + self.mime_type.len()
    }

    fn cut(&self, c: &mut Cutter) -> ArtifactArgs<'static> {
        ArtifactArgs {
            bytes: self.bytes,
            mime_type: c.cut(&self.mime_type),
            name: c.cut(&self.name),
        }
    }

    fn scan(&self, s: &Scan, signals: &mut Signals) {
        s.scan(&self.name, Exposure::NAME, signals);
        s.scan(&self.mime_type, Exposure::NAME, signals);
    }

    fn kept(&self, pointer: &str) -> bool {
        matches!(pointer, "/name" | "/mime_type")
    }
}

/// `artifacts.create`.
#[derive(Debug)]
pub(crate) struct Artifacts;

impl InterfaceRules for Artifacts {
    fn surface(&self, _: &Scope, call: &Call<'_>) -> Result<(), Decision> {
        match (call.op, &call.args) {
            (Op::ArtifactCreate, Args::Artifact(_)) => Ok(()),
            _ => malformed(call),
        }
    }

    fn arguments(&self, call: &Call<'_>) -> Result<(), Decision> {
        let shown = |s: &str| s.escape_debug().to_string();
        let Args::Artifact(a) = &call.args else {
            return Ok(());
        };
        if !is_safe_name(&a.name, 128) {
            return args_invalid(format!(
                "artifact name \"{}\" must be 1-128 characters from [A-Za-z0-9._-], not starting with '.'",
                shown(&a.name)
            ));
        }
        if !is_media_type(&a.mime_type) {
            return args_invalid(format!(
                "\"{}\" is not a type/subtype media type",
                shown(&a.mime_type)
            ));
        }
        Ok(())
    }

    fn limits(&self, scope: &Scope, c: &Counters, call: &Call<'_>) -> Result<(), Decision> {
        let l = &scope.facts.limits;
        let Args::Artifact(a) = &call.args else {
            return Ok(());
        };
        if c.artifacts >= scope.max_artifacts {
            return exceeded(format!(
                "artifact {}: the task may create {} artifacts (limits.artifacts, budgets.artifacts)",
                a.name, scope.max_artifacts
            ));
        }
        if c.artifact_bytes.saturating_add(a.bytes) > l.artifact_bytes {
            return exceeded(format!(
                "artifact {} ({} bytes): the task's artifacts may hold {} bytes, {} are used (limits.artifact_bytes)",
                a.name, a.bytes, l.artifact_bytes, c.artifact_bytes
            ));
        }
        Ok(())
    }

    fn args(&self, op: Op, raw: serde_json::Value) -> Result<Args<'static>, CallError> {
        Ok(Args::Artifact(de(op, raw)?))
    }
}
