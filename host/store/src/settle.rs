//! Final states that could not be written when they were reached (a full
//! disk): kept in memory and written by [`Store::settle_pending`], which
//! `hcp serve` calls every second, so that every acknowledged task gets
//! its final answer once space returns. Until then the task reads as it is
//! stored (e.g. `running`): nothing is answered that is not durable.

use super::{Store, TaskState, TaskStatus, now};
use anyhow::Result;
use hcp_contracts::answer::Answer;
use rusqlite::params;

/// A final state waiting to be written.
#[derive(Debug, Clone)]
pub(super) struct Unsettled {
    task_id: String,
    from: TaskState,
    to: TaskState,
    result: Answer,
}

/// A final state, to be written on a connection the caller holds.
#[derive(Debug)]
pub struct SettleWrite {
    task_id: String,
    from: TaskState,
    to: TaskState,
    result: String,
    /// `result` sealed with the data key: what is stored when the task's
    /// messages rest sealed (a T3/T4 task, or a sealed `task_submit`).
    sealed: String,
    at: String,
}

impl SettleWrite {
    /// [`Store::settle`]'s write, for a transaction of the caller's (the
    /// receipt writer's, with the task's last receipts): moves `task_id` from
    /// `from` to the final state `to` with its final answer `result`.
    /// Whoever commits it calls [`Store::task_moved`] when it moved the
    /// task; whoever fails to commit it settles the task another way.
    /// The final answer rests sealed with `key` when it holds a string the
    /// credential detector flags, or when the task's messages do (its data
    /// class is T3 or T4, or its `task_submit` rests sealed: decided in the
    /// write, from the task's row).
    ///
    /// # Errors
    ///
    /// The cipher or the random source failed.
    pub fn new(
        key: &crate::seal::DataKey,
        task_id: &str,
        from: TaskState,
        to: TaskState,
        result: &Answer,
    ) -> Result<Self> {
        // Its JSON once: the text stored, and the strings the credential
        // detector reads.
        let value = result.to_value()?;
        let text = value.to_string();
        let sealed = super::tasks::seal_message(key, task_id, "result", &text)?;
        let result = if crate::withhold::holds_credential(&value) {
            sealed.clone()
        } else {
            text
        };
        Ok(Self {
            task_id: task_id.to_owned(),
            from,
            to,
            result,
            sealed,
            at: now(),
        })
    }

    /// The status of the task once this is written (as
    /// [`Store::task_status`] reads it back), for a task of `caller_id`
    /// whose final answer is `result` (the answer this was made from).
    pub fn status(&self, caller_id: &str, result: Answer) -> TaskStatus {
        TaskStatus {
            task_id: self.task_id.clone(),
            caller_id: caller_id.to_owned(),
            state: self.to,
            updated_at: self.at.clone(),
            result: Some(result),
            answer: None,
        }
    }

    /// Writes it on `db`; returns whether the task moved (it was still in
    /// the state it is moved from).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn apply(&self, db: &rusqlite::Connection) -> Result<bool> {
        Ok(db
            .prepare_cached(
                "UPDATE tasks SET state = ?3, updated_at = ?5,
                   result = CASE WHEN data_class IN ('T3', 'T4') OR submit LIKE 'sealed:%'
                     THEN ?6 ELSE ?4 END
                 WHERE task_id = ?1 AND state = ?2",
            )?
            .execute(params![
                self.task_id,
                self.from.as_str(),
                self.to.as_str(),
                self.result,
                self.at,
                self.sealed,
            ])?
            == 1)
    }
}

impl Store {
    /// Moves a task from `from` to the final state `to` with its final
    /// answer `result`, if it is still in `from`; returns whether it moved.
    /// When the write fails, the move is kept and tried again by
    /// [`Store::settle_pending`], and the error returned.
    ///
    /// # Errors
    ///
    /// The database fails (the move is pending).
    pub fn settle(
        &self,
        task_id: &str,
        from: TaskState,
        to: TaskState,
        result: Answer,
    ) -> Result<bool> {
        let u = Unsettled {
            task_id: task_id.to_owned(),
            from,
            to,
            result,
        };
        match self.write_settled(&u) {
            Ok(moved) => Ok(moved),
            Err(e) => {
                tracing::error!(
                    "task {task_id}: its final state ({}) could not be written; it will be \
                     written once the store accepts writes: {e:#}",
                    to.as_str()
                );
                self.unsettled().push(u);
                Err(e)
            }
        }
    }

    /// Fails the copy `task_id` of a task this host lets go (its AMQP
    /// delivery was never acknowledged here) with `result`, if it is still
    /// in `from`, and with it, in one transaction, frees its `message_id`
    /// (`replies::release_message_id`) and closes its route: a host that
    /// stops midway leaves the copy either as it was (abandoned again at
    /// the next start) or let go. Returns whether it moved.
    ///
    /// # Errors
    ///
    /// The database fails (nothing is written).
    pub fn abandon(&self, task_id: &str, from: TaskState, result: &Answer) -> Result<bool> {
        self.fail_released(task_id, from, result, true)
    }

    /// Fails `task_id` with `result` if it is still in `from`, and frees
    /// its `message_id` in the same transaction: a task nobody had an
    /// answer for (the gate never answered it), whose caller is told to
    /// send the same message again. Returns whether it moved.
    ///
    /// # Errors
    ///
    /// The database fails (nothing is written).
    pub fn fail_unanswered(&self, task_id: &str, from: TaskState, result: &Answer) -> Result<bool> {
        self.fail_released(task_id, from, result, false)
    }

    fn fail_released(
        &self,
        task_id: &str,
        from: TaskState,
        result: &Answer,
        close_route: bool,
    ) -> Result<bool> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let moved = SettleWrite::new(&self.data_key, task_id, from, TaskState::Failed, result)?
            .apply(&tx)?;
        if moved && close_route {
            super::replies::let_go(&tx, task_id)?;
        } else if moved {
            super::replies::release_message_id(&tx, task_id)?;
        }
        tx.commit()?;
        drop(db);
        if moved {
            self.task_moved(task_id, TaskState::Failed);
        }
        Ok(moved)
    }

    fn write_settled(&self, u: &Unsettled) -> Result<bool> {
        let moved = SettleWrite::new(&self.data_key, &u.task_id, u.from, u.to, &u.result)?
            .apply(&self.db())?;
        if moved {
            self.task_moved(&u.task_id, u.to);
        }
        Ok(moved)
    }

    fn unsettled(&self) -> std::sync::MutexGuard<'_, Vec<Unsettled>> {
        self.unsettled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the final states [`Store::settle`] could not; returns how
    /// many it wrote (those that still fail stay pending).
    pub fn settle_pending(&self) -> usize {
        let pending = std::mem::take(&mut *self.unsettled());
        let mut written = 0;
        let mut failed = Vec::new();
        for u in pending {
            match self.write_settled(&u) {
                Ok(_) => {
                    tracing::info!("task {}: final state {} written", u.task_id, u.to.as_str());
                    written += 1;
                }
                Err(_) => failed.push(u),
            }
        }
        self.unsettled().extend(failed);
        written
    }

    /// Tasks recorded but never answered by the gate (`received`), e.g.
    /// because the host failed or stopped in the middle of a submission:
    /// at startup, nothing is in the middle of one.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn unanswered(&self) -> Result<Vec<String>> {
        let db = self.db();
        let mut stmt =
            db.prepare("SELECT task_id FROM tasks WHERE state = 'received' ORDER BY created_at")?;
        let ids = stmt.query_map([], |r| r.get(0))?;
        Ok(ids.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tasks::tests::{accepted, completed, failed};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_final_state_is_written_once_and_only_from_its_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let super::super::Submitted::New(task) =
            store.submit("c", "m-1", "cap", &json!({})).expect("submit")
        else {
            panic!("not new")
        };
        assert_eq!(
            store.unanswered().expect("unanswered"),
            std::slice::from_ref(&task.task_id)
        );
        let two = failed("2");
        // Not from another state.
        assert!(
            !store
                .settle(
                    &task.task_id,
                    TaskState::Running,
                    TaskState::Failed,
                    failed("1")
                )
                .expect("settle")
        );
        assert!(
            store
                .settle(
                    &task.task_id,
                    TaskState::Received,
                    TaskState::Failed,
                    two.clone()
                )
                .expect("settle")
        );
        let t = store.task(&task.task_id).expect("task").expect("exists");
        assert_eq!((t.state, t.result), (TaskState::Failed, Some(two)));
        assert!(store.unanswered().expect("unanswered").is_empty());
        assert_eq!(store.settle_pending(), 0);
    }

    /// The status a final state's write gives its followers is the status
    /// read back once it is written, field for field, for each final state.
    #[test]
    fn a_settled_status_is_the_status_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        for (i, (to, answer)) in [
            (TaskState::Completed, completed()),
            (TaskState::Failed, failed("late")),
        ]
        .into_iter()
        .enumerate()
        {
            let super::super::Submitted::New(task) = store
                .submit("c", &format!("m-{i}"), "cap", &json!({}))
                .expect("submit")
            else {
                panic!("not new")
            };
            store
                .set_task(
                    &task.task_id,
                    TaskState::Queued,
                    super::super::TaskUpdate {
                        answer: Some(accepted()),
                        ..Default::default()
                    },
                )
                .expect("queue");
            store
                .transition(&task.task_id, TaskState::Queued, TaskState::Running)
                .expect("run");
            let write = SettleWrite::new(
                &store.data_key,
                &task.task_id,
                TaskState::Running,
                to,
                &answer,
            )
            .expect("write");
            assert!(write.apply(&store.db()).expect("write"));
            let read = store
                .task_status(&task.task_id)
                .expect("read")
                .expect("task");
            assert_eq!(write.status("c", answer), read);
        }
    }
}
