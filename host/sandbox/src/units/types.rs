//! `hcp:capability/types`: the reason codes a denied guest sees, and the
//! receipts' names for them (the receipts' codes become the guest's in
//! [`super::context`], where a denial is made).

use crate::bindings::hcp::capability::types::ReasonCode;

/// The stable name of a reason code, as receipts spell it.
pub fn reason_name(code: ReasonCode) -> &'static str {
    match code {
        ReasonCode::ToolNotFound => "DENY_TOOL_NOT_FOUND",
        ReasonCode::ArgsInvalid => "DENY_ARGS_INVALID",
        ReasonCode::BudgetExceeded => "BUDGET_EXCEEDED",
        ReasonCode::SessionInvalid => "DELEGATION_INVALID",
        ReasonCode::EnvelopeHardLimit => "DENY_ENVELOPE_HARD_LIMIT",
        ReasonCode::ProhibitedAction => "DENY_PROHIBITED_ACTION",
        ReasonCode::ThreatSignalDetected => "THREAT_SIGNAL_DETECTED",
        ReasonCode::IdentityUnauthorized => "DENY_IDENTITY_UNAUTHORIZED",
        ReasonCode::FailClosedError => "FAIL_CLOSED_ERROR",
    }
}

/// The sandbox unit of `hcp:capability/types`: every capability has it.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/types",
    audit: super::unit::always,
    link: |l, _, _| {
        crate::bindings::hcp::capability::types::add_to_linker::<
            crate::task::TaskState,
            super::context::HcpData,
        >(l, |s| &mut s.hcp)
    },
};
