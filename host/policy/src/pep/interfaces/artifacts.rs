//! The PEP's rules of `hcp:capability/artifacts`: every capability may
//! create artifacts, each with a safe name and a media type, as many and
//! as large as `limits.artifacts`, `budgets.artifacts` and
//! `limits.artifact_bytes` allow.

use super::InterfaceRules;
use crate::pep::call::{Args, Call, Op};
use crate::pep::decide::{
    Counters, Decision, args_invalid, exceeded, is_media_type, is_safe_name, malformed,
};
use crate::pep::scope::Scope;

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
}
