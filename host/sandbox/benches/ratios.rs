//! The sandbox's benchmark pairs, interleaved: each round runs a batch of
//! the baseline and a batch of the candidate back to back, so both see the
//! same machine; the report gives each side's median time per task and the
//! median (and range) of the per-round ratios.
//!
//! Run: `cargo bench -p hcp-sandbox --bench ratios`.

mod common;

use common::{pairs, run_ok, spin_inputs, trivial_inputs};
use hcp_sandbox::{PreparedCapability, TaskStore};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn batch(
    cap: &PreparedCapability,
    store: &Arc<dyn TaskStore>,
    inputs: &Value,
    n: u32,
) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        run_ok(cap, store, inputs.clone()).await;
    }
    start.elapsed() / n
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
async fn pair(
    name: &str,
    candidate: (&str, &PreparedCapability),
    baseline: (&str, &PreparedCapability),
    store: &Arc<dyn TaskStore>,
    inputs: Value,
    rounds: u32,
    per_batch: u32,
) {
    // Warm both up.
    batch(candidate.1, store, &inputs, per_batch).await;
    batch(baseline.1, store, &inputs, per_batch).await;
    let (mut c, mut b, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let tc = batch(candidate.1, store, &inputs, per_batch)
            .await
            .as_secs_f64();
        let tb = batch(baseline.1, store, &inputs, per_batch)
            .await
            .as_secs_f64();
        c.push(tc);
        b.push(tb);
        ratios.push(tb / tc);
    }
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let fmt = |s: f64| {
        if s < 1e-3 {
            format!("{:.1} us", s * 1e6)
        } else {
            format!("{:.2} ms", s * 1e3)
        }
    };
    let (mc, mb, mr) = (fmt(median(c)), fmt(median(b)), median(ratios));
    println!(
        "{name:<16} {:<26} {mc:>10}   {:<18} {mb:>10}   baseline/candidate {mr:.2}x (rounds {lo:.2}x..{hi:.2}x)",
        candidate.0, baseline.0,
    );
    println!(
        "row | {name}: {} against {} | {} {mc} | {} {mb} | baseline/candidate {mr:.2}x (rounds {lo:.2}x..{hi:.2}x) |",
        candidate.0, baseline.0, candidate.0, baseline.0,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then this only checks that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let p = pairs();
    rt.block_on(async {
        pair(
            "instantiate_run",
            ("pooled+InstancePre", &p.pooled),
            ("plain instantiate", &p.plain),
            &p.store,
            trivial_inputs(),
            30,
            500,
        )
        .await;
        pair(
            "cpu_bound",
            ("no epoch", &p.no_epoch),
            ("epoch deadline", &p.with_epoch),
            &p.store,
            spin_inputs(),
            15,
            3,
        )
        .await;
    });
}
