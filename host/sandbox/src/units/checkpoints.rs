//! `hcp:capability/checkpoints`: a task saves labelled state and loads its
//! own, or that of the checkpoint it resumes from.

use super::context::HcpCtx;
use crate::bindings::hcp::capability::checkpoints;
use crate::bindings::hcp::capability::types::HostError;
use crate::pep::Call;

impl checkpoints::Host for HcpCtx {
    async fn save(
        &mut self,
        label: String,
        state: Vec<u8>,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::checkpoint_save(&label, state.len() as u64)) {
            return Ok(Err(e));
        }
        let id = format!("ckpt-{:03}", self.checkpoints.len() + 1);
        match self.store.save_checkpoint(&self.meta, &id, &label, &state) {
            Ok(()) => {
                self.checkpoints.push(id.clone());
                Ok(Ok(id))
            }
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "checkpoint {label} could not be saved: {e}"
            )))),
        }
    }

    async fn load(&mut self, id: String) -> wasmtime::Result<Result<Vec<u8>, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::checkpoint_load(&id)) {
            return Ok(Err(e));
        }
        let session = if self.checkpoints.contains(&id) {
            self.meta.session_id.clone()
        } else if let Some(resume) = self.meta.resume.as_ref().filter(|r| r.checkpoint == id) {
            resume.session_id.clone()
        } else {
            return Ok(Err(HostError::InvalidArgument(format!(
                "no checkpoint {:?} in this task or the one it resumes",
                crate::tasklog::escape_controls(&id)
            ))));
        };
        match self.store.load_checkpoint(&session, &id) {
            Ok(Some(state)) => Ok(Ok(state)),
            Ok(None) => Ok(Err(HostError::InvalidArgument(format!(
                "checkpoint {id} of session {session} does not exist"
            )))),
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "checkpoint {id} could not be loaded: {e}"
            )))),
        }
    }
}

/// The sandbox unit of `hcp:capability/checkpoints`: every capability has it.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/checkpoints",
    audit: super::unit::always,
    link: |l, _, _| {
        crate::bindings::hcp::capability::checkpoints::add_to_linker::<
            crate::task::TaskState,
            super::context::HcpData,
        >(l, |s| &mut s.hcp)
    },
};
