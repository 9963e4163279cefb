//! Installing, listing, inspecting and removing on a fresh data directory;
//! versions side by side, upgrades, unsigned bundles, the engine picking by
//! range, leftovers of an interrupted install.

use super::*;

#[test]
fn install_list_inspect_remove_on_a_fresh_data_directory() {
    let lab = Lab::new();
    let out = lab.ok(&["list"]);
    assert_eq!(
        stdout(&out),
        "nothing is installed (hcp install <bundle>)\n"
    );
    lab.trust("hcp-examples");
    let out = lab.ok(&["trust", "list"]);
    assert!(
        stdout(&out).starts_with("hcp-examples  key "),
        "{}",
        stdout(&out)
    );

    let doc = lab.example("document-analysis");
    let cvd = lab.example("cvd-material-synthesis");
    let out = lab.ok(&["install", s(&doc)]);
    let shown = lab.portable(&stdout(&out));
    assert_eq!(
        shown,
        "installed document-analysis@1.0.0\n  \
         publisher  hcp-examples (key <key-id>)\n  \
         component  sha256:<digest>\n  \
         directory  <tmp>/capabilities/document-analysis/1.0.0\n  \
         receipt    install-receipt.json, signed by host-<host-id> (key <key-id>)\n"
    );
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    lab.ok(&["install", s(&cvd)]);

    // Installed as the bundle holds it, with the receipt; the bundled data
    // is where the manifest's ${manifest_dir} grant points.
    let dir = lab
        .hcp
        .data
        .path()
        .join("capabilities/document-analysis/1.0.0");
    for file in [
        "manifest.json",
        "component.wasm",
        "wit/world.wit",
        "samples/paper-123.md",
        "install-receipt.json",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let m = hcp_contracts::manifest::load(
        &dir.join("manifest.json"),
        hcp_contracts::LoadOptions {
            require_digest: true,
        },
    )
    .expect("the installed manifest loads");
    assert_eq!(
        m.grants.filesystem[0].host_path,
        dir.join("samples").canonicalize().expect("c")
    );

    let out = lab.ok(&["list"]);
    assert_eq!(
        stdout(&out),
        "NAME                    VERSION  PUBLISHER\n\
         cvd-material-synthesis  1.0.0    hcp-examples\n\
         document-analysis       1.0.0    hcp-examples\n"
    );

    let out = lab.ok(&["inspect", "document-analysis"]);
    let text = lab.portable(&stdout(&out));
    for line in [
        "capability  document-analysis@1.0.0\n",
        "directory   <tmp>/capabilities/document-analysis/1.0.0\n",
        "publisher   hcp-examples (key <key-id>, ed25519:<public-key>)\n",
        "world       hcp:capability/capability@1.0.0\n",
        "risk        ceiling R1\n",
        "component   sha256:<digest> (matches the install)\n",
        "receipt     install-receipt.json: signed by this host (key <key-id>), verified\n",
        "  filesystem  ${manifest_dir}/samples -> /documents (read-only)\n",
        "  network     example.com:443\n",
        "versions    1.0.0\n",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    let out = lab.ok(&["inspect", "--json", "cvd-material-synthesis@1.0.0"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["receipt_verified"], true);
    assert_eq!(v["install_receipt"]["receipt"]["unsigned"], false);
    assert_eq!(
        v["install_receipt"]["receipt"]["publisher"]["name"],
        "hcp-examples"
    );
    assert_eq!(
        v["install_receipt"]["receipt"]["grants"]["instruments"],
        json!(["cvd-rig"])
    );

    // A changed component on disk is reported.
    let component = dir.join("component.wasm");
    let original = std::fs::read(&component).expect("read");
    std::fs::write(&component, b"\0asm").expect("write");
    let out = lab.hcp.run(&["inspect", "document-analysis@1.0.0"]);
    assert_eq!(code(&out), 1);
    assert!(
        lab.portable(&stdout(&out))
            .contains("component   CHANGED: sha256:<digest> on disk, sha256:<digest> installed\n")
    );
    std::fs::write(&component, original).expect("restore");

    // The same version twice: refused.
    lab.refused(
        &doc,
        &[],
        "document-analysis@1.0.0 is already installed (hcp remove document-analysis@1.0.0 first to replace it)",
    );

    // Remove needs a version; then it is gone, files and record.
    let out = lab.hcp.run(&["remove", "document-analysis"]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        "error: name the version to remove: document-analysis@<version> (installed: 1.0.0)\n"
    );
    let out = lab.ok(&["remove", "document-analysis@1.0.0"]);
    assert!(stdout(&out).starts_with("removed document-analysis@1.0.0 ("));
    assert!(
        !lab.hcp
            .data
            .path()
            .join("capabilities/document-analysis")
            .exists()
    );
    lab.nothing_half_installed(&["cvd-material-synthesis@1.0.0".to_owned()]);
    let out = lab.hcp.run(&["remove", "document-analysis@1.0.0"]);
    assert_eq!(code(&out), 2);
    assert_eq!(
        stderr(&out),
        "error: document-analysis@1.0.0 is not installed (hcp list)\n"
    );
    let out = lab.hcp.run(&["inspect", "document-analysis"]);
    assert_eq!(code(&out), 2);

    // Trust removed: installed capabilities stay; new installs are refused.
    let out = lab.ok(&["trust", "remove", "hcp-examples"]);
    assert_eq!(
        lab.portable(&stdout(&out)),
        "hcp-examples (key <key-id>) is no longer trusted\n\
         installed capabilities it signed stay installed: cvd-material-synthesis@1.0.0 (hcp remove to remove them)\n"
    );
    lab.refused(
        &doc,
        &[],
        "publisher \"hcp-examples\" (key <key-id>) is not trusted on this host; get the publisher's \
         public key from the publisher and add it with `hcp trust add hcp-examples <public key>` (the key, \
         or the file holding it: `hcp init` writes a host's as keys/publisher.pub)",
    );
}

#[test]
fn several_versions_side_by_side_and_widening_upgrades() {
    let lab = Lab::new();
    lab.trust("acme");
    let v1 = lab.trivial("1.0.0", json!({}));
    let v2 = lab.trivial(
        "1.1.0",
        json!({"network": [{"host": "example.com", "port": 443}]}),
    );
    let v3 = lab.trivial("1.2.0", json!({}));
    lab.ok(&["install", s(&v1)]);
    lab.refused(
        &v2,
        &[],
        "trivial@1.1.0 may do more than the installed trivial@1.0.0:\n  \
         wider    grants.network: + example.com:443\n\
         review the difference (hcp review), then install with --accept-new-grants",
    );
    let out = lab.ok(&["install", s(&v2), "--accept-new-grants"]);
    assert!(
        stdout(&out).ends_with(
            "  accepted   (--accept-new-grants) beyond trivial@1.0.0:\n    grants.network: + example.com:443\n"
        ),
        "{}",
        stdout(&out)
    );
    // Narrowing needs nothing.
    let out = lab.ok(&["install", s(&v3)]);
    assert!(stdout(&out).ends_with("  compared   allows nothing trivial@1.1.0 did not\n"));
    lab.nothing_half_installed(&[
        "trivial@1.0.0".to_owned(),
        "trivial@1.1.0".to_owned(),
        "trivial@1.2.0".to_owned(),
    ]);
    let out = lab.ok(&["inspect", "--json", "trivial@1.1.0"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["install_receipt"]["receipt"]["previous"], "trivial@1.0.0");
    assert_eq!(
        v["install_receipt"]["receipt"]["accepted_widening"],
        json!(["grants.network: + example.com:443"])
    );
    assert_eq!(v["versions"], json!(["1.0.0", "1.1.0", "1.2.0"]));
}

/// A version that differs from an installed one only in build metadata is
/// refused: a task pinned `=1.0.0` ran `1.0.0+build.2` installed beside
/// `1.0.0` (a range ignores build metadata, and the selection took the
/// higher by it), other code than the pin named.
#[test]
fn a_version_equal_in_precedence_to_an_installed_one_is_refused() {
    let lab = Lab::new();
    lab.trust("acme");
    lab.ok(&["install", s(&lab.trivial("1.0.0", json!({})))]);
    lab.refused(
        &lab.trivial("1.0.0+build.2", json!({})),
        &[],
        "trivial@1.0.0+build.2 is equal in precedence to the installed trivial@1.0.0 (versions \
         that differ only in build metadata are the same version to a task's \
         capability_version): hcp remove trivial@1.0.0 first, or give this one another version",
    );
    lab.nothing_half_installed(&["trivial@1.0.0".to_owned()]);
    // Another version installs beside it as before.
    lab.ok(&["install", s(&lab.trivial("1.0.1+build.2", json!({})))]);
}

#[test]
fn unsigned_bundles_install_only_with_allow_unsigned() {
    let lab = Lab::new();
    let dir = lab.plugin("trivial", |m| m);
    let bundle = lab.pack(&dir, "trivial.hcpb");
    lab.refused(
        &bundle,
        &[],
        "the bundle is unsigned: install bundles signed by a trusted publisher (hcp bundle sign, \
         hcp trust add), or pass --allow-unsigned for local development",
    );
    let out = lab.install(&bundle, &["--allow-unsigned"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "WARNING: trivial@1.0.0 is UNSIGNED: no publisher vouches for it.\n\
         WARNING: installed only because of --allow-unsigned, for local development; its install \
         receipt records that it is unsigned.\n"
    );
    assert!(stdout(&out).contains("  publisher  UNSIGNED (--allow-unsigned)\n"));
    let out = lab.ok(&["inspect", "--json", "trivial"]);
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(v["install_receipt"]["receipt"]["unsigned"], true);
    assert_eq!(v["install_receipt"]["receipt"]["publisher"], Value::Null);
    assert_eq!(v["installed"]["unsigned"], true);
    let out = lab.ok(&["list"]);
    assert!(
        stdout(&out).ends_with("trivial  1.0.0    UNSIGNED\n"),
        "{}",
        stdout(&out)
    );
}

/// A copy of the document-analysis plugin at `version`, packed and signed
/// as `hcp-examples`.
fn document_analysis_at(lab: &Lab, version: &str) -> PathBuf {
    let src = Path::new(REPO_ROOT).join("plugins/document-analysis");
    let dir = lab.work.path().join(format!("document-analysis-{version}"));
    std::fs::create_dir_all(dir.join("samples")).expect("mkdir");
    std::fs::copy(
        src.join("samples/paper-123.md"),
        dir.join("samples/paper-123.md"),
    )
    .expect("copy");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("manifest.json")).expect("read"))
            .expect("json");
    m["capability"]["version"] = json!(version);
    m["component"]["path"] = json!(format!(
        "{REPO_ROOT}/plugins/target/wasm32-wasip2/release/document_analysis.wasm"
    ));
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&m).expect("json"),
    )
    .expect("write");
    let bundle = lab.pack(&dir, &format!("document-analysis-{version}.hcpb"));
    lab.sign(&bundle, "hcp-examples");
    bundle
}

#[test]
fn the_engine_runs_the_installed_version_a_range_picks() {
    let lab = Lab::new();
    lab.trust("hcp-examples");
    for version in ["1.0.0", "1.1.0"] {
        lab.ok(&["install", s(&document_analysis_at(&lab, version))]);
    }
    let submit = |n: usize, range: &str| -> (i32, Value) {
        let mut m = crate::seed_submit();
        m["message_id"] = json!(format!("msg-range-{n}"));
        m["payload"]["capability_version"] = json!(range);
        let path = crate::write_json(lab.work.path(), &format!("submit-{n}.json"), &m);
        let out = lab
            .hcp
            .run(&["submit", "--as", "harness-local-01", "--wait", s(&path)]);
        let answers: Vec<Value> = serde_json::Deserializer::from_str(&stdout(&out))
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
        (code(&out), answers.last().expect("an answer").clone())
    };
    // The version the engine ran submission `n` with (the newest task).
    let version_of = |n: usize| -> String {
        let out = lab.ok(&["tasks", "list", "--limit", "1"]);
        let id = stdout(&out)
            .split_whitespace()
            .next()
            .expect("task id")
            .to_owned();
        let out = lab.ok(&["tasks", "show", &id, "--json"]);
        let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
        assert_eq!(v["message_id"], format!("msg-range-{n}"));
        v["version"].as_str().expect("version").to_owned()
    };
    let (c, answer) = submit(1, "1.0.x");
    assert_eq!(
        (c, answer["type"].as_str()),
        (0, Some("task_completed")),
        "{answer}"
    );
    assert_eq!(version_of(1), "1.0.0");
    let (c, answer) = submit(2, "1.x");
    assert_eq!(
        (c, answer["type"].as_str()),
        (0, Some("task_completed")),
        "{answer}"
    );
    assert_eq!(version_of(2), "1.1.0");
    // Removed: the range falls back to what is left, or to nothing.
    lab.ok(&["remove", "document-analysis@1.1.0"]);
    let (_, answer) = submit(3, "1.x");
    assert_eq!(answer["type"], "task_completed", "{answer}");
    assert_eq!(version_of(3), "1.0.0");
    let (c, answer) = submit(4, ">=1.1.0");
    assert_eq!(c, 1);
    assert_eq!(answer["type"], "task_rejected", "{answer}");
    assert_eq!(
        answer["payload"]["reason_message"],
        "no installed document-analysis matches >=1.1.0 (installed: 1.0.0)"
    );
}

#[test]
fn leftovers_of_an_interrupted_install_are_cleaned_up() {
    let lab = Lab::new();
    lab.trust("acme");
    let bundle = lab.trivial("1.0.0", json!({}));
    // A crash while staging, and one between the rename and the record.
    let caps = lab.hcp.data.path().join("capabilities");
    std::fs::create_dir_all(caps.join(".staging-crashed/wit")).expect("mkdir");
    std::fs::write(caps.join(".staging-crashed/component.wasm"), b"half").expect("write");
    std::fs::create_dir_all(caps.join("trivial/1.0.0")).expect("mkdir");
    std::fs::write(caps.join("trivial/1.0.0/component.wasm"), b"stale").expect("write");
    let out = lab.install(&bundle, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        lab.portable(&stderr(&out)),
        "note: replaced a leftover directory of an interrupted install at \
         <tmp>/capabilities/trivial/1.0.0\n"
    );
    lab.nothing_half_installed(&["trivial@1.0.0".to_owned()]);
    let out = lab.ok(&["inspect", "trivial@1.0.0"]);
    assert!(
        stdout(&out).contains("(matches the install)"),
        "{}",
        stdout(&out)
    );
}

/// An install replaces the same version only in a development data
/// directory (`hcp dev`'s); asked to on a host's data directory it is
/// refused as before, nothing changed, and that directory is never marked
/// as a development one.
#[test]
fn the_same_version_is_replaced_only_in_a_development_data_directory() {
    use hcp::install::{self, InstallError, InstallOptions, development};
    let lab = Lab::new();
    let dir = lab.plugin("trivial-1.0.0", |m| m);
    let bundle = lab.pack(&dir, "trivial-1.0.0.hcpb");
    lab.ok(&["install", s(&bundle), "--allow-unsigned"]);
    let file = install::read_bundle_file(&bundle).expect("bundle");
    let sandbox = hcp_sandbox::Sandbox::new(hcp_sandbox::SandboxConfig {
        cache_dir: Some(hcp_tests::cache_dir()),
        ..hcp_sandbox::SandboxConfig::default()
    })
    .expect("sandbox");
    let install_into = |data: &Path, replace: bool| {
        let store = hcp::store::Store::open(data).expect("store");
        let host = hcp::hostkey::load_or_init(data).expect("host key");
        let options = InstallOptions {
            allow_unsigned: true,
            accept_new_grants: false,
            policy_dir: Path::new(REPO_ROOT).join("policies"),
            replace_same_version: replace,
        };
        install::install(&store, &sandbox, &host, &file, &options)
    };

    // A host's data directory.
    let host_dir = lab.hcp.data.path();
    match install_into(host_dir, true) {
        Err(InstallError::Refused(reason)) => assert!(
            reason.contains("trivial@1.0.0 is already installed, and ")
                && reason.contains(" is not a development data directory"),
            "{reason}"
        ),
        other => panic!("replaced on a host's data directory: {other:?}"),
    }
    lab.nothing_half_installed(&["trivial@1.0.0".to_owned()]);
    assert!(development::make(host_dir, Path::new("/")).is_err());
    assert!(!development::is_development(host_dir));

    // A development data directory.
    let dev = lab.work.path().join("dev");
    development::make(&dev, Path::new("/")).expect("a new directory");
    let first = install_into(&dev, true).expect("first install");
    assert!(!first.replaced_same_version);
    match install_into(&dev, false) {
        Err(InstallError::Refused(reason)) => {
            assert!(reason.contains("is already installed"), "{reason}");
        }
        other => panic!("replaced without being asked: {other:?}"),
    }
    let again = install_into(&dev, true).expect("replaced");
    assert!(again.replaced_same_version);
    let store = hcp::store::Store::open(&dev).expect("store");
    let installed = store.installed().expect("registry");
    assert_eq!(installed.len(), 1, "{installed:?}");
    assert_eq!(installed[0].installed_at, again.installed.installed_at);
    assert!(installed[0].dir.join("install-receipt.json").is_file());
    let leftovers: Vec<String> = std::fs::read_dir(dev.join("capabilities"))
        .expect("capabilities")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n != ".lock")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
