//! The schema history of `hcp.db`: every table of the data directory's
//! database, in the order it was added. `PRAGMA user_version` counts the
//! migrations that ran, so an entry is never edited or reordered, only
//! appended.
//!
//! Each table's rows have one owner: `tasks`, `approvals`, `resources`,
//! `checkpoints`, `artifacts`, `artifact_access`, `capabilities`,
//! `trusted_publishers`, `amqp_replies` and `interface_state` the store's own modules; `evidence_archives`
//! `hcp_evidence` (its archive); the
//! receipt tables (`receipt_log`, `receipts`, `receipt_blocks`, `receipt_marks`,
//! `receipt_checkpoints`, `receipt_sessions`, `policy_snapshots`,
//! `capability_manifests`, `task_messages`) `hcp_evidence`.

/// Schema migrations, applied in order; `PRAGMA user_version` records how
/// many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    r"
    CREATE TABLE artifacts (
        session_id TEXT NOT NULL,
        name TEXT NOT NULL,
        task_id TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        checksum TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, name)
    ) STRICT;
    CREATE TABLE checkpoints (
        session_id TEXT NOT NULL,
        id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        label TEXT NOT NULL,
        state BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (session_id, id)
    ) STRICT;
",
    // Installed capabilities, tasks, approvals, resources in use.
    r"
    CREATE TABLE capabilities (
        name TEXT NOT NULL,
        version TEXT NOT NULL,
        major INTEGER NOT NULL,
        minor INTEGER NOT NULL,
        patch INTEGER NOT NULL,
        dir TEXT NOT NULL,
        digest TEXT NOT NULL,
        publisher TEXT,
        unsigned INTEGER NOT NULL,
        installed_at TEXT NOT NULL,
        PRIMARY KEY (name, version)
    ) STRICT;
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        caller_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        capability TEXT NOT NULL,
        version TEXT,
        session_id TEXT,
        state TEXT NOT NULL,
        risk TEXT,
        data_class TEXT,
        submit TEXT NOT NULL,
        answer TEXT,
        result TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (caller_id, message_id)
    ) STRICT;
    CREATE INDEX tasks_state ON tasks (state);
    CREATE INDEX tasks_session ON tasks (session_id);
    CREATE TABLE approvals (
        task_id TEXT PRIMARY KEY REFERENCES tasks (task_id),
        requested_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        assessment TEXT NOT NULL,
        decision TEXT,
        operator_id TEXT,
        reason TEXT,
        decided_at TEXT
    ) STRICT;
    CREATE TABLE resources (
        name TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        since TEXT NOT NULL
    ) STRICT;
    CREATE TABLE artifact_access (
        uri TEXT NOT NULL,
        accessor TEXT NOT NULL,
        purpose TEXT NOT NULL,
        at TEXT NOT NULL
    ) STRICT;
",
    // T3 and T4 artifacts are sealed at rest.
    r"
    ALTER TABLE artifacts ADD COLUMN data_class TEXT NOT NULL DEFAULT 'T1';
    ALTER TABLE artifacts ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
",
    // What the gate decided for a task: the session runs under exactly this.
    r"
    ALTER TABLE tasks ADD COLUMN admission TEXT;
",
    // Trusted publishers of signed bundles (store/trust.rs).
    r"
    CREATE TABLE trusted_publishers (
        name TEXT PRIMARY KEY,
        public_key TEXT NOT NULL UNIQUE,
        key_id TEXT NOT NULL UNIQUE,
        added_at TEXT NOT NULL
    ) STRICT;
",
    // Receipts (append-only). Only `hcp_evidence` reads and writes these
    // tables' rows.
    r"
    CREATE TABLE receipt_log (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        host_id TEXT NOT NULL,
        public_key TEXT NOT NULL,
        state TEXT NOT NULL
    ) STRICT;
    CREATE TABLE receipts (
        seq INTEGER PRIMARY KEY,
        hash BLOB NOT NULL,
        body BLOB NOT NULL,
        input BLOB NOT NULL
    ) STRICT;
    CREATE TABLE receipt_marks (
        seq INTEGER PRIMARY KEY,
        task_id TEXT,
        session_id TEXT,
        call TEXT NOT NULL
    ) STRICT;
    CREATE INDEX receipt_marks_task ON receipt_marks (task_id);
    CREATE INDEX receipt_marks_session ON receipt_marks (session_id);
    CREATE TABLE receipt_checkpoints (
        tree_size INTEGER PRIMARY KEY,
        body BLOB NOT NULL
    ) STRICT;
    CREATE TABLE receipt_sessions (
        session_id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        capability TEXT NOT NULL,
        facts_hash TEXT NOT NULL,
        facts BLOB NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX receipt_sessions_task ON receipt_sessions (task_id);
    CREATE TABLE policy_snapshots (
        policy_hash TEXT PRIMARY KEY,
        sources TEXT NOT NULL
    ) STRICT;
    CREATE TABLE capability_manifests (
        capability TEXT PRIMARY KEY,
        manifest BLOB NOT NULL
    ) STRICT;
    CREATE TABLE task_messages (
        task_id TEXT NOT NULL,
        name TEXT NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (task_id, name)
    ) STRICT;
",
    // Where a task submitted over AMQP is answered (store/replies.rs).
    r"
    CREATE TABLE amqp_replies (
        task_id TEXT PRIMARY KEY REFERENCES tasks(task_id),
        reply_to TEXT NOT NULL,
        correlation_id TEXT NOT NULL,
        acked INTEGER NOT NULL DEFAULT 0,
        answered_at TEXT
    ) STRICT;
    CREATE INDEX amqp_replies_open ON amqp_replies(answered_at) WHERE answered_at IS NULL;
",
    // How many times a final answer was handed to the broker: a copy
    // published again after a restart says it may be a repeat.
    r"
    ALTER TABLE amqp_replies ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
",
    // A caller's tasks waiting for an approval, counted when one more
    // would wait, without walking the caller's whole history. Partial: a
    // task is in it only while it waits, so no other change of state
    // writes it. (Queued tasks are counted through `tasks_state`: an index
    // of them by caller cost every task two more index writes in synced
    // commits, about 0.17 ms.)
    r"
    CREATE INDEX tasks_pending_by_caller ON tasks (caller_id) WHERE state = 'pending_approval';
",
    // Receipts in blocks (`hcp_evidence::block`): one row holds up to
    // 1024 consecutive receipts of a batch, their hashes apart from the
    // rest so that the chain and the proofs read only those. Nothing is
    // written to `receipts` any more; the rows older hosts wrote there stay
    // where they are, a prefix of the log, and are read as before.
    r"
    CREATE TABLE receipt_blocks (
        first_seq INTEGER PRIMARY KEY,
        count INTEGER NOT NULL CHECK (count BETWEEN 1 AND 1024),
        hashes BLOB NOT NULL CHECK (length(hashes) = 32 * count),
        data BLOB NOT NULL
    ) STRICT;
",
    // The durable state host interfaces keep of their own
    // (store/interface_state.rs): entries by interface, capability (its
    // name), space (a `wasi:keyvalue` bucket, ...) and key.
    r"
    CREATE TABLE interface_state (
        interface TEXT NOT NULL,
        capability TEXT NOT NULL,
        space TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (interface, capability, space, key)
    ) STRICT, WITHOUT ROWID;
",
    // Evidence archived and pruned (`hcp_evidence::archive`): one row per
    // archive run that pruned, its signed anchor (the checkpoint the hot
    // log goes on from, the Lamport clock, the pack's digest), and the
    // blobs its pruned artifacts named, until they are collected.
    r"
    CREATE TABLE evidence_archives (
        number INTEGER PRIMARY KEY,
        first_seq INTEGER NOT NULL,
        tree_size INTEGER NOT NULL UNIQUE,
        anchor TEXT NOT NULL,
        pack TEXT NOT NULL,
        pack_bytes INTEGER NOT NULL,
        tasks INTEGER NOT NULL,
        receipts INTEGER NOT NULL,
        blobs_pending TEXT NOT NULL,
        archived_at TEXT NOT NULL
    ) STRICT;
",
    // The newest tasks, a caller's and everybody's (`GET /v1/tasks`),
    // read from an index in their order instead of every task of the
    // caller (or of the store) sorted at each listing: its time grew with
    // the store (docs/benchmarks.md, "Growth"). Neither column changes
    // after the task's row is written, so a change of state writes
    // neither index; the submission's commit writes each once, at its
    // right edge.
    r"
    CREATE INDEX tasks_newest ON tasks (created_at, task_id);
    CREATE INDEX tasks_newest_by_caller ON tasks (caller_id, created_at, task_id);
",
    // The archived receipts' hashes pruned too (`receipt_hashes`): an
    // archive that pruned them keeps the Merkle tree's frontier at its end
    // (JSON `hcp_receipts::merkle::Frontier`), from which the next
    // checkpoints, proofs and consistency from the anchor are made. NULL
    // for an archive before, whose hashes stayed.
    r"
    ALTER TABLE evidence_archives ADD COLUMN frontier TEXT;
",
];
