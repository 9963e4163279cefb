//! `wasi:keyvalue` decided alone: a bucket not granted, a write to a
//! read-only bucket, a value, a key count or a bucket over its limit are
//! denied with their reason codes; a session granted no bucket writes
//! nothing; the calls read back from their JSON form.

use super::{NOW, facts};
use crate::common::shipped;
use hcp_contracts::interfaces::Grant;
use hcp_contracts::manifest::{Access, GrantItem};
use hcp_policy::pep::{Call, Counters, Op, Scope, SessionFacts, decide};

fn kv_scope() -> Scope {
    Scope::compile(&shipped(), kv_facts()).expect("scope")
}

fn kv_facts() -> SessionFacts {
    let mut f = facts();
    f.surface.table.set(
        Grant::Keyvalue,
        vec![
            GrantItem {
                name: "counts".into(),
                access: Some(Access::ReadWrite),
            },
            GrantItem {
                name: "reference".into(),
                access: Some(Access::ReadOnly),
            },
        ],
    );
    for (name, value) in [("kv_bytes", 100), ("kv_keys", 3), ("kv_value_bytes", 10)] {
        f.limits.table.insert(name.into(), value);
    }
    f
}

fn reason(scope: &Scope, call: &Call<'_>) -> &'static str {
    decide(scope, &Counters::default(), call, NOW).reason
}

#[test]
fn granted_buckets_within_limits_are_allowed() {
    let s = kv_scope();
    for call in [
        Call::kv(Op::KvOpen, "counts", "", 0, 0, 0),
        Call::kv(Op::KvOpen, "reference", "", 0, 0, 0),
        Call::kv(Op::KvGet, "reference", "k", 0, 0, 0),
        Call::kv(Op::KvExists, "reference", "k", 0, 0, 0),
        Call::kv(Op::KvListKeys, "reference", "", 0, 0, 0),
        Call::kv(Op::KvSet, "counts", "k", 10, 3, 100),
        Call::kv(Op::KvIncrement, "counts", "n", 2, 1, 3),
        Call::kv(Op::KvDelete, "counts", "k", 0, 0, 0),
    ] {
        assert_eq!(reason(&s, &call), "ALLOW", "{call:?}");
    }
}

#[test]
fn a_bucket_not_granted_is_not_found() {
    let s = kv_scope();
    let d = decide(
        &s,
        &Counters::default(),
        &Call::kv(Op::KvOpen, "secrets", "", 0, 0, 0),
        NOW,
    );
    assert_eq!(d.reason, "DENY_TOOL_NOT_FOUND");
    assert!(
        d.message.contains("not a bucket of grants.keyvalue"),
        "{}",
        d.message
    );
    assert_eq!(
        reason(&s, &Call::kv(Op::KvGet, "secrets", "k", 0, 0, 0)),
        "DENY_TOOL_NOT_FOUND"
    );
}

#[test]
fn a_read_only_bucket_is_not_written() {
    let s = kv_scope();
    for op in [Op::KvSet, Op::KvDelete, Op::KvIncrement] {
        let d = decide(
            &s,
            &Counters::default(),
            &Call::kv(op, "reference", "k", 1, 1, 2),
            NOW,
        );
        assert_eq!(d.reason, "DENY_TOOL_NOT_FOUND", "{op}");
        assert!(d.message.contains("read-only"), "{}", d.message);
    }
}

#[test]
fn writes_over_the_limits_are_budget_exceeded() {
    let s = kv_scope();
    for (call, limit) in [
        (
            Call::kv(Op::KvSet, "counts", "k", 11, 1, 12),
            "kv_value_bytes",
        ),
        (Call::kv(Op::KvSet, "counts", "k", 1, 4, 20), "kv_keys"),
        (Call::kv(Op::KvSet, "counts", "k", 1, 1, 101), "kv_bytes"),
        (
            Call::kv(Op::KvIncrement, "counts", "n", 2, 4, 20),
            "kv_keys",
        ),
    ] {
        let d = decide(&s, &Counters::default(), &call, NOW);
        assert_eq!(d.reason, "BUDGET_EXCEEDED", "{call:?}");
        assert!(d.message.contains(limit), "{}", d.message);
    }
}

#[test]
fn keys_are_non_empty_and_bounded() {
    let s = kv_scope();
    assert_eq!(
        reason(&s, &Call::kv(Op::KvGet, "counts", "", 0, 0, 0)),
        "DENY_ARGS_INVALID"
    );
    let long = "k".repeat(1025);
    assert_eq!(
        reason(&s, &Call::kv(Op::KvGet, "counts", &long, 0, 0, 0)),
        "DENY_ARGS_INVALID"
    );
}

#[test]
fn without_a_grant_nothing_is_reached() {
    let s = Scope::compile(&shipped(), facts()).expect("scope");
    assert_eq!(
        reason(&s, &Call::kv(Op::KvOpen, "counts", "", 0, 0, 0)),
        "DENY_TOOL_NOT_FOUND"
    );
}

#[test]
fn a_call_reads_back_from_its_json() {
    let call = Call::kv(Op::KvSet, "counts", "k", 10, 3, 100);
    let json = serde_json::to_value(&call).expect("json");
    assert_eq!(
        json,
        serde_json::json!({"args": {"bytes": 10, "key": "k", "keys": 3, "total": 100}, "op": "kv.set", "target": "counts"})
    );
    assert_eq!(Call::from_value(&json).expect("call"), call);
}

/// The session's facts record the granted buckets and their limits as
/// `surface.keyvalue` and `limits.kv_*`, after the fields of before, and
/// read back; an unknown field of either is refused.
#[test]
fn the_facts_record_buckets_and_limits() {
    let f = kv_facts();
    let facts = serde_json::to_value(&f).expect("json");
    assert_eq!(
        facts["surface"]["keyvalue"],
        serde_json::json!([
            {"access": "read-write", "bucket": "counts"},
            {"access": "read-only", "bucket": "reference"}
        ])
    );
    assert_eq!(facts["limits"]["kv_keys"], 3);
    let mut unknown = facts.clone();
    unknown["limits"]["kv_nope"] = 1.into();
    assert!(serde_json::from_value::<SessionFacts>(unknown).is_err());
    let mut unknown = facts.clone();
    unknown["surface"]["nope"] = serde_json::json!([]);
    assert!(serde_json::from_value::<SessionFacts>(unknown).is_err());
    let back: SessionFacts = serde_json::from_value(facts).expect("facts");
    assert_eq!(back, f);
}
