//! The `amqp_replies` table: where the final answer of a task submitted
//! over AMQP goes (the message's `reply_to` and `correlation_id`), whether
//! its delivery was acknowledged to the broker, and when the final answer
//! was confirmed by the broker. The AMQP transport is its only user.

use super::{Store, now};
use anyhow::Result;
use rusqlite::params;

/// Where a task's answers go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyRoute {
    /// The task.
    pub task_id: String,
    /// The queue the caller reads answers from.
    pub reply_to: String,
    /// The submission's `message_id`, echoed on every answer.
    pub correlation_id: String,
    /// This host owns the task: recorded only once the broker is known to
    /// have taken the delivery's acknowledgement (so no other host can
    /// have the message). A route left without it by a stopped host may
    /// have been redelivered to another host, which then owns the task, or
    /// been let go by the broker: the host never runs it.
    pub acked: bool,
    /// Times the final answer was handed to the broker without the
    /// broker's confirm being recorded (a host that died in between):
    /// when not zero, the next copy may be a repeat.
    pub attempts: u32,
}

/// Where the answers of a task submitted over AMQP go: written with the
/// task itself ([`Store::submit_routed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replies<'a> {
    /// The queue the caller reads answers from.
    pub reply_to: &'a str,
    /// The submission's `message_id`, echoed on every answer.
    pub correlation_id: &'a str,
}

/// Records a new task's route, which says the task is not this host's yet
/// ([`Store::route_acked`] records that it is), unless the task has one.
pub(super) fn insert_route(
    db: &rusqlite::Connection,
    task_id: &str,
    replies: Replies<'_>,
) -> rusqlite::Result<usize> {
    db.prepare_cached(
        "INSERT OR IGNORE INTO amqp_replies (task_id, reply_to, correlation_id) \
         VALUES (?1, ?2, ?3)",
    )?
    .execute(params![task_id, replies.reply_to, replies.correlation_id])
}

fn close_route(db: &rusqlite::Connection, task_id: &str) -> rusqlite::Result<usize> {
    db.prepare_cached(
        "UPDATE amqp_replies SET answered_at = ?2 WHERE task_id = ?1 AND answered_at IS NULL",
    )?
    .execute(params![task_id, now()])
}

/// Frees the `message_id` of a task that never ran and whose caller
/// never had an answer from this host: a copy abandoned because its
/// AMQP delivery was never acknowledged (the broker delivers the
/// message again), or a task the host stopped on before the gate
/// answered it. The same message, sent again or redelivered here, is
/// then admitted as a new task instead of being answered as a
/// duplicate of the dead copy. The copy keeps its row, its receipts and
/// its submission; its stored `message_id` gets the suffix
/// `#released-<task_id>` (idempotency is per caller, so no other
/// caller's key can meet it). Done once.
pub(super) fn release_message_id(
    db: &rusqlite::Connection,
    task_id: &str,
) -> rusqlite::Result<usize> {
    let suffix = format!("#released-{task_id}");
    db.prepare_cached(
        "UPDATE tasks SET message_id = message_id || ?2 \
         WHERE task_id = ?1 AND substr(message_id, -length(?2)) IS NOT ?2",
    )?
    .execute(params![task_id, suffix])
}

/// [`Store::let_go`] on `db`, in the caller's transaction.
pub(super) fn let_go(db: &rusqlite::Connection, task_id: &str) -> rusqlite::Result<()> {
    release_message_id(db, task_id)?;
    close_route(db, task_id)?;
    Ok(())
}

/// The statement of [`Store::startable_tasks`], its limit (at most 1,000)
/// written as a literal. Bound as a parameter, `LIMIT ?` made SQLite
/// (3.54) compile the statement again at every run, since it plans with
/// the bound value: its parser and planner ran after every task that
/// `hcp serve` finished (about 2% of the CPU of `serve_load 300 1`, in
/// `sqlite3Reprepare`). A host asks with two limits (one ended task's few,
/// the maintenance loop's 1,000), so each stays compiled.
fn startable_sql(limit: usize) -> String {
    format!(
        "SELECT task_id FROM ( \
           SELECT task_id, created_at, ROW_NUMBER() OVER \
             (PARTITION BY caller_id ORDER BY created_at, task_id) AS turn \
           FROM tasks t WHERE state = 'queued' AND NOT EXISTS \
             (SELECT 1 FROM amqp_replies r \
              WHERE r.task_id = t.task_id AND r.acked = 0 AND r.answered_at IS NULL)) \
         ORDER BY turn, created_at, task_id LIMIT {}",
        limit.min(1_000)
    )
}

impl Store {
    /// Records where the answers of an existing task go, before its first
    /// answer is published: a duplicate delivery of a task submitted
    /// without a route (a new task's route is written with it,
    /// [`Store::submit_routed`]), or whose route goes to no queue (its
    /// first message had no `reply_to`: the duplicate's queue takes the
    /// answers from now on). Any other route stays as it is.
    ///
    /// A route written here says the task is this host's already: a task
    /// submitted without a route (over HTTP, or from the command line) was
    /// this host's from its admission, whatever becomes of the duplicate's
    /// delivery. (Written as not this host's yet, a host that stopped
    /// before recording the delivery as its own abandoned at startup a task
    /// whose caller had been told it was accepted.)
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_replies(&self, task_id: &str, reply_to: &str, correlation_id: &str) -> Result<()> {
        // '' is the AMQP transport's route to no queue.
        self.db()
            .prepare_cached(
                "INSERT INTO amqp_replies (task_id, reply_to, correlation_id, acked) \
                 VALUES (?1, ?2, ?3, 1) \
                 ON CONFLICT (task_id) DO UPDATE \
                 SET reply_to = excluded.reply_to, correlation_id = excluded.correlation_id \
                 WHERE amqp_replies.reply_to = '' AND amqp_replies.answered_at IS NULL",
            )?
            .execute(params![task_id, reply_to, correlation_id])?;
        Ok(())
    }

    /// Closes the route of a task whose first answer was its last (the
    /// gate refused it), once that answer is published. Not synced: a
    /// host that stops before this commit is durable closes the route at
    /// startup (`hcp::engine::Host::abandon_unacknowledged` leaves a
    /// finished task as it is).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_refused(&self, task_id: &str) -> Result<()> {
        let mut db = self.db();
        super::unsynced(&mut db, |db| {
            close_route(db, task_id)?;
            Ok(())
        })
    }

    /// The task is this host's: recorded once the broker is known to have
    /// taken the acknowledgement of its delivery, never before (recorded
    /// before, a host killed before the acknowledgement left kept a task
    /// the broker gave to another host too).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_acked(&self, task_id: &str) -> Result<()> {
        self.db()
            .prepare_cached("UPDATE amqp_replies SET acked = 1 WHERE task_id = ?1")?
            .execute(params![task_id])?;
        Ok(())
    }

    /// Takes back [`Store::route_acked`]: the delivery could not be
    /// acknowledged after all, so the task is not this host's (the outbox
    /// and the loop that starts tasks pass it by again).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_disowned(&self, task_id: &str) -> Result<()> {
        self.db()
            .prepare_cached("UPDATE amqp_replies SET acked = 0 WHERE task_id = ?1")?
            .execute(params![task_id])?;
        Ok(())
    }

    /// The final answer is about to be handed to the broker: recorded
    /// first, so that a copy published again after a crash can say it may
    /// be a repeat.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_attempt(&self, task_id: &str) -> Result<()> {
        self.db()
            .prepare_cached("UPDATE amqp_replies SET attempts = attempts + 1 WHERE task_id = ?1")?
            .execute(params![task_id])?;
        Ok(())
    }

    /// A copy this host lets go, whatever its state: its `message_id`
    /// freed ([`release_message_id`]) and its route closed, in one
    /// transaction.
    ///
    /// # Errors
    ///
    /// The database fails (nothing is written).
    pub fn let_go(&self, task_id: &str) -> Result<()> {
        let mut db = self.db();
        let tx = db.transaction()?;
        let_go(&tx, task_id)?;
        tx.commit()?;
        Ok(())
    }

    /// The broker confirmed the task's final answer (or none will be
    /// sent): the route is closed.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn route_answered(&self, task_id: &str) -> Result<()> {
        close_route(&self.db(), task_id)?;
        Ok(())
    }

    /// Routes whose final answer has not been confirmed yet.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn open_routes(&self) -> Result<Vec<ReplyRoute>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT task_id, reply_to, correlation_id, acked, attempts FROM amqp_replies \
             WHERE answered_at IS NULL ORDER BY rowid",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ReplyRoute {
                task_id: r.get(0)?,
                reply_to: r.get(1)?,
                correlation_id: r.get(2)?,
                acked: r.get::<_, i64>(3)? != 0,
                attempts: u32::try_from(r.get::<_, i64>(4)?).unwrap_or(u32::MAX),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Queued tasks this host may start (up to `limit`, at most 1,000), callers taking
    /// turns: each caller's oldest, then each one's second oldest, and so
    /// on (oldest first within a turn). A caller's backlog never pushes
    /// another caller's task out of the list (the first 1,000 by age alone
    /// could all be one caller's, and the others' waited behind all of
    /// them). Not one whose AMQP delivery is unacknowledged, since the
    /// broker may give that message to another host.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn startable_tasks(&self, limit: usize) -> Result<Vec<String>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(&startable_sql(limit))?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether `task_id` came from an AMQP delivery this host has not
    /// acknowledged (its route is open and not this host's): the broker
    /// may give the message to another host, so nothing here starts or
    /// decides the task.
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn is_held(&self, task_id: &str) -> Result<bool> {
        Ok(self
            .db()
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM amqp_replies \
                 WHERE task_id = ?1 AND acked = 0 AND answered_at IS NULL)",
            )?
            .query_row(params![task_id], |r| r.get(0))?)
    }

    /// Queued tasks held by an unacknowledged AMQP delivery: not this
    /// host's (yet), so nothing here starts them ([`Store::startable_tasks`]).
    ///
    /// # Errors
    ///
    /// The database fails.
    pub fn held_tasks(&self) -> Result<Vec<String>> {
        let db = self.db();
        let mut stmt = db.prepare_cached(
            "SELECT t.task_id FROM tasks t JOIN amqp_replies r USING (task_id) \
             WHERE t.state = 'queued' AND r.acked = 0 AND r.answered_at IS NULL \
             ORDER BY t.created_at, t.task_id",
        )?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Submitted, TaskState};
    use super::*;
    use serde_json::json;

    fn queued(store: &Store, message_id: &str, replies: Option<Replies<'_>>) -> String {
        let Submitted::New(task) = store
            .submit_routed("c1", message_id, "cap", &json!({}), replies)
            .expect("submit")
        else {
            panic!("not new");
        };
        assert!(
            store
                .transition(&task.task_id, TaskState::Received, TaskState::Queued)
                .expect("queue")
        );
        task.task_id
    }

    #[test]
    fn a_task_whose_delivery_is_unacknowledged_is_not_started() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let http = queued(&store, "m-http", None);
        let amqp = queued(
            &store,
            "m-amqp",
            Some(Replies {
                reply_to: "reply-q",
                correlation_id: "m-amqp",
            }),
        );
        assert_eq!(
            store.startable_tasks(1_000).expect("startable"),
            std::slice::from_ref(&http)
        );
        store.route_acked(&amqp).expect("acked");
        assert_eq!(
            store.startable_tasks(1_000).expect("startable"),
            [http.clone(), amqp]
        );
        // A duplicate delivery of the task submitted without a route gives
        // it one, which says the task is this host's: it stays startable.
        store
            .route_replies(&http, "reply-q", "m-http")
            .expect("route");
        let routes = store.open_routes().expect("routes");
        assert!(
            routes.iter().any(|r| r.task_id == http && r.acked),
            "{routes:?}"
        );
        assert!(
            store
                .startable_tasks(1_000)
                .expect("startable")
                .contains(&http)
        );
    }

    /// The oldest queued tasks start first, however many wait: the start
    /// list took the newest thousand, so past a thousand queued tasks the
    /// oldest never started.
    #[test]
    fn the_oldest_queued_tasks_start_first_past_a_thousand() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let mut ids = Vec::new();
        for i in 0..1_005 {
            let Submitted::New(task) = store
                .submit("c1", &format!("m-{i}"), "cap", &json!({}))
                .expect("submit")
            else {
                panic!("not new");
            };
            ids.push(task.task_id);
        }
        store
            .db()
            .execute("UPDATE tasks SET state = 'queued'", [])
            .expect("queue them all");
        let startable = store.startable_tasks(1_000).expect("startable");
        assert_eq!(startable.len(), 1_000);
        assert_eq!(startable[..], ids[..1_000]);
    }

    /// Callers take turns: one caller's backlog of queued tasks does not
    /// keep another's, submitted after it, out of the start list (before,
    /// the list was the oldest thousand, all the first caller's, and the
    /// second caller's tasks waited behind every one of them).
    #[test]
    fn callers_take_turns_in_the_start_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let submit = |caller: &str, i: usize| {
            let Submitted::New(task) = store
                .submit(caller, &format!("m-{i}"), "cap", &json!({}))
                .expect("submit")
            else {
                panic!("not new");
            };
            task.task_id
        };
        let flood: Vec<_> = (0..1_005).map(|i| submit("flood", i)).collect();
        let late: Vec<_> = (0..2).map(|i| submit("late", i)).collect();
        store
            .db()
            .execute("UPDATE tasks SET state = 'queued'", [])
            .expect("queue them all");
        let startable = store.startable_tasks(1_000).expect("startable");
        assert_eq!(startable.len(), 1_000);
        // Each caller's oldest, then each one's second oldest, then the
        // rest of the flood, oldest first.
        assert_eq!(
            startable[..4],
            [
                flood[0].clone(),
                late[0].clone(),
                flood[1].clone(),
                late[1].clone()
            ]
        );
        assert_eq!(startable[4..], flood[2..998]);
    }

    /// The start list, asked for after every task `hcp serve` finishes, is
    /// compiled once per limit: with its limit bound as a parameter, SQLite
    /// compiled it again at every run (it plans with a bound limit's
    /// value), as the same statement with its limit bound shows beside it.
    #[test]
    fn the_start_list_is_not_compiled_again_at_every_task() {
        use rusqlite::StatementStatus::{RePrepare, Run};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("open");
        let task = queued(&store, "m-1", None);
        for _ in 0..3 {
            assert_eq!(
                store.startable_tasks(4).expect("startable"),
                std::slice::from_ref(&task)
            );
        }
        let db = store.db();
        let cached = db.prepare_cached(&startable_sql(4)).expect("cached");
        assert_eq!(cached.get_status(Run), 3);
        assert_eq!(cached.get_status(RePrepare), 0);
        // The same statement with its limit bound, kept in the same cache
        // (which clears a statement's bindings when it takes it back: that
        // alone makes SQLite compile it again before its next run).
        let bound_sql = startable_sql(4).replace("LIMIT 4", "LIMIT ?1");
        for _ in 0..3 {
            let n = db
                .prepare_cached(&bound_sql)
                .expect("prepare")
                .query_map([4_i64], |r| r.get::<_, String>(0))
                .expect("run")
                .count();
            assert_eq!(n, 1);
        }
        let bound = db.prepare_cached(&bound_sql).expect("cached");
        assert_eq!(bound.get_status(RePrepare), 3, "SQLite compiles it again");
    }
}
