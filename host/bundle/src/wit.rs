//! The WIT package: the host's own (embedded from the repository's `wit/`
//! at build time), and a reader of the package declaration and the `///`
//! documentation of each interface and function, for reviewers.
//!
//! This is not a WIT parser: it reads the `package` line, `interface` and
//! `world` blocks, the functions and type names of each interface, and the
//! doc comments right above them. The host's real WIT handling is
//! wasmtime's; here the text is only shown to people.

use serde::Serialize;
use std::collections::BTreeMap;

/// The host's WIT package, file by file (`wit/<name>`), as compiled in.
/// A test keeps it equal to the repository's `wit/` directory.
pub const HOST_WIT: &[(&str, &str)] = &[
    ("artifacts.wit", include_str!("../../../wit/artifacts.wit")),
    (
        "checkpoints.wit",
        include_str!("../../../wit/checkpoints.wit"),
    ),
    ("hid.wit", include_str!("../../../wit/hid.wit")),
    (
        "instrument.wit",
        include_str!("../../../wit/instrument.wit"),
    ),
    ("log.wit", include_str!("../../../wit/log.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("world.wit", include_str!("../../../wit/world.wit")),
];

/// A WIT package as reviewers read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WitPackage {
    /// `hcp:capability`.
    pub name: String,
    /// `1.0.0`.
    pub version: semver::Version,
    /// Interfaces by name.
    pub interfaces: BTreeMap<String, InterfaceDoc>,
    /// Worlds by name, with their docs.
    pub worlds: BTreeMap<String, String>,
}

/// One interface: its docs, functions and type names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InterfaceDoc {
    /// The interface's `///` comment.
    pub docs: String,
    /// Its functions, in order.
    pub functions: Vec<FunctionDoc>,
    /// Its types, e.g. `enum level`.
    pub types: Vec<String>,
}

/// One function of an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FunctionDoc {
    /// `write: func(level: level, message: string, fields: list<field>)`.
    pub signature: String,
    /// Its `///` comment.
    pub docs: String,
}

impl WitPackage {
    /// The host's own package.
    ///
    /// # Errors
    ///
    /// Only if the embedded files lack a package line (a test prevents it).
    pub fn host() -> Result<Self, String> {
        Self::parse(HOST_WIT.iter().copied())
    }

    /// Reads a package from its files (name, text).
    ///
    /// # Errors
    ///
    /// No `package` line, two different ones, or a version that is not semver.
    pub fn parse<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, String> {
        let mut package: Option<(String, String)> = None;
        let mut interfaces = BTreeMap::new();
        let mut worlds = BTreeMap::new();
        for (file, text) in files {
            let mut reader = Reader::default();
            reader.read(text);
            if let Some(found) = reader.package {
                match &package {
                    Some(p) if *p != found => {
                        return Err(format!(
                            "wit/{file} declares package {}@{}, another file {}@{}",
                            found.0, found.1, p.0, p.1
                        ));
                    }
                    _ => package = Some(found),
                }
            }
            interfaces.extend(reader.interfaces);
            worlds.extend(reader.worlds);
        }
        let (name, version) =
            package.ok_or("the WIT package has no `package <name>@<version>;` line")?;
        let version = semver::Version::parse(&version)
            .map_err(|e| format!("WIT package {name}@{version}: not a semantic version: {e}"))?;
        Ok(Self {
            name,
            version,
            interfaces,
            worlds,
        })
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

#[derive(Default)]
struct Reader {
    package: Option<(String, String)>,
    interfaces: BTreeMap<String, InterfaceDoc>,
    worlds: BTreeMap<String, String>,
    pending: Vec<String>,
    depth: usize,
    /// The interface being read (at depth 1).
    current: Option<String>,
    /// A function signature spanning lines, with its docs.
    partial: Option<(String, String)>,
}

impl Reader {
    fn read(&mut self, text: &str) {
        for line in text.lines() {
            let line = line.trim();
            if let Some(doc) = line.strip_prefix("///") {
                self.pending
                    .push(doc.strip_prefix(' ').unwrap_or(doc).to_owned());
                continue;
            }
            let code = line.split("//").next().unwrap_or("").trim();
            if code.is_empty() {
                continue;
            }
            let docs = std::mem::take(&mut self.pending).join("\n");
            self.item(code, docs);
            for c in code.chars() {
                match c {
                    '{' => self.depth += 1,
                    '}' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.depth == 0 {
                            self.current = None;
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn item(&mut self, code: &str, docs: String) {
        if let Some((signature, docs)) = self.partial.take() {
            self.function(format!("{signature} {code}"), docs);
            return;
        }
        let words: Vec<&str> = code.split_whitespace().collect();
        match (self.depth, words.as_slice()) {
            (0, ["package", id, ..]) => {
                let id = id.trim_end_matches(';');
                if let Some((name, version)) = id.split_once('@') {
                    self.package = Some((name.to_owned(), version.to_owned()));
                }
            }
            (0, ["interface", name, ..]) => {
                let name = name.trim_end_matches('{').to_owned();
                self.interfaces.insert(
                    name.clone(),
                    InterfaceDoc {
                        docs,
                        functions: Vec::new(),
                        types: Vec::new(),
                    },
                );
                self.current = Some(name);
            }
            (0, ["world", name, ..]) => {
                self.worlds
                    .insert(name.trim_end_matches('{').to_owned(), docs);
            }
            (1, [kind, name, ..])
                if matches!(
                    *kind,
                    "enum" | "record" | "variant" | "flags" | "resource" | "type"
                ) =>
            {
                let name = name.trim_end_matches(['{', ';']);
                if let Some(i) = self.current_interface() {
                    i.types.push(format!("{kind} {name}"));
                }
            }
            (1, [first, second, ..]) if first.ends_with(':') && second.starts_with("func") => {
                self.function(code.to_owned(), docs);
            }
            _ => {}
        }
    }

    fn function(&mut self, signature: String, docs: String) {
        if !signature.ends_with(';') {
            self.partial = Some((signature, docs));
            return;
        }
        let signature = signature.trim_end_matches(';').to_owned();
        if let Some(i) = self.current_interface() {
            i.functions.push(FunctionDoc { signature, docs });
        }
    }

    fn current_interface(&mut self) -> Option<&mut InterfaceDoc> {
        let name = self.current.as_ref()?;
        self.interfaces.get_mut(name)
    }
}

/// What a WASI interface gives a capability on this host, in one line, for
/// reviewers (WASI's own WIT is not part of this host's package).
pub fn wasi_summary(package_interface: &str) -> Option<&'static str> {
    Some(match package_interface {
        "wasi:io/error" | "wasi:io/poll" | "wasi:io/streams" => {
            "WASI 0.2 I/O plumbing: streams, polling and their errors; reaches nothing by itself"
        }
        "wasi:clocks/wall-clock" | "wasi:clocks/monotonic-clock" => {
            "WASI 0.2 clocks: reads the time"
        }
        "wasi:random/random" | "wasi:random/insecure" | "wasi:random/insecure-seed" => {
            "WASI 0.2 random numbers"
        }
        "wasi:cli/exit" => "WASI 0.2: ends the task's instance",
        "wasi:cli/stdin" => "WASI 0.2 standard input: always closed (empty)",
        "wasi:cli/stdout" => "WASI 0.2 standard output: goes to the task's bounded log",
        "wasi:cli/stderr" => "WASI 0.2 standard error: goes to the task's bounded log",
        "wasi:cli/terminal-input"
        | "wasi:cli/terminal-output"
        | "wasi:cli/terminal-stdin"
        | "wasi:cli/terminal-stdout"
        | "wasi:cli/terminal-stderr" => "WASI 0.2 terminal queries: there is never a terminal",
        "wasi:cli/environment" => {
            "WASI 0.2 environment: no arguments, only the variables grants.env names"
        }
        "wasi:filesystem/types" | "wasi:filesystem/preopens" => {
            "WASI 0.2 files: only inside the directories grants.filesystem lists, with their access"
        }
        "wasi:sockets/network"
        | "wasi:sockets/instance-network"
        | "wasi:sockets/tcp"
        | "wasi:sockets/tcp-create-socket" => {
            "WASI 0.2 TCP: outbound connections to the destinations grants.network lists only"
        }
        "wasi:sockets/udp" | "wasi:sockets/udp-create-socket" => {
            "WASI 0.2 UDP: linked but every UDP socket is refused"
        }
        "wasi:sockets/ip-name-lookup" => {
            "WASI 0.2 name lookup: succeeds only for host names grants.network lists"
        }
        "wasi:http/types" | "wasi:http/outgoing-handler" => {
            "WASI 0.2 outgoing HTTP: sent by the host to granted destinations only, TLS verified"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_package_is_the_repositorys_wit() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .expect("wit/")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "wit"))
            .map(|p| {
                (
                    p.file_name().expect("name").to_string_lossy().into_owned(),
                    std::fs::read_to_string(&p).expect("read"),
                )
            })
            .collect();
        on_disk.sort();
        let embedded: Vec<(String, String)> = HOST_WIT
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect();
        assert_eq!(
            embedded, on_disk,
            "host/bundle/src/wit.rs must embed every wit/*.wit file"
        );
    }

    #[test]
    fn reads_the_host_package_and_its_docs() {
        let p = WitPackage::host().expect("host package");
        assert_eq!(p.id(), "hcp:capability@1.0.0");
        assert_eq!(
            p.version.to_string(),
            hcp_contracts::manifest::HOST_WIT_VERSION
        );
        let log = &p.interfaces["log"];
        assert!(
            log.docs.starts_with(
                "Structured log lines written into the task's log.\n\nAlways granted."
            ),
            "{}",
            log.docs
        );
        assert_eq!(log.types, ["enum level", "record field"]);
        assert_eq!(
            log.functions[0].signature,
            "write: func(level: level, message: string, fields: list<field>)"
        );
        assert!(log.functions[0].docs.starts_with("Appends one line"));
        let instrument = &p.interfaces["instrument"];
        let names: Vec<&str> = instrument
            .functions
            .iter()
            .map(|f| f.signature.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(names, ["command", "read"]);
        assert!(p.worlds["capability"].starts_with("A capability:"));
        for name in [
            "types",
            "log",
            "artifacts",
            "checkpoints",
            "instrument",
            "hid",
        ] {
            assert!(
                !p.interfaces[name].docs.is_empty(),
                "{name} is undocumented"
            );
        }
    }

    #[test]
    fn multi_line_functions_and_conflicting_packages() {
        let p = WitPackage::parse([(
            "a.wit",
            "package x:y@0.1.0;\n/// I.\ninterface i {\n  /// F.\n  f: func(\n    a: u32,\n  ) -> u32;\n}\n",
        )])
        .expect("parse");
        assert_eq!(
            p.interfaces["i"].functions[0].signature,
            "f: func( a: u32, ) -> u32"
        );
        assert_eq!(p.interfaces["i"].functions[0].docs, "F.");
        let err = WitPackage::parse([
            ("a.wit", "package x:y@0.1.0;"),
            ("b.wit", "package x:y@0.2.0;"),
        ])
        .expect_err("two packages");
        assert_eq!(
            err,
            "wit/b.wit declares package x:y@0.2.0, another file x:y@0.1.0"
        );
        assert_eq!(
            WitPackage::parse([("a.wit", "interface i {}")]).expect_err("none"),
            "the WIT package has no `package <name>@<version>;` line"
        );
    }
}
