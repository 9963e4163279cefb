//! `install.json`: the fixtures under `schemas/fixtures/policy/install/`
//! (valid files check, invalid ones are refused with exactly the problems in
//! their `.err` golden file; `BLESS=1` rewrites them), the shipped file, and
//! checking manifests against a policy: every refusal with its exact reason.

use hcp_contracts::manifest::{LoadOptions, Manifest};
use hcp_contracts::problem;
use hcp_policy::InstallPolicy;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures() -> PathBuf {
    repo().join("schemas/fixtures/policy/install")
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

#[test]
fn fixtures_check_or_match_their_golden_errors() {
    let mut mismatches = Vec::new();
    for path in json_files(&fixtures().join("valid")) {
        let text = std::fs::read_to_string(&path).expect("read");
        if let Err(problems) = InstallPolicy::check_text(&text) {
            mismatches.push(format!(
                "{} should be valid:\n{}",
                path.display(),
                problem::list(&problems)
            ));
        }
    }
    for path in json_files(&fixtures().join("invalid")) {
        let text = std::fs::read_to_string(&path).expect("read");
        let Err(problems) = InstallPolicy::check_text(&text) else {
            mismatches.push(format!("{} was accepted", path.display()));
            continue;
        };
        let actual = problem::list(&problems);
        let golden = path.with_extension("err");
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(&golden, format!("{actual}\n")).expect("bless");
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected.trim_end() != actual {
            mismatches.push(format!(
                "{}:\n--- expected\n{}\n--- actual\n{actual}\n",
                path.display(),
                expected.trim_end()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn the_shipped_file_loads_and_admits_the_examples() {
    let policy = InstallPolicy::load(&repo().join("policies")).unwrap_or_else(|e| panic!("{e}"));
    assert!(policy.hash().starts_with("sha256:") && policy.hash().len() == 71);
    for plugin in [
        "document-analysis",
        "cvd-material-synthesis",
        "hid-assistant",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut doc = read_json(&repo().join("plugins").join(plugin).join("manifest.json"));
        // The component is not built here: any component will do.
        doc["component"]["path"] = json!(component());
        if plugin == "document-analysis" {
            std::fs::create_dir(dir.path().join("samples")).expect("mkdir");
        }
        let manifest = checked(doc, dir.path());
        assert_eq!(policy.check(&manifest), Vec::<String>::new(), "{plugin}");
    }
}

#[test]
fn a_missing_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = InstallPolicy::load(dir.path()).expect_err("loaded");
    let shown = e
        .to_string()
        .replace(&dir.path().display().to_string(), "<dir>");
    assert_eq!(
        shown,
        "<dir>/install.json: invalid policy set:\n  install.json: (document): cannot read \
         <dir>/install.json: No such file or directory (os error 2)"
    );
}

#[test]
fn every_reason_a_manifest_is_refused_is_reported() {
    let data = tempfile::tempdir().expect("tempdir");
    let root = data.path().canonicalize().expect("canonical");
    for sub in ["shared/docs", "scratch", "elsewhere"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    let policy = InstallPolicy::from_text(
        "test",
        &json!({
            "max_risk_ceiling": "R3",
            "filesystem": {"roots": [
                {"path": format!("{}/shared", root.display()), "access": "read-only"},
                {"path": format!("{}/scratch", root.display()), "access": "read-write"}
            ]},
            "network": {"allow": ["example.com:443", "*.example.org"], "deny": ["evil.example.org"]},
            "env": ["LANG"],
            "instruments": ["cvd-rig"]
        })
        .to_string(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let base = base_manifest();
    let manifest = |patch: Value| {
        let mut doc = base.clone();
        for (k, v) in patch.as_object().expect("object") {
            doc[k] = v.clone();
        }
        checked(doc, &root)
    };

    // Within the policy: nothing to say.
    let fine = manifest(json!({"grants": {
        "filesystem": [
            {"path": format!("{}/shared/docs", root.display()), "access": "read-only"},
            {"path": format!("{}/scratch", root.display()), "access": "read-write"}
        ],
        "network": [{"host": "example.com", "port": 443}, {"host": "api.example.org", "port": 8443}],
        "env": ["LANG"],
        "instruments": ["cvd-rig"]
    }}));
    assert_eq!(policy.check(&fine), Vec::<String>::new());

    let mut doc = base.clone();
    doc["capability"]["safety"]["risk_ceiling"] = json!("R5");
    doc["grants"] = json!({
        "filesystem": [
            {"path": format!("{}/elsewhere", root.display()), "access": "read-only"},
            {"path": format!("{}/shared/docs", root.display()), "access": "read-write"},
            {"path": "${manifest_dir}/scratch", "access": "read-only", "guest_path": "/data"}
        ],
        "network": [
            {"host": "evil.example.org", "port": 443},
            {"host": "example.com", "port": 80},
            {"host": "a.example.org", "port": 443, "allow_private": true}
        ],
        "env": ["HOME"],
        "devices": ["hid"]
    });
    let refused = checked(doc, &root);
    let reasons: Vec<String> = policy
        .check(&refused)
        .into_iter()
        .map(|r| r.replace(&root.display().to_string(), "<root>"))
        .collect();
    assert_eq!(
        reasons,
        [
            "risk_ceiling R5 is above the highest this host installs (max_risk_ceiling R3)",
            "grants.filesystem[0] <root>/elsewhere (read-only): <root>/elsewhere is outside the \
             allowed roots (<root>/shared read-only, <root>/scratch read-write)",
            "grants.filesystem[1] <root>/shared/docs (read-write): <root>/shared/docs is inside \
             <root>/shared, which admits read-only grants only",
            "grants.filesystem[2] ${manifest_dir}/scratch (read-only): data shipped in a bundle \
             is not admitted (filesystem.bundled_data is false)",
            "grants.network[0] evil.example.org:443 is forbidden (network.deny \"evil.example.org\")",
            "grants.network[1] example.com:80 is not a destination this host admits (network.allow)",
            "grants.network[2] a.example.org:443 allows private addresses, which this host does \
             not admit (network.allow_private is false)",
            "grants.env[0] HOME is not admitted (env lists LANG)",
            "grants.devices[0] hid is not admitted (devices lists nothing)",
        ]
    );
}

/// `wasi:keyvalue` buckets are admitted by name (`install.json`
/// `keyvalue`, `*`: any, absent: none); `wasi:config` keys need no
/// admission (their values are the operator's).
#[test]
fn buckets_are_admitted_by_name_and_config_keys_need_none() {
    let data = tempfile::tempdir().expect("tempdir");
    let root = data.path().canonicalize().expect("canonical");
    let mut doc = base_manifest();
    doc["grants"] = json!({
        "config": ["greeting"],
        "keyvalue": [
            {"bucket": "counts", "access": "read-write"},
            {"bucket": "cache", "access": "read-only"}
        ]
    });
    let manifest = checked(doc, &root);
    let policy = |admitted: Value| {
        let mut file = json!({"max_risk_ceiling": "R3"});
        if !admitted.is_null() {
            file["keyvalue"] = admitted;
        }
        InstallPolicy::from_text("test", &file.to_string()).unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(
        policy(Value::Null).check(&manifest),
        [
            "grants.keyvalue[0] counts is not admitted (keyvalue lists nothing)",
            "grants.keyvalue[1] cache is not admitted (keyvalue lists nothing)",
        ]
    );
    assert_eq!(
        policy(json!(["counts"])).check(&manifest),
        ["grants.keyvalue[1] cache is not admitted (keyvalue lists counts)"]
    );
    assert_eq!(policy(json!(["*"])).check(&manifest), Vec::<String>::new());
    assert!(
        InstallPolicy::from_text("test", r#"{"max_risk_ceiling": "R3", "config": ["x"]}"#).is_err()
    );
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

fn component() -> String {
    repo()
        .join("schemas/fixtures/capability/fixture-component.wasm")
        .display()
        .to_string()
}

fn base_manifest() -> Value {
    json!({
        "capability": {
            "name": "probe", "version": "1.0.0", "description": "a test capability",
            "input_schema": {"type": "object"}, "output_schema": {"type": "object"},
            "safety": {"risk_ceiling": "R1", "requires_human_approval": false,
                       "involves_physical_resources": false}
        },
        "component": {"path": component(), "world": "hcp:capability/capability@1.0.0"}
    })
}

fn checked(doc: Value, base: &Path) -> Manifest {
    hcp_contracts::manifest::from_value(doc, base, None, "test", LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_limit_is_bounded_by_install_json_or_the_built_in_maximum() {
    let data = tempfile::tempdir().expect("tempdir");
    let root = data.path().canonicalize().expect("canonical");
    let policy = |limits: Value| {
        InstallPolicy::from_text(
            "test",
            &json!({"max_risk_ceiling": "R3", "limits": limits}).to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let with = |limits: Value, constraints: Value| {
        let mut doc = base_manifest();
        doc["limits"] = limits;
        doc["capability"]["constraints"] = constraints;
        checked(doc, &root)
    };

    // No bound in install.json: the built-in maxima.
    let none = policy(json!({}));
    assert_eq!(
        none.check(&with(json!({}), json!({}))),
        Vec::<String>::new(),
        "the defaults are within the built-in maxima"
    );
    let greedy = with(
        json!({
            "memory_bytes": 4_u64 << 30, "table_elements": 2_000_000, "instances": 1000,
            "output_bytes": 128_u64 << 20, "log_bytes": 128_u64 << 20, "artifacts": 5000,
            "artifact_bytes": 8_u64 << 30, "checkpoints": 5000, "checkpoint_bytes": 128_u64 << 20
        }),
        json!({"max_duration": "P30D", "concurrent_limit": 1000}),
    );
    let built_in = |field: &str| format!("(the built-in maximum; install.json sets no {field})");
    assert_eq!(
        none.check(&greedy),
        [
            format!(
                "limits.memory_bytes 4294967296 is above the most this host installs, 1073741824 {}",
                built_in("limits.memory_bytes")
            ),
            format!(
                "limits.table_elements 2000000 is above the most this host installs, 1000000 {}",
                built_in("limits.table_elements")
            ),
            format!(
                "limits.instances 1000 is above the most this host installs, 256 {}",
                built_in("limits.instances")
            ),
            format!(
                "limits.output_bytes 134217728 is above the most this host installs, 16777216 {}",
                built_in("limits.output_bytes")
            ),
            format!(
                "limits.log_bytes 134217728 is above the most this host installs, 16777216 {}",
                built_in("limits.log_bytes")
            ),
            format!(
                "limits.artifacts 5000 is above the most this host installs, 1024 {}",
                built_in("limits.artifacts")
            ),
            format!(
                "limits.artifact_bytes 8589934592 is above the most this host installs, 1073741824 {}",
                built_in("limits.artifact_bytes")
            ),
            format!(
                "limits.checkpoints 5000 is above the most this host installs, 1024 {}",
                built_in("limits.checkpoints")
            ),
            format!(
                "limits.checkpoint_bytes 134217728 is above the most this host installs, 67108864 {}",
                built_in("limits.checkpoint_bytes")
            ),
            format!(
                "capability.constraints.max_duration PT720H is above the most this host installs, PT168H {}",
                built_in("limits.max_duration")
            ),
            format!(
                "capability.constraints.concurrent_limit 1000 is above the most this host installs, 64 {}",
                built_in("limits.concurrent_limit")
            ),
        ]
    );

    // Bounds in install.json: a limit left unset is checked at its default.
    let tight = policy(json!({
        "memory_bytes": 67108864, "max_duration": "PT5M", "concurrent_limit": 2
    }));
    assert_eq!(
        tight.check(&with(json!({}), json!({"concurrent_limit": 3}))),
        [
            "limits.memory_bytes (the default) 134217728 is above the most this host installs, \
             67108864 (install.json limits.memory_bytes)",
            "capability.constraints.max_duration (the default) PT10M is above the most this host \
             installs, PT5M (install.json limits.max_duration)",
            "capability.constraints.concurrent_limit 3 is above the most this host installs, 2 \
             (install.json limits.concurrent_limit)",
        ]
    );
    assert_eq!(
        tight.check(&with(
            json!({"memory_bytes": 67108864}),
            json!({"max_duration": "PT5M", "concurrent_limit": 2})
        )),
        Vec::<String>::new()
    );
    // A bound that is not a duration is refused where it is written.
    let err = InstallPolicy::from_text(
        "test",
        &json!({"max_risk_ceiling": "R3", "limits": {"max_duration": "5 minutes"}}).to_string(),
    )
    .expect_err("refused");
    assert!(err.to_string().contains("/limits/max_duration"), "{err}");
}
