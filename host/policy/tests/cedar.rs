//! Cedar as the decision point: forbids override permits, reasons come
//! from `@reason`, nothing is allowed without a permit, and a policy that
//! fails to evaluate denies (fail closed).

mod common;

use common::*;
use hcp_contracts::message::RejectReason;
use hcp_policy::{PolicyFile, PolicySet, Stage};

fn shipped_authz() -> String {
    shipped_sources()["authz.cedar"].clone()
}

/// The shipped policies and a forbid on harness-alpha-001 invoking CVD.
fn no_cvd_for_alpha() -> PolicySet {
    let authz = format!(
        "{}\n@id(\"no-cvd-for-alpha\")\nforbid (principal == Hcp::Caller::\"harness-alpha-001\", \
         action == Hcp::Action::\"invoke\", resource == Hcp::Capability::\"cvd-material-synthesis\");\n",
        shipped_authz()
    );
    with_file("authz.cedar", &authz)
}

#[test]
fn a_forbid_overrides_the_permit() {
    let set = no_cvd_for_alpha();
    let r = admit(&set, &cvd_submit()).expect_err("admitted");
    assert_eq!(r.stage, Stage::Authorization);
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "authz.cedar forbids harness-alpha-001 invoke cvd-material-synthesis at R3 with T2 data \
         (policy no-cvd-for-alpha)"
    );
    assert_eq!(r.assessed_risk_level, Some(hcp_contracts::RiskLevel::R3));
    // The other callers are unaffected.
    let mut beta = cvd_submit();
    beta.caller_id = "harness-beta-002".into();
    assert!(admit(&set, &beta).is_ok());
}

#[test]
fn each_decision_sees_its_own_caller_and_capability() {
    // One set decides again and again, building the entities of each
    // caller and capability once: a decision never sees another's.
    let set = no_cvd_for_alpha();
    let mut beta = cvd_submit();
    beta.caller_id = "harness-beta-002".into();
    for _ in 0..3 {
        let r = admit(&set, &cvd_submit()).expect_err("alpha admitted");
        assert_eq!(r.stage, Stage::Authorization);
        let b = admit(&set, &beta).unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(b.caller.as_str(), "harness-beta-002");
        let doc = admit(&set, &document_submit()).unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(doc.authorized_by, ["invoke-within-limits"]);
    }
}

#[test]
fn each_decision_sees_its_own_context() {
    // Decisions are remembered by their entities and context: the same
    // caller asking for the same capability in another context (here T2
    // data, which one forbid refuses) is decided again, each time.
    let authz = format!(
        "{}\n@id(\"no-t2-documents\")\nforbid (principal, action == Hcp::Action::\"invoke\", \
         resource == Hcp::Capability::\"document-analysis\") when {{ context.data == 2 }};\n",
        shipped_authz()
    );
    let set = with_file("authz.cedar", &authz);
    let t1 = document_submit();
    let mut t2 = document_submit();
    t2.constraints
        .as_mut()
        .expect("constraints")
        .data_classification = Some(hcp_contracts::DataClass::T2);
    for _ in 0..3 {
        let a = admit(&set, &t1).unwrap_or_else(|r| panic!("{r:?}"));
        assert_eq!(a.authorized_by, ["invoke-within-limits"]);
        let r = admit(&set, &t2).expect_err("T2 admitted");
        assert_eq!(r.stage, Stage::Authorization);
        assert!(
            r.reason_message.contains("no-t2-documents"),
            "{}",
            r.reason_message
        );
    }
}

/// The shipped set, but harness-local-01 listed for CVD up to R4 in
/// callers.json: only Cedar stands between the pipeline and the furnace.
fn pipeline_listed_for_cvd(authz: &str) -> PolicySet {
    let callers = shipped_sources()["callers.json"].replacen(
        "\"document-analysis\"\n      ],\n      \"max_risk_level\": \"R2\"",
        "\"document-analysis\", \"cvd-material-synthesis\"\n      ],\n      \"max_risk_level\": \"R4\"",
        1,
    );
    assert_ne!(
        callers,
        shipped_sources()["callers.json"],
        "edit did not apply"
    );
    let mut sources = shipped_sources();
    sources.insert("callers.json".into(), callers);
    sources.insert("authz.cedar".into(), authz.to_owned());
    PolicySet::from_sources("test", sources).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn forbid_reasons_come_from_annotations() {
    let mut submit = cvd_submit();
    submit.caller_id = "harness-local-01".into();
    // Both pipeline forbids match: forbidden wins over risk_too_high.
    let set = pipeline_listed_for_cvd(&shipped_authz());
    let r = admit(&set, &submit).expect_err("admitted");
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "authz.cedar forbids harness-local-01 invoke cvd-material-synthesis at R3 with T2 data \
         (policy pipelines-at-most-r2, pipelines-no-physical-resources)"
    );
    // Without the physical-resources forbid, the R2 limit speaks.
    let authz = shipped_authz().replace(
        "when { resource.involves_physical_resources };",
        "when { resource.involves_physical_resources && false };",
    );
    let set = pipeline_listed_for_cvd(&authz);
    let r = admit(&set, &submit).expect_err("admitted");
    assert_eq!(r.reason_code, RejectReason::RiskTooHigh);
    assert_eq!(
        r.reason_message,
        "authz.cedar forbids harness-local-01 invoke cvd-material-synthesis at R3 with T2 data \
         (policy pipelines-at-most-r2)"
    );
}

#[test]
fn nothing_is_allowed_without_a_permit() {
    let authz = "@id(\"approve-only\")\npermit (principal, action == Hcp::Action::\"approve\", resource);\n";
    let set = with_file("authz.cedar", authz);
    let r = admit(&set, &document_submit()).expect_err("admitted");
    assert_eq!(r.reason_code, RejectReason::Forbidden);
    assert_eq!(
        r.reason_message,
        "no policy in authz.cedar permits harness-local-01 invoke document-analysis at R1 with T1 data"
    );
}

#[test]
fn a_policy_that_fails_to_evaluate_denies() {
    // Valid against the schema, but overflows when evaluated. Cedar skips
    // an erroring policy, which would let this broken forbid allow; the
    // gate denies instead.
    let authz = format!(
        "{}\n@id(\"broken\")\nforbid (principal, action, resource) when {{ context.risk + 9223372036854775807 > 0 }};\n",
        shipped_authz()
    );
    let set = with_file("authz.cedar", &authz);
    let r = admit(&set, &document_submit()).expect_err("admitted");
    assert_eq!(r.stage, Stage::Authorization);
    assert_eq!(r.reason_code, RejectReason::InternalError);
    assert!(
        r.reason_message.starts_with(
            "authorization failed closed for harness-local-01 invoke document-analysis at R1 with \
             T1 data: error while evaluating policy `broken`: integer overflow"
        ),
        "{}",
        r.reason_message
    );
}

#[test]
fn a_broken_policy_file_loads_no_policy_set() {
    let mut sources = shipped_sources();
    sources.insert(
        "authz.cedar".into(),
        "@id(\"x\")\npermit (principal, action, resource) when { context.nope };\n".into(),
    );
    let e = PolicySet::from_sources("test", sources).expect_err("loaded");
    assert_eq!(
        e.to_string(),
        "test: invalid policy set:\n  \
         authz.cedar: line 2, column 45: for policy `x`, attribute `nope` in context for \
         Hcp::Action::\"approve\" not found (help: did you mean `data`?)\n  \
         authz.cedar: line 2, column 45: for policy `x`, attribute `nope` in context for \
         Hcp::Action::\"invoke\" not found (help: did you mean `data`?)"
    );
    assert!(
        PolicyFile::Authz
            .check("permit (principal, action, resource)")
            .is_err()
    );
}

/// Cedar text nested deeper than the parser can go is refused with a
/// problem, not a crash: Cedar's parser recurses once per level with no
/// bound of its own, and 100,000 parentheses (a few hundred KB, within the
/// 1 MiB a policy file may be, and what a pack's recorded policy can hold
/// for `hcp replay`) overflowed the thread's stack, which aborts the
/// process.
#[test]
fn cedar_nested_past_a_bound_is_a_problem_not_a_crash() {
    for (open, close, times) in [
        ("(", ")", 100_000),
        ("[", "]", 100_000),
        ("!", "", 100_000),
        ("-", "", 100_000),
        ("if true then ", " else 1", 40_000),
    ] {
        let deep = format!(
            "{}\n@id(\"deep\")\nforbid (principal, action, resource) when {{ {}1{} == 1 }};\n",
            shipped_authz(),
            open.repeat(times),
            close.repeat(times)
        );
        let sources = {
            let mut s = shipped_sources();
            s.insert("authz.cedar".to_owned(), deep);
            s
        };
        let e = PolicySet::from_sources("test", sources).expect_err("loaded");
        assert!(
            e.to_string().contains("nested more than"),
            "{open}{close}: {e}"
        );
    }
}
