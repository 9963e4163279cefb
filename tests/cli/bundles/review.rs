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
        assert_eq!(
            checks,
            [
                "signature",
                "trust",
                "world",
                "manifest",
                "audit",
                "policy",
                "upgrade"
            ]
        );
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
