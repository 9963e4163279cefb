//! Sandbox benchmarks with criterion (detailed statistics per case):
//!
//! - `instantiate_run`: one task of the trivial capability (instantiate,
//!   run, tear down), pooling allocator + `InstancePre` against the plain
//!   embedding (on-demand allocation, `Linker::instantiate` per task).
//! - `cpu_bound`: a CPU-bound guest (xorshift loop) with the epoch deadline
//!   armed against an engine without epoch interruption.
//!
//! Run: `cargo bench -p hcp-sandbox --bench sandbox`. The ratios reported in
//! docs/benchmarks.md come from the interleaved `ratios` bench.

mod common;

use common::{pairs, run_ok, spin_inputs, trivial_inputs};
use criterion::{Criterion, criterion_group, criterion_main};

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let p = pairs();
    let mut group = c.benchmark_group("instantiate_run");
    group.bench_function("pooled_pre_instantiated", |b| {
        b.to_async(&rt)
            .iter(|| run_ok(&p.pooled, &p.store, trivial_inputs()));
    });
    group.bench_function("plain_instantiate", |b| {
        b.to_async(&rt)
            .iter(|| run_ok(&p.plain, &p.store, trivial_inputs()));
    });
    group.finish();
    let mut group = c.benchmark_group("cpu_bound");
    group.sample_size(20);
    group.bench_function("epoch_deadline", |b| {
        b.to_async(&rt)
            .iter(|| run_ok(&p.with_epoch, &p.store, spin_inputs()));
    });
    group.bench_function("no_epoch", |b| {
        b.to_async(&rt)
            .iter(|| run_ok(&p.no_epoch, &p.store, spin_inputs()));
    });
    group.finish();
}

criterion_group!(sandbox, benches);
criterion_main!(sandbox);
