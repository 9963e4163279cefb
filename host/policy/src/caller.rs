//! A caller of `callers.json`, as the policy set holds it once checked.

use crate::credential::CredentialHash;
use crate::files::CallerKind;
use crate::ids::{CallerId, CapabilityName};
use hcp_contracts::{DataClass, RiskLevel};
use std::collections::BTreeSet;

/// A caller of `callers.json`, checked.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Identity.
    pub id: CallerId,
    /// For people.
    pub description: Option<String>,
    /// Pipeline, supervised session or operator.
    pub kind: CallerKind,
    /// Capabilities it may invoke (an operator: may approve).
    pub capabilities: BTreeSet<CapabilityName>,
    /// Listed for every installed capability (`all_capabilities`).
    pub all_capabilities: bool,
    /// The broker user whose messages are this caller's (`amqp_user`).
    pub amqp_user: Option<String>,
    /// The queues this caller's AMQP answers may go to (`amqp_reply_to`,
    /// anchored at both ends); `None`: `<amqp_user>.` and anything after.
    pub amqp_reply_to: Option<regex::Regex>,
    /// May be used over MCP's stdio transport (`mcp_stdio`).
    pub mcp_stdio: bool,
    /// Highest risk level.
    pub max_risk_level: RiskLevel,
    /// Highest data classification.
    pub max_data_classification: DataClass,
    pub(crate) credential: CredentialHash,
}

impl Caller {
    /// Whether the caller is listed for `capability`.
    pub fn lists(&self, capability: &str) -> bool {
        self.all_capabilities || self.capabilities.iter().any(|c| c.as_str() == capability)
    }

    /// Whether the caller approves tasks.
    pub fn is_operator(&self) -> bool {
        self.kind == CallerKind::Operator
    }
}
