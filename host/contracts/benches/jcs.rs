//! RFC 8785 canonical bytes: `hcp_contracts::jcs` against the reference
//! crate (`serde_json_canonicalizer`) it is tested against, on the inputs a
//! task's receipts canonicalize (a capability's manifest inside the gate's
//! decision input, a host call's arguments), interleaved round by round.
//!
//! ```sh
//! cargo bench -p hcp-contracts --bench jcs            # 15 rounds
//! cargo bench -p hcp-contracts --bench jcs -- 41      # rounds
//! ```

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn time(n: u32, f: impl Fn() -> usize) -> Duration {
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..n {
        bytes += std::hint::black_box(f());
    }
    assert!(bytes > 0);
    start.elapsed() / n
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs bench targets without `--bench`.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rounds = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(15)
        .max(1);
    let manifest: Value = serde_json::from_str(include_str!(
        "../../../plugins/document-analysis/manifest.json"
    ))
    .expect("the manifest");
    let admission = json!({
        "at": "2026-11-27T03:00:00.123456Z",
        "caller": "harness-1",
        "equipment_busy": [],
        "host_check": null,
        "kind": "gate.admission",
        "manifest": manifest,
        "submit": {"capability": "document-analysis", "intent": "summarize",
                   "inputs": {"path": "report.txt", "max_words": 200}},
    });
    let call = json!({"op": "fs.read_file", "path": "/data/in/report.txt",
                      "offset": 0, "length": 16384});
    for (name, value, n) in [
        (
            "the gate's decision input (a manifest inside)",
            &admission,
            2_000,
        ),
        ("a host call's arguments", &call, 50_000),
    ] {
        assert_eq!(
            hcp_contracts::jcs::canonical_bytes(value).expect("ours"),
            serde_json_canonicalizer::to_vec(value).expect("reference"),
        );
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let r = time(n, || {
                serde_json_canonicalizer::to_vec(value)
                    .expect("reference")
                    .len()
            });
            let o = time(n, || {
                hcp_contracts::jcs::canonical_bytes(value)
                    .expect("ours")
                    .len()
            });
            ours.push(o.as_secs_f64() * 1e6);
            theirs.push(r.as_secs_f64() * 1e6);
            ratios.push(r.as_secs_f64() / o.as_secs_f64());
        }
        let (lo, hi) = (
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        );
        println!(
            "row | canonical bytes of {name} | hcp_contracts::jcs {:.2} µs | serde_json_canonicalizer {:.2} µs | {:.2}x faster (rounds {lo:.2}x..{hi:.2}x) |",
            median(ours),
            median(theirs),
            median(ratios),
        );
    }
}
