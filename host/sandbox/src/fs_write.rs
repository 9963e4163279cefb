//! Bytes a task writes through `wasi:filesystem` count against its byte
//! budget: every `write`, every write to an output stream of a file
//! (`write-via-stream`, `append-via-stream`), and the growth of a file by
//! `set-size` pass the PEP as `fs.write` before they reach the file.
//!
//! So that a task writing a large file in small pieces does not make a
//! host call (and a receipt) per piece, the meter asks the PEP for a
//! quantum of bytes at a time ([`QUANTUM`] at first) and spends the
//! allowance on the following writes. When the budget cannot cover a whole
//! quantum, that request is denied (and recorded) and the quantum is
//! halved, down to what a write needs, when the meter asks for exactly
//! that: near the end of the budget a writer makes a few requests per
//! halving, never one per piece. A write the budget cannot cover fails with
//! the WASI error `quota` (`EDQUOT`), with a `BUDGET_EXCEEDED` receipt. At
//! most one quantum of allowance is charged and left unwritten.

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
    /// What the meter asks for at a time (halved each time the budget
    /// cannot cover it; 0 until the first request: [`QUANTUM`]).
    quantum: u64,
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
        if st.quantum == 0 {
            st.quantum = QUANTUM;
        }
        while need < st.quantum {
            match self
                .pep
                .check(&Call::fs_write(target.to_owned(), st.quantum))
            {
                Ok(_) => {
                    st.allowance = st.allowance + st.quantum - bytes;
                    return Ok(());
                }
                // The budget cannot cover a quantum: ask for half as much.
                Err(d) if d.reason == hcp_receipts::reason::BUDGET_EXCEEDED => st.quantum /= 2,
                Err(denial) => return Err(self.denied(&mut st, denial)),
            }
        }
        match self.pep.check(&Call::fs_write(target.to_owned(), need)) {
            Ok(_) => {
                st.allowance = 0;
                Ok(())
            }
            Err(denial) => Err(self.denied(&mut st, denial)),
        }
    }

    /// Notes a denied write in the task log and its risk events.
    fn denied(&self, st: &mut MeterState, denial: Denial) -> Denial {
        self.log.host_note(&format!(
            "denied ({}): {}",
            denial.reason,
            crate::tasklog::escape_controls(&denial.message)
        ));
        st.events.push(format!("denied:{}", denial.reason));
        denial
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pep::{BudgetCaps, MemorySink, PolicyGovernor, Standalone, UNLIMITED};
    use hcp_contracts::manifest::Manifest;

    /// A real manifest granting `<tmp>/out` read-write at `/out`.
    fn manifest(tmp: &std::path::Path) -> Manifest {
        std::fs::create_dir(tmp.join("out")).expect("mkdir");
        std::fs::write(tmp.join("c.wasm"), b"\0asm").expect("component");
        let doc = serde_json::json!({
            "capability": {
                "name": "writer", "version": "1.0.0", "description": "test capability writer",
                "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
                "safety": {"risk_ceiling": "R1", "requires_human_approval": false,
                           "involves_physical_resources": false},
                "constraints": {"max_duration": "PT30S", "concurrent_limit": 1}
            },
            "component": {"path": "c.wasm", "world": "hcp:capability/capability@1.0.0"},
            "grants": {"filesystem": [
                {"path": "${manifest_dir}/out", "guest_path": "/out", "access": "read-write"}
            ]}
        });
        let path = tmp.join("manifest.json");
        std::fs::write(&path, doc.to_string()).expect("manifest");
        hcp_contracts::manifest::load(&path, Default::default()).expect("loads")
    }

    /// A meter under a real governor allowing `bytes` bytes.
    fn meter(bytes: u64) -> (tempfile::TempDir, Arc<WriteMeter>, Arc<MemorySink>, TaskLog) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let manifest = manifest(&tmp.path().canonicalize().expect("canonical"));
        let facts = Standalone {
            task_id: "task-1",
            session_id: "session-1",
            caller: "tester",
            risk_level: hcp_contracts::RiskLevel::R1,
            data_classification: hcp_contracts::DataClass::T1,
            envelope: &Default::default(),
            expires_at_ms: crate::pep::now_ms() + 60_000,
            budgets: BudgetCaps {
                artifacts: UNLIMITED,
                bytes,
                host_calls: UNLIMITED,
            },
        }
        .facts(&manifest);
        let sink = Arc::new(MemorySink::new());
        let governor = PolicyGovernor::standalone(facts, sink.clone()).expect("governor");
        let log = TaskLog::new(1 << 16);
        let meter = WriteMeter::new(Pep::new(Some(Arc::new(governor))), log.clone());
        (tmp, meter, sink, log)
    }

    /// `(allowed, bytes)` of each `fs.write` decided.
    fn asked(sink: &MemorySink) -> Vec<(bool, u64)> {
        sink.decided()
            .iter()
            .map(|d| match &d.call.args {
                crate::pep::Args::FsWrite(a) => {
                    (d.verdict == hcp_receipts::Verdict::Allow, a.bytes)
                }
                other => panic!("not fs.write: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn small_writes_spend_a_quantum_halved_near_the_end_of_the_budget() {
        let (_tmp, meter, sink, log) = meter(QUANTUM + 10_000);
        for _ in 0..256 {
            meter
                .charge("/out/f", 4096)
                .expect("within the first quantum");
        }
        assert_eq!(asked(&sink), [(true, QUANTUM)]);
        // The next quantum does not fit: halved until it does (8 KiB of the
        // 10,000 bytes left), then halved to the write's own size.
        meter
            .charge("/out/f", 4096)
            .expect("fits in a smaller quantum");
        meter.charge("/out/f", 4096).expect("spends that quantum");
        let denial = meter.charge("/out/f", 4096).expect_err("over budget");
        assert_eq!(denial.reason, "BUDGET_EXCEEDED");
        assert_eq!(
            denial.message,
            format!(
                "fs.write (4096 bytes): the session may move {} bytes through host calls, {} are used (budgets.bytes)",
                QUANTUM + 10_000,
                QUANTUM + 8192
            )
        );
        assert_eq!(
            asked(&sink),
            [
                (true, QUANTUM),
                (false, QUANTUM),
                (false, QUANTUM / 2),
                (false, QUANTUM / 4),
                (false, QUANTUM / 8),
                (false, QUANTUM / 16),
                (false, QUANTUM / 32),
                (false, QUANTUM / 64),
                (true, 8192),
                (false, 8192),
                (false, 4096)
            ]
        );
        assert_eq!(meter.take_events(), ["denied:BUDGET_EXCEEDED"]);
        assert!(meter.take_events().is_empty());
        let notes: Vec<String> = log
            .finish()
            .entries
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert_eq!(
            notes,
            [format!("denied (BUDGET_EXCEEDED): {}", denial.message)]
        );
    }

    #[test]
    fn a_large_write_is_asked_for_exactly_and_outside_a_grant_is_refused() {
        let (_tmp, meter, sink, _log) = meter(8 * QUANTUM);
        meter.charge("/out/f", 3 * QUANTUM).expect("fits");
        meter.charge("/out/f", 0).expect("nothing to ask");
        assert_eq!(asked(&sink), [(true, 3 * QUANTUM)]);
        // Outside the read-write grants: refused once, not asked again.
        let denial = meter.charge("/elsewhere/f", 10).expect_err("not granted");
        assert_eq!(denial.reason, "DENY_IDENTITY_UNAUTHORIZED");
        assert_eq!(asked(&sink), [(true, 3 * QUANTUM), (false, QUANTUM)]);
        assert_eq!(meter.take_events(), ["denied:DENY_IDENTITY_UNAUTHORIZED"]);
    }
}
