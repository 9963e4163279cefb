//! `hcp evidence merge`: two hosts' packs (two data directories, two host
//! keys) become one pack that verifies and replays; a tampered input and an
//! output over an input are refused.

use super::{export, flip_args_hash, forge, read, receipts, replay, run_demo, verify};
use crate::{Hcp, code, stderr, stdout};
use serde_json::Value;
use std::path::Path;

fn merge(hcp: &Hcp, inputs: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["evidence", "merge"];
    args.extend(inputs.iter().map(|p| p.to_str().expect("utf8")));
    args.extend_from_slice(&["-o", out.to_str().expect("utf8")]);
    args.extend_from_slice(extra);
    hcp.run(&args)
}

#[test]
fn two_hosts_packs_merge_into_one_that_verifies_and_replays() {
    let (one, two) = (Hcp::new(), Hcp::new());
    let tmp = tempfile::tempdir().expect("tempdir");
    run_demo(&one);
    run_demo(&two);
    let (a, b) = (tmp.path().join("a.tar"), tmp.path().join("b.tar"));
    let pa = read(&export(&one, &["--all"], &a));
    let pb = read(&export(&two, &["--all"], &b));
    assert_ne!(pa.hosts[0].host_id, pb.hosts[0].host_id);

    let all = tmp.path().join("all.tar");
    let o = merge(&one, &[&a, &b], &all, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!(
            "wrote {}: 2 packs merged, 2 hosts, ",
            all.display()
        )),
        "{err}"
    );
    for p in [&pa, &pb] {
        let h = &p.hosts[0];
        let line = format!("  {}: {} receipts (seq 0..", h.host_id, h.receipts.len());
        assert!(err.contains(&line), "{line} not in:\n{err}");
    }
    let (c, out) = verify(&one, &all, &[]);
    assert_eq!(c, 0, "{out}");
    assert!(out.starts_with("ok: 2 hosts, "), "{out}");
    let (c, out) = replay(&two, &all);
    assert_eq!(c, 0, "{out}");
    assert!(out.starts_with("ok: "), "{out}");
    let merged = read(&std::fs::read(&all).expect("merged"));
    let mut sections = vec![pa.hosts[0].clone(), pb.hosts[0].clone()];
    sections.sort_by(|x, y| x.host_id.cmp(&y.host_id));
    assert_eq!(merged.hosts, sections);
    assert_eq!(merged.public_keys.len(), 2);
    assert_eq!(merged.messages.len(), pa.messages.len() + pb.messages.len());

    // The other order, as JSON: the same bytes.
    let again = tmp.path().join("again.tar");
    let o = merge(&two, &[&b, &a], &again, &["--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(std::fs::read(&again).expect("again") == std::fs::read(&all).expect("all"));
    let summary: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let total = pa.hosts[0].receipts.len() + pb.hosts[0].receipts.len();
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["receipts"], total);
    assert_eq!(summary["hosts"].as_array().expect("hosts").len(), 2);
    assert!(summary["lamport"]["min"].as_u64() <= summary["lamport"]["max"].as_u64());

    // A tampered input is refused with its failures; nothing is written.
    let mut bad = pb.clone();
    let flipped = flip_args_hash(&receipts(&mut bad)[1]);
    receipts(&mut bad)[1] = flipped;
    let bad = forge(tmp.path(), "bad.tar", &bad);
    let never = tmp.path().join("never.tar");
    let o = merge(&one, &[&a, &bad], &never, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{} does not verify: FAILED: ", bad.display())),
        "{err}"
    );
    assert!(err.contains("[chain] receipt "), "{err}");
    assert!(
        err.ends_with("refused: 1 of 2 inputs do not verify; nothing was written\n"),
        "{err}"
    );
    assert!(!never.exists());

    // Never over an input.
    let before = std::fs::read(&a).expect("a");
    let o = merge(&one, &[&a, &b], &a, &[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("is the input"), "{}", stderr(&o));
    assert!(std::fs::read(&a).expect("a") == before);

    // One host's pack twice is that pack.
    let o = merge(&one, &[&a, &a], &tmp.path().join("same.tar"), &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(std::fs::read(tmp.path().join("same.tar")).expect("same") == before);
}

/// Copies a data directory (files and subdirectories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

#[test]
fn one_hosts_exports_join_and_a_copied_data_directory_forks() {
    let host = Hcp::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    run_demo(&host);
    let early = tmp.path().join("early.tar");
    export(&host, &["--all"], &early);
    run_demo(&host);
    // A copy of the data directory: the same host, key and log so far.
    let copy = Hcp::new();
    copy_dir(host.data.path(), copy.data.path());
    let late = tmp.path().join("late.tar");
    let late_bytes = export(&host, &["--all"], &late);

    // An earlier export of the host is part of a later one.
    let joined = tmp.path().join("joined.tar");
    let o = merge(&host, &[&late, &early], &joined, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).contains(", 1 hosts, "), "{}", stderr(&o));
    assert!(std::fs::read(&joined).expect("joined") == late_bytes);

    // The copy and the original go on separately: their logs fork where
    // they part, and the merge says so.
    run_demo(&host);
    run_demo(&copy);
    let (x, y) = (tmp.path().join("x.tar"), tmp.path().join("y.tar"));
    export(&host, &["--all"], &x);
    export(&copy, &["--all"], &y);
    let seq = read(&late_bytes).hosts[0].receipts.len();
    let host_id = read(&late_bytes).hosts[0].host_id.clone();
    let forked = tmp.path().join("forked.tar");
    let o = merge(&host, &[&x, &y], &forked, &["--json"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let refusal: Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(refusal["ok"], false);
    assert_eq!(
        refusal["error"],
        format!(
            "host {host_id} forks at seq {seq} between {} and {}: they hold different receipts there",
            x.display(),
            y.display()
        )
    );
    assert!(!forked.exists());
}
