//! The host's metrics, as `hcp serve` shows them on `/metrics`: one
//! registry (`prometheus-client`), in the Prometheus text format
//! (OpenMetrics 1.0, which Prometheus scrapes).
//!
//! It sits in the lowest layer so that every layer counts where the thing
//! happens, through the store it already holds ([`crate::Store::metrics`]):
//! the store counts every move of a task's state ([`crate::Store::task_moved`],
//! which every write of a state calls), the engine every answer of its one
//! submission path, the receipt pipeline every host call the PEP decided
//! (on the deciding thread, as the verdict is handed over) and every batch
//! its writer stored, the AMQP transport every delivery. Those are counters
//! and histograms: atomic increments, no lock held on the task path but the
//! read lock of a family's label map, never across an await.
//!
//! What is a state rather than an event (tasks waiting or running, the
//! approvals waiting and the age of the oldest, slots in use, the size of
//! `hcp.db` and its log, the HID mediator's state) is a gauge, read when
//! scraped ([`Metrics::encode`] with a [`Gauges`] its caller read).
//!
//! Counters count since this process started (Prometheus' `rate` and
//! `increase` take restarts into account); every family's name starts with
//! `hcp_`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A state a task moved to.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// Tasks in a state, of a capability.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    state: &'static str,
    capability: String,
}

/// What the gate answered, and the reason code of a refusal (`""`
/// otherwise).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdmissionLabels {
    decision: &'static str,
    reason_code: &'static str,
}

/// A host call's interface, verdict and reason code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    interface: &'static str,
    verdict: &'static str,
    reason_code: &'static str,
}

/// What happened to an AMQP delivery.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AmqpLabels {
    event: &'static str,
}

/// The HID mediator's mode and execution state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HidLabels {
    mode: String,
    execution: String,
}

/// What an AMQP delivery came to ([`Metrics::amqp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmqpEvent {
    /// A message was delivered to this host.
    Delivered,
    /// It was delivered before, to this or another consumer (the
    /// broker's `redelivered` flag).
    Redelivered,
    /// Its delivery was acknowledged.
    Acked,
    /// It was refused (negatively acknowledged: dead-lettered or given
    /// back).
    Nacked,
}

impl AmqpEvent {
    fn label(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Redelivered => "redelivered",
            Self::Acked => "acked",
            Self::Nacked => "nacked",
        }
    }
}

/// The states read when scraped, by whoever serves `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Tasks not yet answered for good: (state, capability, how many).
    pub tasks: Vec<(&'static str, String, i64)>,
    /// Tasks waiting for an operator's approval.
    pub approvals_waiting: i64,
    /// How long the oldest of them has waited, in seconds (0 when none).
    pub oldest_approval_seconds: f64,
    /// Session slots taken (tasks running).
    pub slots_in_use: i64,
    /// Bytes of `hcp.db` and its write-ahead log.
    pub store_bytes: i64,
    /// The HID mediator's mode and execution state.
    pub hid: Option<(String, String)>,
    /// Archive runs that pruned the hot store (`hcp evidence archive`).
    pub archives: i64,
    /// Tasks they archived and pruned.
    pub archived_tasks: i64,
}

/// The registry and its families.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    task_moves: Family<StateLabel, Counter>,
    admissions: Family<AdmissionLabels, Counter>,
    host_calls: Family<CallLabels, Counter>,
    receipt_batch: Histogram,
    receipt_flush: Histogram,
    amqp: Family<AmqpLabels, Counter>,
    tasks: Family<TaskLabels, Gauge>,
    approvals_waiting: Gauge,
    oldest_approval: Gauge<f64, AtomicU64>,
    slots_in_use: Gauge,
    store_bytes: Gauge,
    hid: Family<HidLabels, Gauge>,
    archives: Gauge,
    archived_tasks: Gauge,
    /// One scrape at a time sets the gauges and encodes them.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family, all at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("hcp");
        let task_moves = Family::<StateLabel, Counter>::default();
        registry.register(
            "task_transitions",
            "Tasks that were recorded in or moved to each state (completed, failed, rejected, \
             queued, running, ...), counted as each write of a task's state is done",
            task_moves.clone(),
        );
        let admissions = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "admission_decisions",
            "Answers of the gate to task_submit messages, by decision (accepted, rejected, \
             waiting, finished, duplicate) and the reason code of a refusal",
            admissions.clone(),
        );
        let host_calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "host_calls",
            "Host calls decided by the PEP, by interface, verdict and reason code",
            host_calls.clone(),
        );
        let receipt_batch = Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0, 1024.0, 4096.0]);
        registry.register(
            "receipt_batch_size",
            "Messages (receipts, sessions, barriers) stored by the receipt writer in one \
             transaction",
            receipt_batch.clone(),
        );
        let receipt_flush = Histogram::new([
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
        ]);
        registry.register_with_unit(
            "receipt_flush",
            "Time the receipt writer took to store one batch (its transaction, commit included)",
            Unit::Seconds,
            receipt_flush.clone(),
        );
        let amqp = Family::<AmqpLabels, Counter>::default();
        registry.register(
            "amqp_deliveries",
            "AMQP deliveries by what came of them: delivered, redelivered (the broker's flag), \
             acked, nacked",
            amqp.clone(),
        );
        let tasks = Family::<TaskLabels, Gauge>::default();
        registry.register(
            "tasks",
            "Tasks not yet answered for good, by state and capability (read when scraped)",
            tasks.clone(),
        );
        let approvals_waiting = Gauge::default();
        registry.register(
            "approvals_waiting",
            "Tasks waiting for an operator's approval",
            approvals_waiting.clone(),
        );
        let oldest_approval = Gauge::<f64, AtomicU64>::default();
        registry.register_with_unit(
            "approval_oldest_age",
            "How long the oldest task waiting for approval has waited (0 when none)",
            Unit::Seconds,
            oldest_approval.clone(),
        );
        let slots_in_use = Gauge::default();
        registry.register(
            "slots_in_use",
            "Session slots taken: tasks running",
            slots_in_use.clone(),
        );
        let store_bytes = Gauge::default();
        registry.register_with_unit(
            "store_size",
            "Size of hcp.db and its write-ahead log",
            Unit::Bytes,
            store_bytes.clone(),
        );
        let hid = Family::<HidLabels, Gauge>::default();
        registry.register(
            "hid_state",
            "The HID mediator's mode and execution state (1 for the state it is in)",
            hid.clone(),
        );
        let archives = Gauge::default();
        registry.register(
            "evidence_archives",
            "Archive runs that wrote a pack and pruned the hot store",
            archives.clone(),
        );
        let archived_tasks = Gauge::default();
        registry.register(
            "evidence_archived_tasks",
            "Tasks archived into packs and pruned from the hot store",
            archived_tasks.clone(),
        );
        Self {
            registry,
            task_moves,
            admissions,
            host_calls,
            receipt_batch,
            receipt_flush,
            amqp,
            tasks,
            approvals_waiting,
            oldest_approval,
            slots_in_use,
            store_bytes,
            hid,
            archives,
            archived_tasks,
            scrape: Mutex::new(()),
        }
    }

    /// A task was recorded in, or moved to, `state`.
    pub fn task_moved(&self, state: &'static str) {
        self.task_moves.get_or_create(&StateLabel { state }).inc();
    }

    /// The gate answered a `task_submit`: `decision` (`accepted`,
    /// `rejected`, `waiting`, `finished`, `duplicate`), and a refusal's
    /// reason code (`""` otherwise).
    pub fn admission(&self, decision: &'static str, reason_code: &'static str) {
        self.admissions
            .get_or_create(&AdmissionLabels {
                decision,
                reason_code,
            })
            .inc();
    }

    /// The PEP decided a host call of `interface`.
    pub fn host_call(
        &self,
        interface: &'static str,
        verdict: &'static str,
        reason_code: &'static str,
    ) {
        self.host_calls
            .get_or_create(&CallLabels {
                interface,
                verdict,
                reason_code,
            })
            .inc();
    }

    /// The receipt writer stored a batch of `messages` in `took`.
    pub fn receipt_batch(&self, messages: usize, took: Duration) {
        #[allow(clippy::cast_precision_loss)] // a batch is far below 2^52
        self.receipt_batch.observe(messages as f64);
        self.receipt_flush.observe(took.as_secs_f64());
    }

    /// An AMQP delivery came to `event`.
    pub fn amqp(&self, event: AmqpEvent) {
        self.amqp
            .get_or_create(&AmqpLabels {
                event: event.label(),
            })
            .inc();
    }

    /// Every family in the text format, the gauges set from `gauges`.
    ///
    /// # Errors
    ///
    /// Only if the text cannot be written (it is written to a string).
    pub fn encode(&self, gauges: &Gauges) -> Result<String, std::fmt::Error> {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        // States no longer present (a capability with no task waiting) go.
        self.tasks.clear();
        for (state, capability, n) in &gauges.tasks {
            self.tasks
                .get_or_create(&TaskLabels {
                    state,
                    capability: capability.clone(),
                })
                .set(*n);
        }
        self.approvals_waiting.set(gauges.approvals_waiting);
        self.oldest_approval.set(gauges.oldest_approval_seconds);
        self.slots_in_use.set(gauges.slots_in_use);
        self.store_bytes.set(gauges.store_bytes);
        self.archives.set(gauges.archives);
        self.archived_tasks.set(gauges.archived_tasks);
        self.hid.clear();
        if let Some((mode, execution)) = &gauges.hid {
            self.hid
                .get_or_create(&HidLabels {
                    mode: mode.clone(),
                    execution: execution.clone(),
                })
                .set(1);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_names_every_family_and_counts() {
        let m = Metrics::new();
        m.task_moved("completed");
        m.task_moved("completed");
        m.admission("rejected", "unauthorized");
        m.host_call("fs", "ALLOW", "ALLOW_POLICY");
        m.receipt_batch(3, Duration::from_millis(2));
        m.amqp(AmqpEvent::Redelivered);
        let text = m
            .encode(&Gauges {
                tasks: vec![("queued", "echo".into(), 2)],
                approvals_waiting: 1,
                oldest_approval_seconds: 4.5,
                slots_in_use: 1,
                store_bytes: 4096,
                hid: Some(("OBSERVE".into(), "off".into())),
                archives: 2,
                archived_tasks: 40,
            })
            .expect("encode");
        for line in [
            "# TYPE hcp_task_transitions counter",
            "hcp_task_transitions_total{state=\"completed\"} 2",
            "hcp_admission_decisions_total{decision=\"rejected\",reason_code=\"unauthorized\"} 1",
            "hcp_host_calls_total{interface=\"fs\",verdict=\"ALLOW\",reason_code=\"ALLOW_POLICY\"} 1",
            "hcp_receipt_batch_size_count 1",
            "hcp_receipt_batch_size_sum 3.0",
            "# TYPE hcp_receipt_flush_seconds histogram",
            "hcp_receipt_flush_seconds_bucket{le=\"0.0025\"} 1",
            "hcp_amqp_deliveries_total{event=\"redelivered\"} 1",
            "hcp_tasks{state=\"queued\",capability=\"echo\"} 2",
            "hcp_approvals_waiting 1",
            "hcp_approval_oldest_age_seconds 4.5",
            "hcp_slots_in_use 1",
            "hcp_store_size_bytes 4096",
            "hcp_hid_state{mode=\"OBSERVE\",execution=\"off\"} 1",
            "hcp_evidence_archives 2",
            "hcp_evidence_archived_tasks 40",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn gauges_of_states_gone_are_dropped() {
        let m = Metrics::new();
        let first = Gauges {
            tasks: vec![("running", "echo".into(), 1)],
            ..Gauges::default()
        };
        assert!(
            m.encode(&first)
                .expect("encode")
                .contains("capability=\"echo\"} 1")
        );
        let text = m.encode(&Gauges::default()).expect("encode");
        assert!(!text.contains("capability=\"echo\""), "{text}");
    }
}
