//! Whatever text arrives as a policy file, checking it (alone, and with the
//! rest of the shipped set) answers with a policy or a clear error (every
//! problem with a non-empty message), never a panic: arbitrary text, and
//! the shipped files with bytes flipped, inserted, deleted or cut.
//! `PROPTEST_CASES` sets the number of cases (64 by default; `scripts/fuzz`
//! runs many more).

use hcp_fuzzkit::{config, mutate};
use hcp_policy::{PolicyFile, PolicySet};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

static SHIPPED: LazyLock<BTreeMap<String, String>> = LazyLock::new(|| {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies");
    PolicySet::load(&dir).expect("shipped").sources().clone()
});

/// `text` as `file`, alone and in the shipped set.
fn check(file: PolicyFile, text: &str) {
    if let Err(problems) = file.check(text) {
        assert!(
            !problems.is_empty(),
            "{}: refused without a problem",
            file.name()
        );
        assert!(
            problems.iter().all(|p| !p.message.is_empty()),
            "{problems:?}"
        );
    }
    let mut sources = SHIPPED.clone();
    sources.insert(file.name().to_owned(), text.to_owned());
    if let Err(e) = PolicySet::from_sources("fuzz", sources) {
        assert!(!e.problems.is_empty());
        assert!(
            e.problems
                .iter()
                .all(|p| !p.file.is_empty() && !p.problem.message.is_empty()),
            "{e}"
        );
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text(which in 0usize..7, text in "\\PC{0,400}") {
        check(PolicyFile::ALL[which], &text);
    }

    #[test]
    fn mutated_shipped_files(
        which in 0usize..7,
        edits in hcp_fuzzkit::edits(1, 8),
        cut in proptest::option::of(0.0..1.0f64),
    ) {
        let file = PolicyFile::ALL[which];
        let bytes = mutate(SHIPPED[file.name()].as_bytes(), &edits, cut);
        check(file, &String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn the_shipped_files_check_alone() {
    for file in PolicyFile::ALL {
        if let Err(problems) = file.check(&SHIPPED[file.name()]) {
            panic!("{}: {problems:?}", file.name());
        }
    }
}
