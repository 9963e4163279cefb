//! A task this process has just accepted, handed to its run in memory.
//!
//! The gate wrote the task (`queued`, its session and token) and the
//! admission's receipt in one commit, signed the token and knows the
//! receipt: the run that follows in this process needs exactly that, so it
//! takes it from here instead of reading back the task's row and its
//! admission receipt and verifying a signature this process just made.
//! Only the gate's own accepted tasks go in, and only what it wrote; the
//! run still claims its slot in the store, where another runner (of this
//! process or another) may have taken the task first. A task not found
//! here (started later, from the queue, or by another process, or by a
//! host restarted since) is read from the store as before.

use crate::store::TaskRecord;
use crate::token::SessionClaims;
use hcp_receipts::Parent;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Accepted tasks kept for their runs: the oldest is forgotten beyond
/// this (its run reads the store), so tasks accepted and never run here
/// cost a bounded amount of memory.
const KEPT: usize = 256;

/// What the gate wrote of an accepted task, for its run.
#[derive(Debug)]
pub(super) struct Accepted {
    /// The task as stored: `queued`, with its admission and session.
    pub(super) task: TaskRecord,
    /// The claims its session token was signed over.
    pub(super) claims: SessionClaims,
    /// The receipts that admitted it (the admission's).
    pub(super) causes: Vec<Parent>,
}

/// The accepted tasks not yet taken by a run.
#[derive(Debug, Default)]
pub(super) struct Handoff {
    waiting: Mutex<VecDeque<Accepted>>,
}

impl Handoff {
    /// Keeps `accepted` for its run.
    pub(super) fn put(&self, accepted: Accepted) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if waiting.len() >= KEPT {
            waiting.pop_front();
        }
        waiting.push_back(accepted);
    }

    /// The accepted task `task_id`, if it is kept (once: a second run of
    /// it reads the store).
    pub(super) fn take(&self, task_id: &str) -> Option<Accepted> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let at = waiting.iter().position(|a| a.task.task_id == task_id)?;
        waiting.remove(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TaskState;

    fn accepted(i: usize) -> Accepted {
        Accepted {
            task: TaskRecord {
                task_id: format!("task-{i}"),
                caller_id: "caller".into(),
                message_id: format!("m-{i}"),
                capability: "cap".into(),
                version: None,
                session_id: None,
                state: TaskState::Queued,
                risk: None,
                data_class: None,
                submit: serde_json::Value::Null,
                answer: None,
                result: None,
                created_at: String::new(),
                updated_at: String::new(),
                admission: None,
                checked: None,
                session: None,
            },
            claims: SessionClaims {
                iss: "host".into(),
                sub: "caller".into(),
                aud: crate::token::AUDIENCE.into(),
                jti: format!("session-{i}"),
                iat: 0,
                nbf: 0,
                exp: 0,
                cap: "cap".into(),
                cap_version: "1.0.0".into(),
                risk: hcp_contracts::RiskLevel::R1,
                data_class: hcp_contracts::DataClass::T1,
                envelope_hash: String::new(),
                constraints: serde_json::Value::Null,
            },
            causes: Vec::new(),
        }
    }

    /// What the gate hands over is what the store reads back: the run
    /// that takes it sees the task it would have read.
    #[test]
    fn an_accepted_task_is_handed_over_as_the_store_holds_it() {
        use crate::{Auth, Host, HostConfig, HostPaths};
        use std::path::Path;
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = tempfile::tempdir().expect("tempdir");
        let host = Host::open(
            HostPaths {
                data_dir: dir.path().join("data"),
                cache_dir: dir.path().join("cache"),
                policies_dir: root.join("policies"),
            },
            HostConfig {
                // A weekday morning: the shipped policy admits the task.
                gate_clock: Some(time::macros::datetime!(2026-11-18 10:00 UTC)),
                ..HostConfig::default()
            },
        )
        .expect("host");
        host.install_manifest(&root.join("plugins/document-analysis/manifest.json"))
            .expect("install");
        let message: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                root.join("plugins/document-analysis/examples/task_submit.json"),
            )
            .expect("read"),
        )
        .expect("json");
        let caller = message["payload"]["caller_id"]
            .as_str()
            .expect("caller")
            .to_owned();
        let submitted = host
            .submit(&message, Auth::Transport(&caller))
            .expect("submit");
        assert!(
            matches!(submitted.answer, hcp_contracts::answer::Answer::Accepted(_)),
            "{}",
            submitted.answer
        );
        assert!(submitted.runnable);
        let id = submitted.task_id.expect("task id");
        let handed = host.handoff.take(&id).expect("handed over");
        let stored = host.store.task(&id).expect("read").expect("stored");
        assert_eq!(
            TaskRecord {
                updated_at: stored.updated_at.clone(),
                ..handed.task
            },
            stored
        );
        let session = stored.session_id.as_deref().expect("session");
        let issued = stored.session.as_ref().expect("issued");
        let verified = host
            .tokens()
            .verify(&issued.token, Some(session))
            .expect("token");
        assert_eq!(handed.claims, verified);
        assert_eq!(
            handed.causes,
            host.recorder.task_causes(&id).expect("causes")
        );
    }

    /// The typed answers are the text the store keeps, byte for byte: the
    /// gate's answer, a duplicate's copy of it, the final answer as run,
    /// as stored, and as its status reads it back; and the text reads as
    /// the message it was before answers were typed (an envelope, whose
    /// JSON written again is the same text).
    #[tokio::test(flavor = "multi_thread")]
    async fn answers_are_stored_and_answered_byte_for_byte() {
        use crate::Auth;
        let (_dir, host) = host();
        let message = example("m-bytes");
        let caller = message["payload"]["caller_id"]
            .as_str()
            .expect("caller")
            .to_owned();
        let first = host
            .submit(&message, Auth::Transport(&caller))
            .expect("submit");
        let id = first.task_id.clone().expect("task id");
        let stored = |id: &str| {
            let db = host.store.db();
            crate::store::stored_messages(&db, host.store.data_key(), id)
                .expect("read")
                .expect("stored")
        };
        let text = serde_json::to_string(&first.answer).expect("text");
        assert!(text.contains("\"type\":\"task_accepted\""), "{text}");
        assert_eq!(stored(&id).1.as_deref(), Some(text.as_str()));
        let again = host
            .submit(&message, Auth::Transport(&caller))
            .expect("submit again");
        assert!(again.duplicate);
        assert_eq!(serde_json::to_string(&again.answer).expect("text"), text);
        let answer = host.run_task(&id).await.expect("run").expect("ran");
        let result = serde_json::to_string(&answer).expect("text");
        assert!(result.contains("\"type\":\"task_completed\""), "{result}");
        assert_eq!(stored(&id).2.as_deref(), Some(result.as_str()));
        let status = host.store.task_status(&id).expect("status").expect("task");
        let read = status.final_answer().expect("final");
        assert_eq!(serde_json::to_string(read).expect("text"), result);
        for text in [text, result] {
            let value: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            hcp_contracts::message::Envelope::parse(&value).expect("an HCP message");
            assert_eq!(value.to_string(), text);
        }
    }

    /// A host with the document-analysis example installed, its gate on a
    /// weekday morning.
    fn host() -> (tempfile::TempDir, crate::Host) {
        use crate::{Host, HostConfig, HostPaths};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = tempfile::tempdir().expect("tempdir");
        let host = Host::open(
            HostPaths {
                data_dir: dir.path().join("data"),
                cache_dir: dir.path().join("cache"),
                policies_dir: root.join("policies"),
            },
            HostConfig {
                gate_clock: Some(time::macros::datetime!(2026-11-18 10:00 UTC)),
                ..HostConfig::default()
            },
        )
        .expect("host");
        host.install_manifest(&root.join("plugins/document-analysis/manifest.json"))
            .expect("install");
        (dir, host)
    }

    /// The example `task_submit`, with `message_id`.
    fn example(message_id: &str) -> serde_json::Value {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut message: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                root.join("plugins/document-analysis/examples/task_submit.json"),
            )
            .expect("read"),
        )
        .expect("json");
        message["message_id"] = message_id.into();
        message
    }

    #[test]
    fn a_task_is_taken_once_and_the_oldest_is_forgotten_beyond_the_bound() {
        let handoff = Handoff::default();
        for i in 0..=KEPT {
            handoff.put(accepted(i));
        }
        assert!(handoff.take("task-0").is_none(), "kept beyond the bound");
        let last = format!("task-{KEPT}");
        assert_eq!(
            handoff.take(&last).map(|a| a.task.task_id),
            Some(last.clone())
        );
        assert!(handoff.take(&last).is_none(), "taken twice");
        assert!(handoff.take("task-1").is_some());
    }
}
