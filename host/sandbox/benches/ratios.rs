//! The sandbox's benchmark pairs, interleaved: each round runs a batch of
//! the baseline and a batch of the candidate back to back, so both see the
//! same machine; the report gives each side's median time per task and the
//! median (and range) of the per-round ratios.
//!
//! After the instantiation pair, the candidate's tasks are run once more
//! with the sandbox's phase spans timed (`hcp::phase`: `sandbox.setup`,
//! `sandbox.instantiate`, `sandbox.call`, `sandbox.release`), and the
//! report gives what a ready instance (made ahead of its task, off the
//! task's path) could take off each task at most: the ratio it could reach
//! against the same baseline if its instantiation cost the task nothing,
//! and if its setup and its release (the finished store dropped) did not
//! either.
//!
//! Run: `cargo bench -p hcp-sandbox --bench ratios`.

mod common;

use common::{pairs, request, run_ok, spin_inputs, trivial_inputs};
use hcp_sandbox::{PreparedCapability, RunResult, TaskStore};
use hcp_tests::phases::Phases;
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
) -> (f64, f64) {
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
    let (sc, sb) = (median(c), median(b));
    let (mc, mb, mr) = (fmt(sc), fmt(sb), median(ratios));
    println!(
        "{name:<16} {:<26} {mc:>10}   {:<18} {mb:>10}   baseline/candidate {mr:.2}x (rounds {lo:.2}x..{hi:.2}x)",
        candidate.0, baseline.0,
    );
    println!(
        "row | {name}: {} against {} | {} {mc} | {} {mb} | baseline/candidate {mr:.2}x (rounds {lo:.2}x..{hi:.2}x) |",
        candidate.0, baseline.0, candidate.0, baseline.0,
    );
    (sc, sb)
}

/// The candidate's tasks with their phases timed: what a ready instance
/// could take off the task's path at most, and the ratio against
/// `baseline` (seconds per task, measured beside `candidate` in the pair)
/// that would leave.
#[allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
fn ready_instance_bound(
    rt: &tokio::runtime::Runtime,
    cap: &PreparedCapability,
    store: &Arc<dyn TaskStore>,
    (candidate, baseline): (f64, f64),
) {
    let phases = Phases::default();
    // This thread only: the pair above ran with no subscriber, and the
    // tasks below run on it (`block_on` polls them here).
    let mut requests = Vec::new();
    tracing::subscriber::with_default(phases.subscriber(), || {
        rt.block_on(async {
            for _ in 0..5000 {
                // The task's request, with its governor (a policy scope
                // compiled for the task's session).
                let t = Instant::now();
                let request = request(cap, trivial_inputs());
                requests.push(t.elapsed().as_secs_f64());
                let run = cap.run(request, store.clone()).await;
                assert!(
                    matches!(run.result, RunResult::Completed { .. }),
                    "{:?}",
                    run.result
                );
            }
        });
    });
    let request = median(requests);
    let spans = phases.take();
    let phase = |name: &str| {
        spans.get(name).map_or(0.0, |d| {
            median(d.iter().map(Duration::as_secs_f64).collect())
        })
    };
    let (setup, instantiate, call, release) = (
        phase("sandbox.setup"),
        phase("sandbox.instantiate"),
        phase("sandbox.call"),
        phase("sandbox.release"),
    );
    let us = |s: f64| format!("{:.1} us", s * 1e6);
    println!(
        "ready_instance   the candidate's phases (medians of 5000 tasks): request {}, setup {}, instantiate {}, call {}, release {}; the rest (its outputs checked, the log) {}",
        us(request),
        us(setup),
        us(instantiate),
        us(call),
        us(release),
        us((candidate - request - setup - instantiate - call - release).max(0.0)),
    );
    // What stays on the task's path with a ready instance: everything but
    // its instantiation; at best also without the store's setup (made
    // ahead with the instance, the task's own parts bound to it later)
    // and its release (the finished store dropped on another thread); and
    // with the task's request and governor made before it is timed, as
    // neither side of the pair does.
    let bound = |off: f64| {
        let left = (candidate - off).max(1e-9);
        format!("{} per task, {:.2}x", us(left), baseline / left)
    };
    println!(
        "row | ready instance: the most it could reach against plain instantiate | its instantiation off the task's path: {} | also its setup and release: {} | also the request made before: {} | target >= 10x |",
        bound(instantiate),
        bound(instantiate + setup + release),
        bound(instantiate + setup + release + request),
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
    let instantiation = rt.block_on(pair(
        "instantiate_run",
        ("pooled+InstancePre", &p.pooled),
        ("plain instantiate", &p.plain),
        &p.store,
        trivial_inputs(),
        30,
        500,
    ));
    ready_instance_bound(&rt, &p.pooled, &p.store, instantiation);
    rt.block_on(async {
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
