//! `hcp review` of each example bundle against golden files (text,
//! Markdown, JSON), and of an unsigned one.

use super::*;

#[test]
fn review_of_each_example_bundle() {
    let lab = Lab::new();
    lab.trust("hcp-examples");
    for plugin in [
        "document-analysis",
        "cvd-material-synthesis",
        "hid-assistant",
    ] {
        let bundle = lab.example(plugin);
        // Text, for a terminal.
        let out = lab.hcp.run(&["review", s(&bundle)]);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        let text = sizes(
            &lab.portable(&stdout(&out)),
            &["bundle ", "  component.wasm "],
        );
        golden(&format!("review-{plugin}.txt"), &text);
        // Markdown, for a ticket.
        let out = lab.hcp.run(&["review", "--markdown", s(&bundle)]);
        assert_eq!(code(&out), 0);
        let md = sizes(
            &lab.portable(&stdout(&out)),
            &["| bundle |", "| `component.wasm` ("],
        );
        golden(&format!("review-{plugin}.md"), &md);
        // JSON, for tools: sizes depend on the build, so they are replaced.
        let out = lab.hcp.run(&["review", "--json", s(&bundle)]);
        assert_eq!(code(&out), 0);
        let mut v: Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(v["outcome"], "pass");
        assert!(v["bytes"].as_u64().is_some() && v["component_bytes"].as_u64().is_some());
        v["bytes"] = json!("<n>");
        v["component_bytes"] = json!("<n>");
        let json = serde_json::to_string_pretty(&v).expect("json") + "\n";
        golden(&format!("review-{plugin}.json"), &lab.portable(&json));
        let checks: Vec<&str> = v["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .map(|c| c["check"].as_str().expect("check"))
            .collect();
        // `approval` only for a declaration that requires it.
        let approval = plugin == "cvd-material-synthesis";
        let expected: Vec<&str> = [
            "signature",
            "trust",
            "world",
            "manifest",
            "audit",
            "grants",
            "policy",
            "envelope",
        ]
        .into_iter()
        .chain(approval.then_some("approval"))
        .chain(["upgrade"])
        .collect();
        assert_eq!(checks, expected);
    }
    let cvd = lab.work.path().join("cvd-material-synthesis.hcpb");
    let out = lab.hcp.run(&["review", "--json", s(&cvd)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(v["imports"]
        .as_array()
        .expect("imports")
        .iter()
        .any(|i| i["name"] == "hcp:capability/instrument@1.0.0" && i["docs"]["source"] == "wit"));

    // Unsigned and untrusted bundles: the verdicts say so, exit 1.
    let unsigned = lab.pack(
        &Path::new(REPO_ROOT).join("plugins/document-analysis"),
        "unsigned.hcpb",
    );
    let out = lab.hcp.run(&["review", s(&unsigned)]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(
        text.contains("verdict: installable only with an explicit flag (see FLAG below)\n"),
        "{text}"
    );
    assert!(
        text.contains("  FLAG  signature  unsigned: nobody vouches for this bundle;"),
        "{text}"
    );
}

/// A capability that requires human approval, which the operator's policy
/// can never ask for (nothing assesses its tasks at R3 or above): `hcp
/// review` warns (it showed every check passing) and `hcp install` warns
/// too; both still let it in.
#[test]
fn a_declared_approval_the_policy_never_asks_for_is_a_warning() {
    let lab = Lab::new();
    lab.trust("acme");
    let dir = lab.plugin("approved", |m| {
        m.set("/capability/safety/requires_human_approval", json!(true))
            .set("/capability/safety/risk_ceiling", json!("R4"))
    });
    let bundle = lab.pack(&dir, "approved.hcpb");
    lab.sign(&bundle, "acme");
    let why = "the declaration requires human approval, but this policy never asks for it: \
               approval is asked from R3, and no task of trivial can be admitted at R3 or above \
               (base R1 from default; no escalation rule or unattended window raises it; ceiling \
               R4); its tasks run without one. Give it a base of R3 or above in risk.json, or an \
               escalation rule";
    let out = lab.hcp.run(&["review", s(&bundle)]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("verdict: installable (see WARN below)\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("  WARN  approval   {why}\n")),
        "{text}"
    );
    let out = lab.hcp.run(&["review", "--json", s(&bundle)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(
        v["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .any(|c| c["check"] == "approval" && c["status"] == "warn" && c["detail"] == why),
        "{v:#}"
    );
    let out = lab.ok(&["install", s(&bundle)]);
    assert_eq!(stderr(&out), format!("WARNING: trivial@1.0.0: {why}\n"));
}

/// `component.wasm` with a custom section appended: the same program,
/// different bytes (a custom section is allowed at the end of a component).
fn with_custom_section(wasm: &[u8]) -> Vec<u8> {
    let name = b"hcp-test";
    let payload = b"another build";
    let size = 1 + name.len() + payload.len();
    let size = u8::try_from(size).expect("a one-byte LEB128 size");
    let mut out = wasm.to_vec();
    out.extend_from_slice(&[0, size, u8::try_from(name.len()).expect("short")]);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

#[test]
fn review_flags_unused_grants_and_a_component_that_did_not_change() {
    let lab = Lab::new();
    lab.trust("acme");
    let v1 = lab.trivial("1.0.0", json!({}));
    lab.ok(&["install", s(&v1)]);

    // 1.1.0: the same component, now granted the network it never imports.
    let v2 = lab.trivial(
        "1.1.0",
        json!({"network": [{"host": "example.com", "port": 443}]}),
    );
    let out = lab.hcp.run(&["review", s(&v2)]);
    // Widening: installable only with --accept-new-grants.
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "  WARN  grants     granted but used by no import: grants.network (example.com:443): \
             no wasi:sockets or wasi:http import; ask the publisher to drop it\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  FLAG  upgrade    widens what trivial@1.0.0 may do (1 change); installable only with \
             --accept-new-grants; component byte-identical to 1.0.0: only the manifest changed\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "compared with the installed trivial@1.0.0\n  component byte-identical to 1.0.0: only the manifest changed\n"
        ),
        "{text}"
    );
    let out = lab.hcp.run(&["review", "--json", s(&v2)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["upgrade"]["same_component"], true, "{v}");
    let grants = v["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .find(|c| c["check"] == "grants")
        .expect("a grants verdict");
    assert_eq!(grants["status"], "warn", "{grants}");
    let out = lab.hcp.run(&["review", "--markdown", s(&v2)]);
    assert!(
        stdout(&out).contains("component byte-identical to 1.0.0: only the manifest changed.\n"),
        "{}",
        stdout(&out)
    );

    // 1.2.0: another build of the component and no grants: nothing to note.
    let dir = lab.plugin("trivial-1.2.0", |m| {
        m.set("/capability/version", json!("1.2.0"))
            .set("/grants", json!({}))
    });
    let wasm = std::fs::read(dir.join("trivial.wasm")).expect("read");
    std::fs::write(dir.join("trivial.wasm"), with_custom_section(&wasm)).expect("write");
    let v3 = lab.pack(&dir, "trivial-1.2.0.hcpb");
    lab.sign(&v3, "acme");
    let out = lab.hcp.run(&["review", s(&v3)]);
    let text = stdout(&out);
    assert_eq!(code(&out), 0, "{text}{}", stderr(&out));
    assert!(!text.contains("byte-identical"), "{text}");
    assert!(
        text.contains("  pass  grants     none beyond what every capability has\n"),
        "{text}"
    );
    assert!(
        text.contains("  pass  upgrade    allows nothing trivial@1.0.0 did not\n"),
        "{text}"
    );
    let out = lab.hcp.run(&["review", "--json", s(&v3)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["upgrade"]["same_component"], false, "{v}");
}

#[test]
fn review_shows_the_envelope_the_operators_policy_leaves() {
    let lab = Lab::new();
    lab.trust("hcp-examples");
    let bundle = lab.example("cvd-material-synthesis");

    // The shipped policy tightens the publisher's envelope.
    let out = lab.hcp.run(&["review", "--json", s(&bundle)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["envelope"]["parameters"]["temperature"]["max"], 1000.0);
    let effective = &v["effective_envelope"];
    assert_eq!(effective["has_entry"], true, "{effective}");
    assert_eq!(
        effective["envelope"]["parameters"]["temperature"]["max"],
        950.0
    );
    assert_eq!(effective["envelope"]["parameters"]["pressure"]["max"], 3.0);
    assert_eq!(
        effective["envelope"]["parameters"]["gas_flow_rate"]["max"],
        200.0
    );
    assert!(
        effective["envelope"]["prohibited_actions"]
            .as_array()
            .expect("actions")
            .contains(&json!("open_chamber_above_200c"))
    );
    let out = lab.hcp.run(&["review", s(&bundle)]);
    let text = stdout(&out);
    for line in [
        "  pass  envelope   tasks run under the publisher's envelope as <repo>/policies/envelopes.json tightens it: \
         2 parameters bounded more tightly, 1 prohibited action and 1 emergency procedure added\n",
        "    temperature    max 1000 celsius (hard limit)  max 950 celsius (hard limit)\n",
        "    gas_flow_rate  max 200 sccm (hard limit)      same\n",
        "    open_chamber_above_200c (added by the policy)\n",
    ] {
        assert!(lab.portable(&text).contains(line), "no {line:?} in\n{text}");
    }

    // A policy that loosens is ignored (and said so); one the gate cannot
    // merge means every task would be refused.
    let policies = lab.work.path().join("policies");
    std::fs::create_dir_all(&policies).expect("mkdir");
    for entry in std::fs::read_dir(Path::new(REPO_ROOT).join("policies")).expect("read") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), policies.join(entry.file_name())).expect("copy");
    }
    let envelopes = |temperature: Value| {
        let doc = json!({"capabilities": {"cvd-material-synthesis": {
            "parameters": {"temperature": temperature}
        }}});
        std::fs::write(policies.join("envelopes.json"), doc.to_string()).expect("write");
    };
    envelopes(json!({"max": 1200, "unit": "celsius", "hard_limit": true}));
    let out = lab
        .hcp
        .run(&["--policies", s(&policies), "review", s(&bundle)]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let text = lab.portable(&stdout(&out));
    assert!(
        text.contains("verdict: installable (see WARN below)\n"),
        "{text}"
    );
    assert!(
        text.contains("  WARN  envelope   ") && text.contains("looser policy values ignored: "),
        "{text}"
    );
    assert!(
        text.contains("    temperature    max 1000 celsius (hard limit)  same\n"),
        "{text}"
    );
    envelopes(json!({"max": 3, "unit": "atm", "hard_limit": true}));
    let out = lab
        .hcp
        .run(&["--policies", s(&policies), "review", "--json", s(&bundle)]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert!(v["effective_envelope"].is_null(), "{v}");
    let verdict = v["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .find(|c| c["check"] == "envelope")
        .expect("an envelope verdict")
        .clone();
    assert_eq!(verdict["status"], "warn", "{verdict}");
    assert!(
        verdict["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("the gate would refuse every task")
                && d.contains("do not convert")),
        "{verdict}"
    );
}

/// A bundle's own text cannot forge a line of the review: an escape
/// sequence in its description (move up, erase the line, print a verdict,
/// hide what follows) is shown, not done, in text and in Markdown.
#[test]
fn a_description_cannot_forge_a_line_of_the_review() {
    let lab = Lab::new();
    let forged = "A capability.\u{1b}[1A\u{1b}[2Kverdict: ok, nothing to review\r\u{202e}\u{1b}[8m";
    let dir = lab.plugin("forger", |m| {
        m.set("/capability/description", json!(forged))
    });
    let bundle = lab.pack(&dir, "forger.hcpb");
    for format in [&[][..], &["--markdown"][..]] {
        let mut args = vec!["review"];
        args.extend_from_slice(format);
        args.push(s(&bundle));
        let out = lab.hcp.run(&args);
        let text = stdout(&out);
        assert!(
            !text.contains(['\u{1b}', '\r', '\u{202e}']),
            "{format:?}: {text:?}"
        );
        assert!(
            text.contains(r"A capability.\u{1b}[1A\u{1b}[2Kverdict: ok, nothing to review\u{d}\u{202e}\u{1b}[8m"),
            "{format:?}: {text}"
        );
    }
}
