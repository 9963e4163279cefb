//! What governance costs on the same component: the seed's R1
//! document-analysis task run by the host (in process, one client: the
//! gate, the session token, the PEP on every host call, receipts durable
//! and covered by a signed checkpoint before the answer, the task's state
//! in SQLite) against the same component run on bare wasmtime: a plain
//! embedding as a user of wasmtime writes one, with a stock WASI context
//! (the same document directory preopened read-only, nothing else), the
//! component's `hcp:capability/log` writing to nowhere, no gate, no
//! receipts, no store.
//!
//! ```sh
//! cargo bench -p hcp --bench governance            # 15 rounds of 40 tasks
//! cargo bench -p hcp --bench governance -- 30 100  # rounds, tasks per round
//! ```
//!
//! Each round runs a batch of governed tasks and a batch of bare runs back
//! to back (interleaved, so both see the same machine); the report gives
//! each side's median and p99 task time over all rounds and the median
//! (and range) of the per-round ratios of mean task times. The bare side
//! instantiates each task from a `CapabilityPre` (compiled and linked
//! once), as a competent embedding does, and checks that the outputs are
//! the governed task's.

#![allow(clippy::print_stdout)] // a bench binary reports on stdout

mod common;

use common::{example, in_process_task, median, open_host, range, runtime};
use hcp::engine::Host;
use hcp_tests::REPO_ROOT;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The plain embedding: bindings generated from `wit/`, the stock WASI
/// and HTTP contexts, a `log` that writes nowhere.
mod bare {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "capability",
        imports: { default: async },
        exports: { default: async },
    });

    use self::hcp::capability::{log, types};
    use super::REPO_ROOT;
    use serde_json::Value;
    use std::path::Path;
    use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
    use wasmtime::{Config, Engine, Store};
    use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
    use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

    /// A bare embedding's store data: the stock WASI and HTTP contexts.
    struct Bare {
        wasi: WasiCtx,
        http: WasiHttpCtx,
        table: ResourceTable,
    }

    impl WasiView for Bare {
        fn ctx(&mut self) -> WasiCtxView<'_> {
            WasiCtxView {
                ctx: &mut self.wasi,
                table: &mut self.table,
            }
        }
    }

    impl WasiHttpView for Bare {
        fn http(&mut self) -> WasiHttpCtxView<'_> {
            WasiHttpCtxView {
                ctx: &mut self.http,
                table: &mut self.table,
                hooks: wasmtime_wasi_http::default_hooks(),
            }
        }
    }

    impl types::Host for Bare {}

    impl log::Host for Bare {
        async fn write(&mut self, level: log::Level, message: String, fields: Vec<log::Field>) {
            std::hint::black_box((level, message, fields));
        }
    }

    /// The component, compiled and linked once.
    pub(crate) struct BareRunner {
        engine: Engine,
        pre: CapabilityPre<Bare>,
        documents: std::path::PathBuf,
        task: exports::Task,
    }

    mod exports {
        pub(crate) use super::hcp::capability::types::{DataClassification, RiskLevel, Task};
    }

    impl BareRunner {
        pub(crate) fn new(inputs: &Value) -> Self {
            let engine = Engine::new(&Config::new()).expect("engine");
            let dir = Path::new(REPO_ROOT).join("plugins/document-analysis");
            let component = Component::from_file(
                &engine,
                dir.join("../target/wasm32-wasip2/release/document_analysis.wasm"),
            )
            .expect("document-analysis component (built by the tests' build script)");
            let mut linker = Linker::<Bare>::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
            wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).expect("wasi:http");
            types::add_to_linker::<Bare, HasSelf<Bare>>(&mut linker, |s| s).expect("types");
            log::add_to_linker::<Bare, HasSelf<Bare>>(&mut linker, |s| s).expect("log");
            let pre = CapabilityPre::new(linker.instantiate_pre(&component).expect("link"))
                .expect("capability world");
            let task = exports::Task {
                task_id: "bare".into(),
                session_id: "bare".into(),
                capability: "document-analysis".into(),
                capability_version: "1.0.0".into(),
                caller_id: "harness-local-01".into(),
                intent: "benchmark".into(),
                inputs: inputs.to_string(),
                constraints: "{}".into(),
                context: None,
                resume_from: None,
                risk_level: exports::RiskLevel::R1,
                data_classification: exports::DataClassification::T1,
                deadline_ms: 600_000,
            };
            Self {
                engine,
                pre,
                documents: dir.join("samples"),
                task,
            }
        }

        /// One task: a store with a fresh WASI context, instantiate, `run`;
        /// the outputs.
        pub(crate) async fn run(&self) -> Value {
            let mut wasi = WasiCtxBuilder::new();
            wasi.preopened_dir(&self.documents, "/documents", FsPerms::ReadOnly)
                .expect("preopen");
            let mut store = Store::new(
                &self.engine,
                Bare {
                    wasi: wasi.build(),
                    http: WasiHttpCtx::new(),
                    table: ResourceTable::new(),
                },
            );
            let instance = self
                .pre
                .instantiate_async(&mut store)
                .await
                .expect("instantiate");
            let outcome = instance
                .call_run(&mut store, &self.task)
                .await
                .expect("call")
                .expect("run succeeded");
            serde_json::from_str(&outcome.outputs).expect("outputs are JSON")
        }
    }
}

/// One governed task, as `hcp serve` runs it; its wall time and outputs.
async fn governed(host: &Arc<Host>, id: &str) -> (Duration, Value) {
    let (_, wall, answer) = in_process_task(host, example(id)).await;
    let hcp::engine::Answer::Completed(completed) = answer else {
        panic!("not completed: {answer}");
    };
    (wall, completed.payload.outputs)
}

fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut sorted = v.to_vec();
    sorted.sort();
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then this only checks that it builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(15).max(1);
    let per_round = args.get(1).copied().unwrap_or(40).max(1);
    let runtime = runtime();
    let data = tempfile::tempdir().expect("tempdir");
    let host = open_host(data.path());
    let bare = bare::BareRunner::new(&example("inputs")["payload"]["inputs"]);
    runtime.block_on(async {
        // Warm both (compiled code, caches), and check that both do the
        // same work: the same outputs.
        let mut outputs = Value::Null;
        for i in 0..10 {
            outputs = governed(&host, &format!("warm-{i}")).await.1;
        }
        let mut bare_outputs = Value::Null;
        for _ in 0..10 {
            bare_outputs = bare.run().await;
        }
        assert_eq!(outputs, bare_outputs, "the two sides did different work");
        let (mut g_all, mut b_all, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut g = Vec::new();
            for i in 0..per_round {
                g.push(governed(&host, &format!("task-{round}-{i}")).await.0);
            }
            let mut b = Vec::new();
            for _ in 0..per_round {
                let t0 = Instant::now();
                std::hint::black_box(bare.run().await);
                b.push(t0.elapsed());
            }
            let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() / v.len() as f64;
            ratios.push(mean(&g) / mean(&b));
            g_all.extend(g);
            b_all.extend(b);
        }
        let (lo, hi) = range(&ratios);
        println!(
            "governance: document-analysis R1, {rounds} rounds of {per_round} tasks each side, one client, {} cores",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        println!(
            "governed (hcp, in process)  p50 {}  p99 {}",
            ms(percentile(&g_all, 0.5)),
            ms(percentile(&g_all, 0.99))
        );
        println!(
            "bare wasmtime               p50 {}  p99 {}",
            ms(percentile(&b_all, 0.5)),
            ms(percentile(&b_all, 0.99))
        );
        let ratio = median(ratios);
        println!("governed/bare {ratio:.2}x (rounds {lo:.2}x..{hi:.2}x)");
        println!(
            "row | R1 task in process, 1 client | p50 {} | target p50 1 ms | {:.2}x the target |",
            ms(percentile(&g_all, 0.5)),
            percentile(&g_all, 0.5).as_secs_f64() / 1e-3
        );
        println!(
            "row | governed R1 task / bare wasmtime, same component and work | governed p50 {} | bare p50 {} | {ratio:.2}x (rounds {lo:.2}x..{hi:.2}x), target <= 2x |",
            ms(percentile(&g_all, 0.5)),
            ms(percentile(&b_all, 0.5)),
        );
    });
}
