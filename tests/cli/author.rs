//! The author's path, from nothing to a running capability, in a scratch
//! directory outside this repository: `hcp init`, `hcp new word-count`,
//! `cargo build --release --target wasm32-wasip2` in the new project, `hcp
//! run`, `hcp bundle pack`, `hcp bundle sign`, `hcp install`, `hcp submit`
//! as the developer `hcp init` wrote; every step the one command the
//! README gives.
//!
//! The build needs the crates of the plugins workspace's lock file, which
//! `hcp-tests` fetched already to build the example plugins (the new
//! project starts from that lock file): Cargo downloads nothing new.

use super::{code, stderr, stdout};
use hcp_tests::{REPO_ROOT, cache_dir};
use serde_json::{Value, json};
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `hcp` in `dir` with `data` as its data directory, and nothing of this
/// repository around: no `./policies`, no `HCP_POLICIES`.
pub(super) fn hcp(dir: &Path, data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hcp"))
        .args(args)
        .current_dir(dir)
        .env("HCP_DATA_DIR", data)
        .env("HCP_CACHE_DIR", cache_dir())
        .env_remove("HCP_POLICIES")
        .output()
        .expect("run hcp")
}

pub(super) fn ok(out: &Output, what: &str) {
    assert_eq!(
        code(out),
        0,
        "{what}\nstdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
}

/// Every JSON document on stdout, in order.
pub(super) fn answers(out: &Output) -> Vec<Value> {
    serde_json::Deserializer::from_str(&stdout(out))
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(out)))
}

/// Relative path → content of every file under `root`.
pub(super) fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("prefix").to_path_buf();
                out.insert(rel, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// `cargo build --release --target wasm32-wasip2` in `dir`, with nothing of
/// this test's own Cargo invocation leaking in (target directory, flags,
/// profile).
fn cargo_build(dir: &Path) -> Output {
    let mut cmd = Command::new("cargo");
    cmd.args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(dir);
    without_cargo_env(&mut cmd);
    cmd.output().expect("run cargo")
}

/// Removes from `cmd`'s environment what this test's own Cargo invocation
/// set (target directory, flags, profile), so that a `cargo build` it
/// starts builds as an author's would.
pub(super) fn without_cargo_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = matches!(key, "CARGO_HOME" | "CARGO_MAKEFLAGS")
            || key.starts_with("CARGO_NET_")
            || key.starts_with("CARGO_HTTP_")
            || key.starts_with("CARGO_REGISTRIES_");
        let drop = (key.starts_with("CARGO_") && !keep)
            || key.starts_with("RUSTC")
            || matches!(key, "RUSTFLAGS" | "RUSTDOCFLAGS" | "CARGO");
        if drop {
            cmd.env_remove(key);
        }
    }
}

/// The `token` lines of `hcp init`, by caller.
pub(super) fn tokens(init_stdout: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut caller = None;
    for line in init_stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["token", token] => {
                out.insert(
                    caller.take().expect("a caller line before its token"),
                    (*token).to_owned(),
                );
            }
            [id, kind, ..] if kind.contains("session") || *kind == "operator" => {
                caller = Some((*id).to_owned());
            }
            _ => {}
        }
    }
    out
}

/// What word-count must answer for the template's `data/`.
pub(super) fn expected_counts(data: &Path) -> Vec<Value> {
    let mut files: Vec<Value> = std::fs::read_dir(data)
        .expect("data")
        .map(|e| {
            let path = e.expect("entry").path();
            let text = std::fs::read_to_string(&path).expect("read");
            json!({
                "name": path.file_name().expect("name").to_str().expect("utf8"),
                "lines": text.lines().count(),
                "words": text.split_whitespace().count(),
                "bytes": text.len(),
            })
        })
        .collect();
    files.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    files
}

/// The author's steps after the build, the same in every language: `hcp
/// run` from the manifest gives `task_completed` with the counts of the
/// project's `data/`, then the project is packed and signed with the key
/// `hcp init` made. Returns the expected counts and the output of `sign`.
pub(super) fn run_pack_sign(project: &Path, data: &Path) -> (Vec<Value>, Output) {
    let out = hcp(
        project,
        data,
        &[
            "run",
            "--manifest",
            "manifest.json",
            "--input",
            "examples/task_submit.json",
        ],
    );
    ok(&out, "hcp run");
    let answer = answers(&out).pop().expect("an answer");
    assert_eq!(answer["type"], "task_completed", "{answer:#}");
    let expected = expected_counts(&project.join("data"));
    assert_eq!(answer["payload"]["outputs"]["files"], json!(expected));
    assert!(
        stderr(&out).contains("counted file=notes.md"),
        "{}",
        stderr(&out)
    );
    let out = hcp(
        project,
        data,
        &["bundle", "pack", ".", "-o", "word-count.hcpb"],
    );
    ok(&out, "hcp bundle pack");
    let key = data.join("keys/publisher.key");
    let out = hcp(
        project,
        data,
        &[
            "bundle",
            "sign",
            "word-count.hcpb",
            "--key",
            key.to_str().expect("utf8"),
        ],
    );
    ok(&out, "hcp bundle sign");
    (expected, out)
}

#[test]
fn run_and_submit_without_policies_give_one_error_naming_the_directory() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let data = scratch.path().join("data");
    let dir = data.join("policies").display().to_string();
    for args in [
        &["run", "--manifest", "m.json", "--input", "t.json"][..],
        &["submit", "--as", "developer", "t.json"][..],
    ] {
        let out = hcp(scratch.path(), &data, args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "error: no policy set: {dir} (the data directory's, as ./policies does not exist \
                 here) does not exist. Run `hcp init` to make a data directory with a starting \
                 policy set, or give a policy directory with --policies or HCP_POLICIES\n"
            ),
            "{args:?}"
        );
        assert!(stdout(&out).is_empty());
    }
    // A directory given explicitly, without callers.json.
    let empty = scratch.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let out = hcp(
        scratch.path(),
        &data,
        &[
            "--policies",
            "empty",
            "run",
            "--manifest",
            "m",
            "--input",
            "t",
        ],
    );
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        format!(
            "error: no policy set: {} (named by --policies or HCP_POLICIES) has no callers.json. \
             Run `hcp init` to make a data directory with a starting policy set, or give a policy \
             directory with --policies or HCP_POLICIES\n",
            empty.display()
        )
    );
}

#[test]
fn hcp_new_refuses_what_it_cannot_make() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let data = scratch.path().join("data");
    let out = hcp(
        scratch.path(),
        &data,
        &["new", "word-count", "--lang", "cobol"],
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).starts_with("error: invalid value 'cobol' for '--lang <LANG>'"),
        "{}",
        stderr(&out)
    );
    for bad in ["Word", "../x", "std", "x-"] {
        let out = hcp(scratch.path(), &data, &["new", bad]);
        assert_eq!(code(&out), 2, "{bad}");
        assert!(
            stderr(&out).starts_with("error: "),
            "{bad}: {}",
            stderr(&out)
        );
    }
    std::fs::create_dir(scratch.path().join("taken")).expect("mkdir");
    let out = hcp(scratch.path(), &data, &["new", "taken"]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        "error: taken exists already: `hcp new` never writes into an existing directory\n"
    );
    // Nothing was left behind.
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["taken"]);
}

#[test]
fn from_nothing_to_a_running_capability() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let data = root.join("data");

    // hcp init: the policies, two callers, tokens printed once and stored
    // only as hashes.
    let out = hcp(root, &data, &["init"]);
    ok(&out, "hcp init");
    let init_stdout = stdout(&out);
    let tokens = tokens(&init_stdout);
    assert_eq!(
        tokens.keys().collect::<Vec<_>>(),
        ["developer", "operator"],
        "{}",
        stdout(&out)
    );
    let callers: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("policies/callers.json")).expect("callers.json"),
    )
    .expect("json");
    for caller in callers["callers"].as_array().expect("callers") {
        let token = &tokens[caller["id"].as_str().expect("id")];
        let hash = format!("sha256:{}", hex::encode(sha2::Sha256::digest(token)));
        assert_eq!(caller["credential"], hash.as_str());
        assert_eq!(caller["all_capabilities"], true);
    }
    for (path, bytes) in tree(&data) {
        for token in tokens.values() {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(token.as_str()),
                "{} holds a token",
                path.display()
            );
        }
    }
    let out = hcp(root, &data, &["init"]);
    assert_eq!(code(&out), 2, "a second init replaces nothing");
    assert!(stderr(&out).contains("exists already"), "{}", stderr(&out));

    // hcp new: the project carries the SDK and the WIT package, exactly as
    // this repository holds them.
    let out = hcp(root, &data, &["new", "word-count"]);
    ok(&out, "hcp new");
    let project = root.join("word-count");
    assert_eq!(
        tree(&project.join("vendor/hcp-guest")),
        tree(&Path::new(REPO_ROOT).join("plugins/sdk")),
        "vendor/hcp-guest differs from plugins/sdk: update SDK_FILES in host/hcp/src/cli/new.rs"
    );
    assert_eq!(
        tree(&project.join("wit")),
        tree(&Path::new(REPO_ROOT).join("wit")),
        "wit/ differs from the repository's: update the embedded WIT files"
    );
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "rust-toolchain.toml",
        "src/lib.rs",
        "manifest.json",
        "examples/task_submit.json",
        "README.md",
        "data/sample.txt",
    ] {
        assert!(project.join(file).is_file(), "{file}");
    }

    // The one build command.
    let out = cargo_build(&project);
    ok(&out, "cargo build --release --target wasm32-wasip2");
    assert!(
        project
            .join("target/wasm32-wasip2/release/word_count.wasm")
            .is_file()
    );

    // hcp run, then pack and sign with the key hcp init made.
    let (expected, out) = run_pack_sign(&project, &data);
    // As this host's own publisher name (never a name every host shares).
    let publisher = init_stdout
        .lines()
        .find_map(|l| l.strip_prefix("  publisher  "))
        .and_then(|l| l.split(',').next())
        .expect("a publisher line")
        .to_owned();
    assert_ne!(publisher, "local-developer");
    assert!(
        stdout(&out).starts_with(&format!("signed word-count@0.1.0 as {publisher} ")),
        "{}",
        stdout(&out)
    );
    let out = hcp(&project, &data, &["install", "word-count.hcpb"]);
    ok(&out, "hcp install");

    // hcp submit as the developer: through the gate, with the task's log
    // and denials on stderr.
    let submit = [
        "submit",
        "--as",
        "developer",
        "--wait",
        "examples/task_submit.json",
    ];
    let out = hcp(&project, &data, &submit);
    ok(&out, "hcp submit");
    let docs = answers(&out);
    assert_eq!(docs.len(), 2, "{docs:#?}");
    assert_eq!(docs[0]["type"], "task_accepted");
    let done = &docs[1];
    assert_eq!(done["type"], "task_completed", "{done:#}");
    let outputs = &done["payload"]["outputs"];
    assert_eq!(outputs["files"], json!(expected));
    let err = stderr(&out);
    assert!(err.contains("task log:\n"), "{err}");
    assert!(
        err.contains("  [info] counted file=notes.md words="),
        "{err}"
    );
    assert!(err.contains("denials: none\n"), "{err}");
    assert!(!err.contains("note:"), "{err}");

    // The CSV artifact, by its URI.
    let report = outputs["report"].as_str().expect("report");
    let out = hcp(&project, &data, &["artifacts", "get", report]);
    ok(&out, "hcp artifacts get");
    let mut csv = String::from("file,lines,words,bytes\n");
    for f in &expected {
        csv.push_str(&format!(
            "{},{},{},{}\n",
            f["name"].as_str().expect("name"),
            f["lines"],
            f["words"],
            f["bytes"]
        ));
    }
    let total = |k: &str| {
        expected
            .iter()
            .map(|f| f[k].as_u64().expect("n"))
            .sum::<u64>()
    };
    csv.push_str(&format!(
        "total,{},{},{}\n",
        total("lines"),
        total("words"),
        total("bytes")
    ));
    assert_eq!(stdout(&out), csv);

    // The same message again: the earlier answer, and stderr says so.
    let out = hcp(&project, &data, &submit);
    ok(&out, "hcp submit again");
    let again = answers(&out);
    assert_eq!(again[0], docs[0]);
    assert!(
        stderr(&out).starts_with(
            "note: developer sent message_id \"msg-word-count-0001\" before; this is the answer \
             given then (task task-"
        ),
        "{}",
        stderr(&out)
    );

    // A policy that turns artifacts off for word-count: the task fails and
    // its denial is shown.
    let dispatch_path = data.join("policies/dispatch.json");
    let mut dispatch: Value =
        serde_json::from_str(&std::fs::read_to_string(&dispatch_path).expect("read"))
            .expect("json");
    dispatch["capabilities"] = json!({"word-count": {"denied_calls": ["artifacts.create"]}});
    std::fs::write(&dispatch_path, dispatch.to_string()).expect("write");
    let mut message: Value = serde_json::from_str(
        &std::fs::read_to_string(project.join("examples/task_submit.json")).expect("read"),
    )
    .expect("json");
    message["message_id"] = json!("msg-word-count-0002");
    std::fs::write(project.join("second.json"), message.to_string()).expect("write");
    let out = hcp(
        &project,
        &data,
        &["submit", "--as", "developer", "--wait", "second.json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let failed = answers(&out).pop().expect("answer");
    assert_eq!(failed["type"], "task_failed", "{failed:#}");
    let err = stderr(&out);
    assert!(
        err.contains("denials (1):\n  DENY artifacts.create: DENY_TOOL_NOT_FOUND (receipt "),
        "{err}"
    );
}
