//! `tools/list`: for one caller, exactly the installed capabilities the
//! policy lets it invoke (`callers.json` lists it for them), each as the
//! installed manifest declares it.
//!
//! - `name`: the capability's name; `title`: its name and version;
//!   `description`: its declaration's, with how the task's own fields
//!   travel (request `_meta`, see [`super::McpServer`]'s instructions);
//! - `inputSchema`, `outputSchema`: its `input_schema` and `output_schema`
//!   as installed (a tool changes only through an install: the manifest
//!   read is the one the install recorded, checked against the registry's
//!   component digest, which `_meta` carries);
//! - annotations from the declaration: read-only for a capability that
//!   cannot be assessed above R1 and has no grant that writes (a
//!   read-write directory, an instrument, a device); destructive for one
//!   that involves physical resources; open-world for one with network
//!   grants.

use crate::engine::Host;
use crate::store::Installed;
use anyhow::Result;
use hcp_contracts::RiskLevel;
use hcp_contracts::manifest::{Access, Manifest};
use hcp_policy::Caller;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tools `caller` may call, by name.
pub(super) fn list(host: &Host, caller: &Caller) -> Result<Vec<Tool>> {
    let installed = host.store.installed()?;
    let mut tools = Vec::new();
    let mut names: Vec<&str> = installed.iter().map(|i| i.name.as_str()).collect();
    names.dedup();
    for name in names {
        if !caller.lists(name) {
            continue;
        }
        // The newest version: what a call without hcp/capability_version
        // gets from the gate.
        let Some(latest) = installed.iter().rfind(|i| i.name == name) else {
            continue;
        };
        match host.manifest(latest) {
            Ok(manifest) => tools.push(tool(latest, &manifest)),
            // One damaged install hides only itself (the log says why).
            Err(e) => tracing::warn!("{}: not listed as an MCP tool: {e:#}", latest.id()),
        }
    }
    Ok(tools)
}

/// The tool of one installed capability.
pub(super) fn tool(installed: &Installed, manifest: &Manifest) -> Tool {
    let decl = &manifest.doc.capability;
    let description = format!(
        "{}\n\nAn HCP task: admitted by the host's gate (risk ceiling {}{}), recorded as signed \
         receipts. Optional request _meta: hcp/intent (the task's goal, in words), hcp/constraints \
         (data_classification T1-T4, max_duration ISO 8601, ...), hcp/capability_version (a \
         semver range), hcp/message_id (idempotency).",
        decl.description,
        decl.safety.risk_ceiling,
        if decl.safety.requires_human_approval {
            "; an operator approves it at R3 and above"
        } else {
            ""
        },
    );
    let mut tool = Tool::new(
        decl.name.clone(),
        description,
        schema_object(&decl.input_schema),
    )
    .with_title(format!("{} {}", decl.name, decl.version))
    .with_annotations(annotations(manifest));
    tool.output_schema = Some(schema_object(&decl.output_schema));
    let mut meta = rmcp::model::MetaObject::default();
    meta.insert("hcp/version".to_owned(), json!(decl.version));
    meta.insert("hcp/component_digest".to_owned(), json!(installed.digest));
    tool.with_meta(meta)
}

/// A schema as MCP carries it: a JSON object (a schema that is `true`
/// or not an object, never installed by the host's manifest check, is
/// the empty schema).
fn schema_object(schema: &Value) -> Arc<JsonObject> {
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// The hints of a capability's declaration and grants.
fn annotations(manifest: &Manifest) -> ToolAnnotations {
    let safety = &manifest.doc.capability.safety;
    let grants = &manifest.grants;
    let writes = grants
        .filesystem
        .iter()
        .any(|g| g.access == Access::ReadWrite)
        || !grants.instruments.is_empty()
        || !grants.devices.is_empty();
    let read_only =
        safety.risk_ceiling == RiskLevel::R1 && !safety.involves_physical_resources && !writes;
    let mut annotations = ToolAnnotations::with_title(&manifest.doc.capability.name)
        .read_only(read_only)
        .destructive(safety.involves_physical_resources)
        .open_world(!grants.network.is_empty());
    // Two calls never make one task: each is its own, unless the caller
    // gives both the same hcp/message_id.
    annotations.idempotent_hint = Some(false);
    annotations
}
