//! Builds every guest program (the example plugins and the hostile guests)
//! for wasm32-wasip2 and writes `guests.rs` into OUT_DIR: one constant per
//! component, holding its absolute path.
//!
//! Each guest workspace is built with its own `cargo build`, with the
//! environment Cargo set for this build script removed so nothing of the
//! host build (profile, flags, wrappers) leaks in. Both share the plugins'
//! target directory (`plugins/target`, where the examples' manifests find
//! their components): what runs on the build machine (wit-bindgen's macro
//! and the WIT parser under it) is then compiled once for both.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (workspace relative to the repository root, its members producing components)
const WORKSPACES: &[(&str, &[&str])] = &[
    (
        "plugins",
        &[
            "document-analysis",
            "cvd-material-synthesis",
            "hid-assistant",
        ],
    ),
    (
        "tests/guests",
        &[
            "probe",
            "trivial",
            "undeclared-import",
            "no-run-export",
            "sleeper",
            "config-probe",
            "kv-probe",
        ],
    ),
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    let target_dir = root.join("plugins/target");
    let mut constants = String::new();
    for (workspace, members) in WORKSPACES {
        let ws = root.join(workspace);
        for file in ["Cargo.toml", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={}", ws.join(file).display());
        }
        rerun_for_members(&ws);
        build(&cargo, &ws, &target_dir);
        for member in *members {
            let wasm = target_dir
                .join("wasm32-wasip2/release")
                .join(format!("{}.wasm", member.replace('-', "_")));
            assert!(wasm.exists(), "{} was not built", wasm.display());
            constants.push_str(&format!(
                "/// `{member}` from `{workspace}/`.\npub const {}: &str = {:?};\n",
                member.replace('-', "_").to_uppercase(),
                wasm.display().to_string()
            ));
        }
    }
    constants.push_str(&format!(
        "/// The repository root.\npub const REPO_ROOT: &str = {:?};\n",
        root.display().to_string()
    ));
    std::fs::write(out.join("guests.rs"), constants).expect("write guests.rs");
}

/// Sources of every member crate (not the target directory).
fn rerun_for_members(ws: &Path) {
    let Ok(entries) = std::fs::read_dir(ws) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && path.join("Cargo.toml").exists() {
            for sub in ["Cargo.toml", "src", "wit"] {
                let p = path.join(sub);
                if p.exists() {
                    println!("cargo:rerun-if-changed={}", p.display());
                }
            }
        }
    }
}

fn build(cargo: &str, ws: &Path, target_dir: &Path) {
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(ws.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(target_dir)
    .current_dir(ws);
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = matches!(key, "CARGO_HOME" | "CARGO_MAKEFLAGS")
            || key.starts_with("CARGO_NET_")
            || key.starts_with("CARGO_HTTP_")
            || key.starts_with("CARGO_REGISTRIES_");
        let drop = (key.starts_with("CARGO_") && !keep)
            || key.starts_with("RUSTC")
            || matches!(
                key,
                "RUSTFLAGS"
                    | "RUSTDOCFLAGS"
                    | "RUSTDOC"
                    | "TARGET"
                    | "HOST"
                    | "OPT_LEVEL"
                    | "PROFILE"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "OUT_DIR"
            );
        if drop {
            cmd.env_remove(key);
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cargo}: {e}"));
    assert!(
        status.success(),
        "building the guests in {} failed; is the wasm32-wasip2 target installed? \
         (rustup target add wasm32-wasip2)",
        ws.display()
    );
}
