//! `hcp:capability/artifacts`: named artifacts a task creates, stored by
//! the host's [`crate::TaskStore`] once the PEP allows them.

use super::context::HcpCtx;
use crate::bindings::hcp::capability::artifacts;
use crate::bindings::hcp::capability::types::HostError;
use crate::pep::Call;

impl artifacts::Host for HcpCtx {
    async fn create(
        &mut self,
        name: String,
        mime_type: String,
        content: Vec<u8>,
    ) -> wasmtime::Result<Result<String, HostError>> {
        self.host_calls += 1;
        if let Err(e) = self.govern(&Call::artifact(&name, &mime_type, content.len() as u64)) {
            return Ok(Err(e));
        }
        if self.artifacts.iter().any(|a| a.name == name) {
            return Ok(Err(HostError::InvalidArgument(format!(
                "artifact {name} already exists in this task"
            ))));
        }
        let size = content.len() as u64;
        match self
            .store
            .put_artifact(&self.meta, &name, &mime_type, &content)
        {
            Ok(stored) => {
                let uri = stored.uri.clone();
                self.artifact_bytes += size;
                self.artifacts.push(stored);
                Ok(Ok(uri))
            }
            Err(e) => Ok(Err(HostError::Unavailable(format!(
                "artifact {name} could not be stored: {e}"
            )))),
        }
    }
}

/// The sandbox unit of `hcp:capability/artifacts`: every capability has it.
pub(crate) const UNIT: super::unit::Unit<crate::task::TaskState> = super::unit::Unit {
    interface: "hcp:capability/artifacts",
    audit: super::unit::always,
    link: |l, _, _| {
        crate::bindings::hcp::capability::artifacts::add_to_linker::<
            crate::task::TaskState,
            super::context::HcpData,
        >(l, |s| &mut s.hcp)
    },
};
