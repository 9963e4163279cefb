//! Rejections and withdrawals: decisions that never touch the device.

use super::witness::{self, Verdict};
use super::{
    HOST_OPERATOR, Inner, MAX_REASON_CHARS, Mediator, MediatorError, Outcome, State, WITHDRAWN,
    decision_event, host_event, lock, pending,
};
use crate::action::{OperatorId, ProposalId};
use crate::log::EventType;
use serde_json::{Map, json};

impl Mediator {
    /// An operator rejects a pending proposal, with a reason.
    ///
    /// # Errors
    ///
    /// [`MediatorError::BadReason`], [`MediatorError::UnknownProposal`],
    /// [`MediatorError::NotPending`], [`MediatorError::Log`].
    pub fn reject(
        &self,
        operator: &OperatorId,
        id: &ProposalId,
        reason: &str,
    ) -> Result<Outcome, MediatorError> {
        let chars = reason.chars().count();
        if chars == 0 || chars > MAX_REASON_CHARS || reason.chars().any(char::is_control) {
            return Err(MediatorError::BadReason);
        }
        let mut inner = lock(&self.inner);
        let mode = inner.mode;
        let record = pending(&mut inner, id)?;
        self.witness_decided(&witness::Decided {
            proposal: id,
            session: &record.proposal.session,
            operator: operator.as_str(),
            verdict: Verdict::Reject,
            reason: Some(reason),
            mode,
            credential_warning: record.proposal.credential_warning,
            credential_acknowledged: false,
        })?;
        let mut details = Map::new();
        details.insert("decision".into(), json!("REJECTED"));
        details.insert("override_reason".into(), json!(reason));
        details.insert("session_id".into(), json!(record.proposal.session));
        self.append(decision_event(mode, &operator, &id, details))?;
        let outcome = Outcome::Rejected {
            operator_id: operator.to_string(),
            reason: reason.to_owned(),
        };
        record.state = State::Done(outcome.clone());
        self.changed.notify_all();
        Ok(outcome)
    }

    /// Ends `session`: its undecided proposals are withdrawn (logged as a
    /// DECISION REJECTED by `host`) and its records forgotten, so nothing
    /// it proposed can be approved after it is gone; a proposal of it that
    /// arrives later is refused ([`MediatorError::SessionEnded`]).
    ///
    /// # Errors
    ///
    /// [`MediatorError::Log`]: a withdrawal could not be logged. The
    /// session's proposals are withdrawn all the same.
    pub fn close_session(&self, session: &str) -> Result<(), MediatorError> {
        let mut inner = lock(&self.inner);
        inner.closed.insert(session);
        let mut failed = None;
        let mode = inner.mode;
        let ids: Vec<ProposalId> = inner
            .order
            .iter()
            .filter(|id| {
                inner
                    .records
                    .get(*id)
                    .is_some_and(|r| r.proposal.session == session)
            })
            .cloned()
            .collect();
        for id in ids {
            let Some(record) = inner.records.get_mut(&id) else {
                continue;
            };
            match record.state {
                State::Executing => continue,
                State::Pending => {
                    // Withdrawn whether or not the witness records it: the
                    // session is gone, its proposals must not stay.
                    let _ = self.witness_decided(&witness::Decided {
                        proposal: &id,
                        session,
                        operator: HOST_OPERATOR,
                        verdict: Verdict::Withdraw,
                        reason: Some(WITHDRAWN),
                        mode,
                        credential_warning: record.proposal.credential_warning,
                        credential_acknowledged: false,
                    });
                    let mut details = Map::new();
                    details.insert("decision".into(), json!("REJECTED"));
                    details.insert("override_reason".into(), json!(WITHDRAWN));
                    details.insert("session_id".into(), json!(session));
                    let mut event = host_event(EventType::Decision, mode, details);
                    event.proposal_id = Some(id.to_string());
                    // Withdrawn whether or not it is logged: the first
                    // failure is returned once all are withdrawn.
                    if let Err(e) = self.append(event) {
                        failed.get_or_insert(e);
                    }
                    record.state = State::Done(Outcome::Rejected {
                        operator_id: HOST_OPERATOR.into(),
                        reason: WITHDRAWN.into(),
                    });
                }
                State::Done(_) => {}
            }
            inner.records.remove(&id);
        }
        let Inner { order, records, .. } = &mut *inner;
        order.retain(|id| records.contains_key(id));
        self.changed.notify_all();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}
