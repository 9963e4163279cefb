//! `callers.json`: who may submit tasks, with what credential, for which
//! capabilities, up to which risk level and data classification.

use crate::credential::CredentialHash;
use crate::ids::{CallerId, CapabilityName};
use hcp_contracts::{DataClass, RiskLevel};
use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallersFile {
    /// Optional pointer to the schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Every caller; ids are unique.
    pub callers: Vec<CallerDoc>,
}

/// One caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerDoc {
    /// The identity `task_submit.caller_id` names.
    pub id: CallerId,
    /// Who or what this is, for people reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What kind of caller.
    pub kind: CallerKind,
    /// `sha256:<hex>` of the caller's bearer token.
    pub credential: CredentialHash,
    /// Capabilities it may invoke (operators: may approve).
    pub capabilities: Vec<CapabilityName>,
    /// Every installed capability, whatever `capabilities` lists (for a
    /// developer's own host, as `hcp init` writes it). Off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_capabilities: bool,
    /// The broker user (RabbitMQ's authenticated `user-id`) whose messages
    /// are this caller's over AMQP. A caller without one cannot submit
    /// over AMQP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amqp_user: Option<String>,
    /// The queues the host may answer this caller's AMQP messages on (their
    /// `reply_to`): a regular expression the whole queue name must match.
    /// Without it, `<amqp_user>.` followed by anything. Never a queue whose
    /// name starts with `hcp.` (the host's own); `amq.rabbitmq.reply-to`
    /// (direct reply-to) is always allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amqp_reply_to: Option<String>,
    /// The caller may be used over MCP's stdio transport (`hcp mcp --as
    /// <caller>`): an agent that starts the host as its subprocess acts
    /// with the data directory's authority, so an operator says which
    /// callers it may act as. Off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mcp_stdio: bool,
    /// Highest risk level it may be admitted at.
    pub max_risk_level: RiskLevel,
    /// Highest data classification it may submit.
    pub max_data_classification: DataClass,
}

/// The kinds of callers of seed 000's permission audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallerKind {
    /// A program with nobody watching (the seed: R1–R2).
    AutomatedPipeline,
    /// A harness with a human supervising (the seed: up to R4).
    SupervisedSession,
    /// A person who approves tasks; may also submit them.
    Operator,
}

impl CallerKind {
    /// The name in `callers.json` and in Cedar (`Hcp::Kind::"operator"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AutomatedPipeline => "automated_pipeline",
            Self::SupervisedSession => "supervised_session",
            Self::Operator => "operator",
        }
    }
}
