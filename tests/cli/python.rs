//! The author's path in Python, from nothing to a running capability, in a
//! scratch directory outside this repository: `hcp init`, `hcp new
//! word-count --lang python`, the one build command the README gives
//! (`componentize-py -d wit -w basic componentize app -o word-count.wasm`),
//! `hcp run`, then pack, sign, install and submit as the developer.
//!
//! componentize-py 0.25.1 must be installed (`scripts/test` installs it
//! with pip); it needs no download at build time.

use super::author::{answers, hcp, ok, run_pack_sign, tokens, tree};
use super::{code, stderr, stdout};
use hcp_tests::REPO_ROOT;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Output};

/// The build command of the template's README, in `dir`.
fn componentize(dir: &Path) -> Output {
    Command::new("componentize-py")
        .args([
            "-d",
            "wit",
            "-w",
            "basic",
            "componentize",
            "app",
            "-o",
            "word-count.wasm",
        ])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "componentize-py cannot run ({e}): pip install componentize-py==0.25.1 \
                 (scripts/test installs it)"
            )
        })
}

#[test]
fn from_nothing_to_a_running_python_capability() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let data = root.join("data");
    let out = hcp(root, &data, &["init"]);
    ok(&out, "hcp init");
    assert!(tokens(&stdout(&out)).contains_key("developer"));

    // hcp new: the project carries the Python SDK, the WIT package and the
    // example, exactly as this repository holds them.
    let out = hcp(root, &data, &["new", "word-count", "--lang", "python"]);
    ok(&out, "hcp new --lang python");
    assert!(
        stdout(&out)
            .contains("\n  componentize-py -d wit -w basic componentize app -o word-count.wasm\n"),
        "{}",
        stdout(&out)
    );
    let project = root.join("word-count");
    let repo = Path::new(REPO_ROOT);
    // What componentize-py leaves behind when the SDK is built in place is
    // no part of it.
    let sources = |dir: &Path| {
        let mut files = tree(dir);
        files.retain(|path, _| !path.starts_with("__pycache__"));
        files
    };
    assert_eq!(
        sources(&project.join("hcp_guest")),
        sources(&repo.join("plugins/python/hcp_guest")),
        "hcp_guest/ differs from plugins/python/hcp_guest: update PYTHON_SDK_FILES in \
         host/hcp/src/cli/new.rs"
    );
    assert_eq!(
        tree(&project.join("wit")),
        tree(&repo.join("wit")),
        "wit/ differs from the repository's: update the embedded WIT files"
    );
    // The template, filled with word-count, is the example.
    let example = repo.join("plugins/python/word-count");
    for file in [
        "app.py",
        "manifest.json",
        "examples/task_submit.json",
        "data/sample.txt",
        "data/notes.md",
    ] {
        assert_eq!(
            std::fs::read_to_string(project.join(file)).expect("project file"),
            std::fs::read_to_string(example.join(file)).expect("example file"),
            "{file}: the template differs from plugins/python/word-count"
        );
    }
    assert_eq!(
        tree(&project.join("data")).len(),
        tree(&example.join("data")).len()
    );
    assert!(project.join("README.md").is_file());

    // The one build command.
    let out = componentize(&project);
    ok(&out, "componentize-py");
    assert!(project.join("word-count.wasm").is_file());

    // What the host links: its directory granted, the sockets inert.
    let out = hcp(&project, &data, &["surface", "manifest.json"]);
    ok(&out, "hcp surface");
    let surface = stdout(&out);
    assert!(
        surface.contains("  allowed  wasi:filesystem/preopens@0.2.9  (grants.filesystem)\n"),
        "{surface}"
    );
    assert!(
        surface.contains(
            "  allowed  wasi:sockets/tcp-create-socket@0.2.9  (linked, inert: no destination is \
             granted (grants.network); every socket and name lookup is denied and receipted)\n"
        ),
        "{surface}"
    );
    assert!(
        surface
            .ends_with("verdict: allowed (every import is within the grants; 7 linked, inert)\n"),
        "{surface}"
    );

    // hcp run, then pack and sign: as for a Rust capability.
    let (expected, _) = run_pack_sign(&project, &data);
    // The reviewer sees the inert imports for what they are.
    let out = hcp(&project, &data, &["review", "word-count.hcpb"]);
    ok(&out, "hcp review");
    let review = stdout(&out);
    assert!(
        review.contains("imports, every one within the grants (7 linked, inert)"),
        "{review}"
    );
    assert!(
        review.contains(
            "  allowed  wasi:sockets/udp@0.2.9  (linked, inert: no destination is granted"
        ),
        "{review}"
    );
    let out = hcp(&project, &data, &["install", "word-count.hcpb"]);
    ok(&out, "hcp install");
    let out = hcp(
        &project,
        &data,
        &[
            "submit",
            "--as",
            "developer",
            "--wait",
            "examples/task_submit.json",
        ],
    );
    ok(&out, "hcp submit");
    let done = answers(&out).pop().expect("answer");
    assert_eq!(done["type"], "task_completed", "{done:#}");
    assert_eq!(done["payload"]["outputs"]["files"], json!(expected));
    let err = stderr(&out);
    assert!(
        err.contains("  [info] counted file=notes.md words="),
        "{err}"
    );
    assert!(err.contains("denials: none\n"), "{err}");
    assert_eq!(code(&out), 0);
}
