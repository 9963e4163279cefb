//! Every fixture under `schemas/fixtures/policy/`: valid files check, invalid
//! ones are refused with exactly the problems in their `.err` golden file.
//!
//! `BLESS=1 cargo test -p hcp-policy --test fixtures` rewrites the golden
//! files; review the diff.

use hcp_contracts::problem;
use hcp_policy::PolicyFile;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas/fixtures/policy")
}

fn files(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == extension))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

/// Compares `actual` with the golden file next to `fixture`, or writes it
/// under `BLESS=1`. Returns a mismatch description.
fn golden(fixture: &Path, actual: &str) -> Option<String> {
    let path = fixture.with_extension("err");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, format!("{actual}\n")).expect("bless");
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    (expected.trim_end() != actual).then(|| {
        format!(
            "{}:\n--- expected ({})\n{}\n--- actual\n{actual}\n",
            fixture.display(),
            path.display(),
            expected.trim_end()
        )
    })
}

#[test]
fn policy_file_fixtures() {
    let mut mismatches = Vec::new();
    for file in PolicyFile::ALL {
        let (dir, extension) = file.name().split_once('.').expect("name.ext");
        let dir = fixtures().join(dir);
        for path in files(&dir.join("valid"), extension) {
            let text = std::fs::read_to_string(&path).expect("read");
            if let Err(problems) = file.check(&text) {
                mismatches.push(format!(
                    "{} should be valid:\n{}",
                    path.display(),
                    problem::list(&problems)
                ));
            }
        }
        for path in files(&dir.join("invalid"), extension) {
            let text = std::fs::read_to_string(&path).expect("read");
            match file.check(&text) {
                Ok(()) => mismatches.push(format!("{} was accepted", path.display())),
                Err(problems) => mismatches.extend(golden(&path, &problem::list(&problems))),
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn unknown_fields_are_refused_in_every_json_file() {
    for file in PolicyFile::ALL.into_iter().filter(|f| f.is_json()) {
        let (dir, _) = file.name().split_once('.').expect("name.ext");
        let path = fixtures().join(dir).join("invalid/unknown-field.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let problems = file.check(&text).expect_err("accepted");
        assert!(
            problems.iter().any(|p| p
                .message
                .starts_with("Additional properties are not allowed")),
            "{}: {}",
            file.name(),
            problem::list(&problems)
        );
    }
}
