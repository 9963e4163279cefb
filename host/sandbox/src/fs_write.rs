//! Bytes a task writes through `wasi:filesystem` count against its byte
//! budget: every `write`, every write to an output stream of a file
//! (`write-via-stream`, `append-via-stream`), and the growth of a file by
//! `set-size` pass the PEP as `fs.write` before they reach the file.
//!
//! So that a task writing a large file in small pieces does not make a
//! host call (and a receipt) per piece, the meter asks the PEP for at least
//! [`QUANTUM`] bytes at a time and spends the allowance on the following
//! writes. When the budget cannot cover a whole quantum, that request is
//! denied (and recorded), and the meter asks for exactly what each write
//! needs from then on; a write the budget cannot cover fails with the WASI
//! error `quota` (`EDQUOT`), with a `BUDGET_EXCEEDED` receipt. At most one
//! quantum of allowance is charged and left unwritten.

use crate::pep::{Call, Denial, Pep};
use crate::tasklog::TaskLog;
use std::sync::{Arc, Mutex};
use wasmtime_wasi_io::bytes::Bytes;
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{DynOutputStream, OutputStream, StreamError, StreamResult};

/// The smallest allowance asked of the PEP at a time.
pub(crate) const QUANTUM: u64 = 1 << 20;

/// The write allowance of one task.
pub(crate) struct WriteMeter {
    pep: Pep,
    log: TaskLog,
    state: Mutex<MeterState>,
}

#[derive(Default)]
struct MeterState {
    /// Allowed by the PEP, not yet written.
    allowance: u64,
    /// A quantum was refused: ask for exact amounts.
    exact: bool,
    /// `denied:<reason>` risk events not yet collected.
    events: Vec<String>,
}

impl WriteMeter {
    pub(crate) fn new(pep: Pep, log: TaskLog) -> Arc<Self> {
        Arc::new(Self {
            pep,
            log,
            state: Mutex::new(MeterState::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MeterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits `bytes` about to be written into the file at the guest path
    /// `target`, or says why not.
    pub(crate) fn charge(&self, target: &str, bytes: u64) -> Result<(), Denial> {
        if !self.pep.is_on() || bytes == 0 {
            return Ok(());
        }
        let mut st = self.lock();
        if bytes <= st.allowance {
            st.allowance -= bytes;
            return Ok(());
        }
        let need = bytes - st.allowance;
        if !st.exact && need < QUANTUM {
            match self.pep.check(&Call::fs_write(target.to_owned(), QUANTUM)) {
                Ok(_) => {
                    st.allowance = st.allowance + QUANTUM - bytes;
                    return Ok(());
                }
                Err(_) => st.exact = true,
            }
        }
        match self.pep.check(&Call::fs_write(target.to_owned(), need)) {
            Ok(_) => {
                st.allowance = 0;
                Ok(())
            }
            Err(denial) => {
                self.log.host_note(&format!(
                    "denied ({}): {}",
                    denial.reason,
                    crate::tasklog::escape_controls(&denial.message)
                ));
                st.events.push(format!("denied:{}", denial.reason));
                Err(denial)
            }
        }
    }

    /// The risk events of the writes denied so far (taken once).
    pub(crate) fn take_events(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().events)
    }
}

/// A stream write over budget; the governed `filesystem-error-code` turns
/// it into `quota` for the guest.
#[derive(Debug, thiserror::Error)]
#[error("the task's byte budget does not cover this write")]
pub(crate) struct OverBudget;

/// An output stream of a file whose writes pass the meter first.
pub(crate) struct MeteredStream {
    inner: DynOutputStream,
    meter: Arc<WriteMeter>,
    target: String,
}

impl MeteredStream {
    pub(crate) fn wrap(inner: DynOutputStream, meter: Arc<WriteMeter>, target: String) -> Self {
        Self {
            inner,
            meter,
            target,
        }
    }
}

#[wasmtime_wasi_io::async_trait]
impl Pollable for MeteredStream {
    async fn ready(&mut self) {
        self.inner.ready().await;
    }
}

#[wasmtime_wasi_io::async_trait]
impl OutputStream for MeteredStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.meter
            .charge(&self.target, bytes.len() as u64)
            .map_err(|_| StreamError::LastOperationFailed(OverBudget.into()))?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await;
    }
}
