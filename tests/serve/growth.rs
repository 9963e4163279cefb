//! The growth benchmark's code path (`cargo bench -p hcp --bench growth`),
//! scaled down to hundreds of tasks so that it cannot rot: a store filled
//! through the real writer, then measured beside an empty one.

#[path = "../../host/hcp/benches/common/mod.rs"]
mod common;
#[path = "../../host/hcp/benches/common/growth.rs"]
mod run;

use run::{Sizes, fill, measure};

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
