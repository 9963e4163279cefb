//! The shipped policy set: every file parses and checks, the set loads, and
//! its hash is stable.

mod common;

use common::{policies_dir, shipped, shipped_sources};
use hcp_policy::{PolicyFile, PolicySet};

#[test]
fn every_shipped_file_checks_alone() {
    for file in PolicyFile::ALL {
        let path = policies_dir().join(file.name());
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(problems) = file.check(&text) {
            panic!(
                "{}: {}",
                file.name(),
                hcp_contracts::problem::list(&problems)
            );
        }
    }
}

#[test]
fn the_shipped_set_loads_with_the_seed_callers() {
    let set = shipped();
    let ids: Vec<&str> = set.callers().keys().map(|c| c.as_str()).collect();
    assert_eq!(
        ids,
        [
            "harness-alpha-001",
            "harness-beta-002",
            "harness-local-01",
            "operator-lab-01"
        ]
    );
    assert_eq!(
        set.authz().policy_ids(),
        [
            "invoke-within-limits",
            "no-self-approval",
            "operators-approve-within-limits",
            "pipelines-at-most-r2",
            "pipelines-no-physical-resources",
        ]
    );
    assert!(set.risk_profile("cvd-material-synthesis").is_some());
    assert!(set.envelope_policy("cvd-material-synthesis").is_some());
    assert!(set.caller("nobody").is_none());
}

#[test]
fn policy_hash_is_canonical_and_replayable() {
    let set = shipped();
    let hash = set.policy_hash().to_owned();
    assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
    // Loading again, or from the recorded sources, gives the same hash.
    assert_eq!(shipped().policy_hash(), hash);
    let replayed = PolicySet::from_sources("receipt", set.sources().clone()).expect("replay");
    assert_eq!(replayed.policy_hash(), hash);
    // Reformatting a JSON file does not change it ...
    let mut sources = shipped_sources();
    let value: serde_json::Value = serde_json::from_str(&sources["budgets.json"]).expect("json");
    sources.insert(
        "budgets.json".into(),
        serde_json::to_string(&value).expect("compact"),
    );
    let reformatted = PolicySet::from_sources("test", sources.clone()).expect("loads");
    assert_eq!(reformatted.policy_hash(), hash);
    // ... changing a value does.
    let changed = sources["budgets.json"].replace("10000", "10001");
    sources.insert("budgets.json".into(), changed);
    let changed = PolicySet::from_sources("test", sources).expect("loads");
    assert_ne!(changed.policy_hash(), hash);
}

/// The hash of a set with and without an interface's own file
/// (`config.json`), pinned: the values were computed apart from this crate
/// (Python, `json.dumps(sort_keys=True, separators=(",", ":"))` over
/// `{"<file name>": <content>}`, as `PolicySet::policy_hash` documents),
/// so that loading the file through the interfaces' table hashes what
/// `config.json` hashed when it was a file of its own.
#[test]
fn the_hash_with_and_without_an_interface_file_is_pinned() {
    assert_eq!(
        shipped().policy_hash(),
        "sha256:2f379d299d8066f0d2348a4959d56f8c3f9592d8ff10bac332e39bfce4f73524"
    );
    let mut sources = shipped_sources();
    sources.remove("config.json");
    let without = PolicySet::from_sources("test", sources.clone()).expect("loads");
    assert_eq!(
        without.policy_hash(),
        "sha256:e89e26dd281dc1db101553d1d5d5ffe3f6525fd1fabc2050499b5207c1a5a91a"
    );
    sources.insert(
        "config.json".into(),
        r#"{"capabilities": {"probe": {"greeting": {"value": "hello"}, "api_token": {"secret": true}}}}"#
            .into(),
    );
    let with = PolicySet::from_sources("test", sources.clone()).expect("loads");
    assert_eq!(
        with.policy_hash(),
        "sha256:836753f9e257a423db462a804a58ef428439b08320d1c4874d3cebedabff775b"
    );
    // Its problems are the set's, by file, as any other file's.
    sources.insert(
        "config.json".into(),
        r#"{"capabilities": {"probe": {"both": {"value": "v", "secret": true}}}, "extra": 1}"#
            .into(),
    );
    let e = PolicySet::from_sources("policies", sources).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "policies: invalid policy set:\n  \
         config.json: (document): Additional properties are not allowed ('extra' was unexpected)\n  \
         config.json: /capabilities/probe/both: {\"value\":\"v\",\"secret\":true} is not valid \
         under any of the schemas listed in the 'oneOf' keyword"
    );
}

#[test]
fn every_problem_of_every_file_is_reported_at_once() {
    let mut sources = shipped_sources();
    sources.remove("envelopes.json");
    sources.insert("README.md".into(), "# notes".into());
    let budgets = sources["budgets.json"].replace("harness-local-01", "harness-gone-99");
    sources.insert("budgets.json".into(), budgets);
    let risk =
        sources["risk.json"].replace("\"op\": \"gt\"", "\"op\": \"gt\", \"message\": \"hot\"");
    sources.insert("risk.json".into(), risk);
    let authz = sources["authz.cedar"].replace("context.risk > 2", "context.risk > \"R2\"");
    sources.insert("authz.cedar".into(), authz);
    let e = PolicySet::from_sources("policies", sources).expect_err("loaded");
    assert_eq!(
        e.to_string(),
        "policies: invalid policy set:\n  \
         README.md: (document): not a policy file (expected callers.json, risk.json, \
         context.json, budgets.json, envelopes.json, authz.cedar, dispatch.json, config.json)\n  \
         risk.json: /capabilities/cvd-material-synthesis/rules/0: Additional properties are not \
         allowed ('message' was unexpected)\n  \
         envelopes.json: (document): missing: every policy file is required (an empty one says \
         \"nothing here\")\n  \
         authz.cedar: line 30, column 23: for policy `pipelines-at-most-r2`, unexpected type: \
         expected Long but saw String\n  \
         budgets.json: /callers/harness-gone-99: no caller harness-gone-99 in callers.json"
    );
}

#[test]
fn load_names_unreadable_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in shipped_sources() {
        if name != "context.json" {
            std::fs::write(dir.path().join(name), text).expect("write");
        }
    }
    let e = PolicySet::load(dir.path()).expect_err("loaded");
    let shown = e
        .to_string()
        .replace(&dir.path().display().to_string(), "<dir>");
    assert_eq!(
        shown,
        "<dir>: invalid policy set:\n  \
         context.json: (document): cannot read <dir>/context.json: No such file or directory (os error 2)"
    );
}
