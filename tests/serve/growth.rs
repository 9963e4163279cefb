//! The growth benchmark's code path (`cargo bench -p hcp --bench growth`),
//! scaled down to hundreds of tasks so that it cannot rot: a store filled
//! through the real writer, then measured beside an empty one.

#[path = "../../host/hcp/benches/common/mod.rs"]
mod common;
#[path = "../../host/hcp/benches/common/growth.rs"]
mod run;

use run::{Sizes, fill, measure, steady};

#[test]
fn the_growth_bench_fills_a_store_and_measures_it_beside_an_empty_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (empty, large) = (dir.path().join("empty"), dir.path().join("large"));
    let runtime = common::runtime();
    fill(&runtime, &empty, 4, 4);
    let rate = fill(&runtime, &large, 300, 16);
    assert!(rate > 0.0);
    let sizes = Sizes {
        one: 5,
        eight: 16,
        queries: 3,
    };
    let e = measure(&runtime, &empty, sizes);
    let l = measure(&runtime, &large, sizes);
    // Every task of the fill was stored, by the host's own writer.
    assert_eq!(e.tasks, 4);
    assert_eq!(l.tasks, 300);
    assert!(l.db_bytes > e.db_bytes, "{} vs {}", l.db_bytes, e.db_bytes);
    for f in [&e, &l] {
        assert!(f.eight_rate > 0.0);
        assert!(!f.check.is_zero() && !f.open.is_zero() && !f.one_p50.is_zero());
        // The queries ran (each asserts it found tasks) in a sane time.
        let queries = f.list_caller + f.list_operator + f.approvals;
        assert!(queries < std::time::Duration::from_secs(10), "{f:?}");
    }
}

#[test]
fn at_a_steady_load_with_a_retention_the_hot_store_stops_growing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("steady");
    let runtime = common::runtime();
    let per_round = 24;
    let rounds = steady(&runtime, &data, 5, per_round, 8);
    assert_eq!(rounds.len(), 5);
    for (i, r) in rounds.iter().enumerate() {
        // Each round's archive run took what settled before the round: the
        // hot store holds about one round (what the last archived stretch
        // could not end on stays, at most another round).
        assert!(
            r.hot_tasks <= 2 * per_round as u64,
            "round {i}: {} tasks hot: {rounds:?}",
            r.hot_tasks
        );
    }
    // Archives were written, round after round.
    assert!(rounds[1].pack_bytes > 0, "{rounds:?}");
    assert!(rounds[4].pack_bytes > rounds[2].pack_bytes, "{rounds:?}");
    for r in &rounds {
        eprintln!(
            "after {} tasks: {} hot, hcp.db {} bytes, {} in use, packs {}",
            r.tasks_run, r.hot_tasks, r.db_bytes, r.used_bytes, r.pack_bytes
        );
    }
    // Bounded by the retention: once the first archive run pruned, the
    // pages in use stop growing with the tasks run (nothing of an archived
    // task stays hot: its receipts' hashes go to the Merkle frontier), and
    // the file, its free pages reused, stops growing with them.
    let (second, last) = (&rounds[1], &rounds[4]);
    assert!(
        last.used_bytes <= second.used_bytes + second.used_bytes / 10,
        "pages in use grew from {} to {} bytes over {} tasks: {rounds:?}",
        second.used_bytes,
        last.used_bytes,
        last.tasks_run - second.tasks_run
    );
    assert!(
        last.db_bytes <= second.db_bytes + second.db_bytes / 5,
        "{rounds:?}"
    );
}
