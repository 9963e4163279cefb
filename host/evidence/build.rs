//! Lists the WASI packages of `wit/deps/` (one folder each, vendored with
//! the interface that implements it) into `wit_deps.rs`, which `lib.rs`
//! includes as `WIT_DEPS`: a new package there is carried by evidence
//! packs and `hcp new` with no line of Rust.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/deps");
    println!("cargo:rerun-if-changed={}", deps.display());
    let mut files = Vec::new();
    for package in std::fs::read_dir(&deps).expect("wit/deps") {
        let package = package.expect("wit/deps entry").path();
        if !package.is_dir() {
            continue;
        }
        for file in std::fs::read_dir(&package).expect("a package of wit/deps") {
            let file = file.expect("a file of wit/deps").path();
            if file.extension().is_some_and(|e| e == "wit") {
                files.push(file);
            }
        }
    }
    files.sort();
    let mut out = String::from("&[\n");
    for file in &files {
        let rel = file.strip_prefix(&deps).expect("under wit/deps");
        let name = format!("deps/{}", rel.to_string_lossy());
        let path = std::fs::canonicalize(file).expect("canonical path");
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.to_string_lossy()
        )
        .expect("write to a String");
    }
    out.push(']');
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("wit_deps.rs");
    std::fs::write(target, out).expect("write wit_deps.rs");
}
