//! `hcp new`: a capability project that builds and runs at once, outside
//! this repository.
//!
//! Each language is a template directory under `host/hcp/templates/`
//! (`rust/`, `python/`), embedded in the binary, plus what the project
//! needs to build on its own: for Rust, the guest SDK (`plugins/sdk`,
//! written to `vendor/hcp-guest/`), the WIT package (`wit/`, written to
//! `wit/`, where the SDK's `../../wit` finds it), the plugins workspace's
//! dependency versions and lock file, and the toolchain file; for Python,
//! the example capability `plugins/python/word-count` (its `app.py` and
//! `data/`), the Python SDK (`plugins/python/hcp_guest`, written to
//! `hcp_guest/`) and the WIT package. All are embedded with `include_str!`
//! from the files themselves; the author tests (`tests/cli/author.rs`,
//! `tests/cli/python.rs`) compare what `hcp new` writes with `plugins/sdk`,
//! `plugins/python` and `wit/` file by file, so a file added there and not
//! here fails them.

use super::Outcome;
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `hcp new`.
#[derive(Debug, clap::Args)]
#[command(
    long_about = "Creates the directory NAME with a capability that builds and runs at once: \
its source, a manifest (its grants explained in the README), an example task_submit, a data \
directory the manifest grants, and a README with the next commands. The template counts the \
lines, words and bytes of the files in its granted directory, logs each file and writes the \
counts as a CSV artifact.\n\n\
A Rust project carries the guest SDK (vendor/hcp-guest) and the WIT package (wit/) this host \
was built with, so `cargo build --release --target wasm32-wasip2` builds it anywhere. A Python \
project carries the Python SDK (hcp_guest/) and the WIT package, and builds with \
`componentize-py -d wit -w basic componentize app -o NAME.wasm` (pip install \
componentize-py==0.25.1).\n\n\
Nothing is replaced: an existing NAME refuses the command."
)]
pub struct NewArgs {
    /// The capability's name (`[a-z][a-z0-9-]*`, at most 64 characters);
    /// also the directory made and the crate's name.
    name: String,
    /// The language of the template.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
}

/// Template languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Lang {
    /// Rust, with the `hcp-guest` SDK.
    Rust,
    /// Python, with componentize-py.
    Python,
}

impl Lang {
    /// The language's name, as `--lang` takes it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
        }
    }
}

/// The one command that builds a project of `lang` into its component, run
/// in the project's directory: what `hcp new` prints and its README gives,
/// and what `hcp dev` runs. `python_output` is the component file a Python
/// project builds (its manifest's `component.path`, `<name>.wasm` as `hcp
/// new` writes it); a Rust project's is Cargo's.
pub(crate) fn build_command(lang: Lang, python_output: &str) -> Vec<String> {
    let argv: &[&str] = match lang {
        Lang::Rust => &["cargo", "build", "--release", "--target", "wasm32-wasip2"],
        Lang::Python => &[
            "componentize-py",
            "-d",
            "wit",
            "-w",
            "basic",
            "componentize",
            "app",
            "-o",
            python_output,
        ],
    };
    argv.iter().map(|a| (*a).to_owned()).collect()
}

/// How to install what [`build_command`] runs, when it is missing.
pub(crate) fn build_tool_hint(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "install Rust with rustup (rust-toolchain.toml asks for wasm32-wasip2)",
        Lang::Python => "pip install componentize-py==0.25.1",
    }
}

/// One file of a template: its path in the project and its text, in which
/// `{{name}}` is the capability's name and `{{crate}}` its crate name (the
/// component file's stem).
type TemplateFile = (&'static str, &'static str);

/// `host/hcp/templates/rust/`.
const RUST_TEMPLATE: &[TemplateFile] = &[
    (
        "Cargo.toml",
        include_str!("../../templates/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../templates/rust/src/lib.rs"),
    ),
    (
        "manifest.json",
        include_str!("../../templates/rust/manifest.json"),
    ),
    (
        "examples/task_submit.json",
        include_str!("../../templates/rust/examples/task_submit.json"),
    ),
    (
        "data/sample.txt",
        include_str!("../../templates/rust/data/sample.txt"),
    ),
    (
        "data/notes.md",
        include_str!("../../templates/rust/data/notes.md"),
    ),
    ("README.md", include_str!("../../templates/rust/README.md")),
    (".gitignore", include_str!("../../templates/rust/gitignore")),
];

/// `host/hcp/templates/python/`, with the example capability
/// `plugins/python/word-count/` as its source and data: the template is the
/// example the test suite builds and runs.
const PYTHON_TEMPLATE: &[TemplateFile] = &[
    (
        "app.py",
        include_str!("../../../../plugins/python/word-count/app.py"),
    ),
    (
        "manifest.json",
        include_str!("../../templates/python/manifest.json"),
    ),
    (
        "examples/task_submit.json",
        include_str!("../../templates/python/examples/task_submit.json"),
    ),
    (
        "data/sample.txt",
        include_str!("../../../../plugins/python/word-count/data/sample.txt"),
    ),
    (
        "data/notes.md",
        include_str!("../../../../plugins/python/word-count/data/notes.md"),
    ),
    (
        "README.md",
        include_str!("../../templates/python/README.md"),
    ),
    (
        ".gitignore",
        include_str!("../../templates/python/gitignore"),
    ),
];

/// The Python guest SDK, `plugins/python/hcp_guest/` (written to
/// `hcp_guest/`, next to `app.py`, where componentize-py finds it).
pub(crate) const PYTHON_SDK_FILES: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../../plugins/python/hcp_guest/__init__.py"),
    ),
    (
        "_errors.py",
        include_str!("../../../../plugins/python/hcp_guest/_errors.py"),
    ),
    (
        "log.py",
        include_str!("../../../../plugins/python/hcp_guest/log.py"),
    ),
    (
        "artifacts.py",
        include_str!("../../../../plugins/python/hcp_guest/artifacts.py"),
    ),
    (
        "checkpoints.py",
        include_str!("../../../../plugins/python/hcp_guest/checkpoints.py"),
    ),
];

/// Where the Python SDK goes in a Python project.
const PYTHON_SDK_DIR: &str = "hcp_guest";

/// The guest SDK, `plugins/sdk/` (written to `vendor/hcp-guest/`).
pub(crate) const SDK_FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../../../plugins/sdk/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../../plugins/sdk/src/lib.rs"),
    ),
    (
        "src/http.rs",
        include_str!("../../../../plugins/sdk/src/http.rs"),
    ),
];

/// Where the SDK goes in a Rust project: two levels down, so that its
/// `path: "../../wit"` names the project's `wit/`.
const SDK_DIR: &str = "vendor/hcp-guest";

/// The plugins workspace: its `[workspace.package]`, dependency versions,
/// lints and release profile are the SDK's (it inherits them).
const PLUGINS_WORKSPACE: &str = include_str!("../../../../plugins/Cargo.toml");

/// The plugins workspace's lock file: the versions the SDK is built and
/// tested with here. Cargo drops the example plugins from it and adds the
/// new crate on the first build.
const PLUGINS_LOCK: &str = include_str!("../../../../plugins/Cargo.lock");

/// This repository's toolchain file: the Rust version and the
/// `wasm32-wasip2` target, which rustup installs on the first build.
const TOOLCHAIN: &str = include_str!("../../../../rust-toolchain.toml");

/// Names Cargo or the template cannot take.
const RESERVED: &[&str] = &[
    "alloc",
    "core",
    "proc-macro",
    "std",
    "test",
    "hcp-guest",
    "self",
    "super",
    "crate",
    "fn",
    "mod",
    "use",
    "type",
    "let",
    "loop",
    "match",
    "move",
    "ref",
    "return",
    "static",
    "struct",
    "trait",
    "true",
    "false",
    "where",
    "while",
    "async",
    "await",
    "dyn",
];

fn check_name(name: &str) -> anyhow::Result<()> {
    let bytes = name.as_bytes();
    let shaped = !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.ends_with('-');
    if !shaped {
        anyhow::bail!(
            "{name:?} is not a capability name: 1 to 64 characters of a-z, 0-9 and '-', \
             starting with a letter and not ending with '-' (e.g. word-count)"
        );
    }
    if RESERVED.contains(&name) {
        anyhow::bail!("{name:?} is reserved (by Rust, Cargo or the SDK): choose another name");
    }
    Ok(())
}

/// The project's Cargo.toml: the template's package and workspace, then
/// the plugins workspace's shared sections with the SDK at [`SDK_DIR`].
fn cargo_toml(template: &str) -> anyhow::Result<String> {
    let start = PLUGINS_WORKSPACE
        .find("[workspace.package]")
        .context("plugins/Cargo.toml has no [workspace.package]")?;
    let shared = &PLUGINS_WORKSPACE[start..];
    let sdk_line = "hcp-guest = { path = \"sdk\" }";
    if !shared.contains(sdk_line) {
        anyhow::bail!("plugins/Cargo.toml does not declare {sdk_line}");
    }
    let shared = shared.replace(sdk_line, &format!("hcp-guest = {{ path = \"{SDK_DIR}\" }}"));
    Ok(format!("{template}{shared}"))
}

/// Every file of a new Rust project: path and content.
fn rust_project(name: &str) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let krate = name.replace('-', "_");
    let fill = |text: &str| text.replace("{{name}}", name).replace("{{crate}}", &krate);
    let mut files = Vec::new();
    for (path, text) in RUST_TEMPLATE {
        let text = if *path == "Cargo.toml" {
            cargo_toml(&fill(text))?
        } else {
            fill(text)
        };
        files.push((PathBuf::from(path), text));
    }
    for (path, text) in SDK_FILES {
        files.push((Path::new(SDK_DIR).join(path), (*text).to_owned()));
    }
    for (path, text) in crate::evidence::wit_files() {
        files.push((Path::new("wit").join(path), (*text).to_owned()));
    }
    files.push(("Cargo.lock".into(), PLUGINS_LOCK.to_owned()));
    files.push(("rust-toolchain.toml".into(), TOOLCHAIN.to_owned()));
    Ok(files)
}

/// Every file of a new Python project: path and content.
fn python_project(name: &str) -> Vec<(PathBuf, String)> {
    let mut files: Vec<(PathBuf, String)> = PYTHON_TEMPLATE
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.replace("{{name}}", name)))
        .collect();
    for (path, text) in PYTHON_SDK_FILES {
        files.push((Path::new(PYTHON_SDK_DIR).join(path), (*text).to_owned()));
    }
    for (path, text) in crate::evidence::wit_files() {
        files.push((Path::new("wit").join(path), (*text).to_owned()));
    }
    files
}

/// Writes `files` into a fresh directory next to `dest`, then renames it to
/// `dest`: the project is whole or absent.
fn write_project(dest: &Path, files: &[(PathBuf, String)]) -> anyhow::Result<()> {
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = parent.join(format!(".hcp-new.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        for (path, text) in files {
            let path = tmp.join(path);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
            }
            std::fs::write(&path, text).with_context(|| format!("{}", path.display()))?;
        }
        // A directory made meanwhile is not replaced: rename refuses a
        // non-empty target, and an empty one is checked first.
        if dest.exists() {
            anyhow::bail!("{} exists already", dest.display());
        }
        std::fs::rename(&tmp, dest).with_context(|| format!("{}", dest.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

pub(super) fn run(args: NewArgs) -> Outcome {
    check_name(&args.name)?;
    let files = match args.lang {
        Lang::Rust => rust_project(&args.name)?,
        Lang::Python => python_project(&args.name),
    };
    let dest = PathBuf::from(&args.name);
    if dest.exists() {
        anyhow::bail!(
            "{} exists already: `hcp new` never writes into an existing directory",
            dest.display()
        );
    }
    write_project(&dest, &files)?;
    let name = &args.name;
    let lang = args.lang.as_str();
    let build = build_command(args.lang, &format!("{name}.wasm")).join(" ");
    println!(
        "created {name}/ ({lang}): counts the lines, words and bytes of the files in its granted \
         data/ directory, writes a CSV artifact"
    );
    println!("next, in {name}/ (README.md explains each step and every grant):");
    println!("  {build}");
    println!("  hcp run --manifest manifest.json --input examples/task_submit.json");
    println!("  (or `hcp dev`: builds, installs and runs the example on every change)");
    println!("  hcp bundle pack . -o {name}.hcpb");
    println!("  hcp bundle sign {name}.hcpb --key \"$HCP_DATA_DIR/keys/publisher.key\"");
    println!("  hcp install {name}.hcpb");
    println!("  hcp submit --as developer --wait examples/task_submit.json");
    if args.lang == Lang::Python {
        println!("(componentize-py: `pip install componentize-py==0.25.1`)");
    }
    println!("(`hcp init` makes the data directory, its developer caller and its publisher key)");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["word-count", "a", "x9", "count-2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Word",
            "9lives",
            "-x",
            "x-",
            "a_b",
            "a b",
            "../x",
            "std",
            "hcp-guest",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn the_rust_project_points_the_sdk_at_its_copy() {
        let files = rust_project("word-count").expect("project");
        let cargo = &files
            .iter()
            .find(|(p, _)| p == Path::new("Cargo.toml"))
            .expect("Cargo.toml")
            .1;
        assert!(cargo.contains("name = \"word-count\""));
        assert!(cargo.contains("hcp-guest = { path = \"vendor/hcp-guest\" }"));
        assert!(cargo.contains("[workspace.dependencies]"));
        assert!(!cargo.contains("{{"));
        let manifest = &files
            .iter()
            .find(|(p, _)| p == Path::new("manifest.json"))
            .expect("manifest")
            .1;
        assert!(manifest.contains("target/wasm32-wasip2/release/word_count.wasm"));
    }

    #[test]
    fn the_python_project_carries_its_sdk_and_wit() {
        let files = python_project("count-2");
        let paths: Vec<&Path> = files.iter().map(|(p, _)| p.as_path()).collect();
        for want in [
            "app.py",
            "manifest.json",
            "README.md",
            "hcp_guest/__init__.py",
            "wit/world.wit",
        ] {
            assert!(paths.contains(&Path::new(want)), "{want}: {paths:?}");
        }
        let manifest = &files
            .iter()
            .find(|(p, _)| p == Path::new("manifest.json"))
            .expect("manifest")
            .1;
        assert!(manifest.contains("\"name\": \"count-2\""));
        assert!(manifest.contains("\"path\": \"count-2.wasm\""));
        assert!(files.iter().all(|(_, text)| !text.contains("{{")));
    }
}
