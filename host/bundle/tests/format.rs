//! The bundle format: packing is deterministic and reads back; every
//! hostile archive is refused with its exact message.

mod common;

use common::{Raw, entries, manifest, packed, plugin_dir, raw_tar, read, signed, tampered};
use hcp_bundle::{Bundle, Container, Limits, WitSource};
use serde_json::json;

#[test]
fn packing_is_deterministic_and_reads_back() {
    let a = packed().to_bytes().expect("bytes");
    let b = packed().to_bytes().expect("bytes");
    assert_eq!(a, b, "the same plugin packs to the same bytes");
    // Compression pays here (the WIT package is text): a zstd frame.
    let (bundle, container) = Bundle::read_with_container(&a, &Limits::default()).expect("read");
    let archive = packed().to_archive().expect("archive");
    assert_eq!(
        container,
        Container::Zstd {
            archive_bytes: archive.len() as u64
        }
    );
    assert!(
        a.len() < archive.len() / 2,
        "{} of {}",
        a.len(),
        archive.len()
    );
    assert_eq!(bundle.to_archive().expect("archive"), archive);
    // The plain archive reads the same.
    let plain = read(&archive).expect("plain tar");
    assert_eq!(plain.to_bytes().expect("bytes"), a);
    let paths: Vec<String> = entries(&archive).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        [
            "component.wasm",
            "manifest.json",
            "samples/a.md",
            "samples/sub/b.txt",
            "wit/artifacts.wit",
            "wit/checkpoints.wit",
            "wit/hid.wit",
            "wit/instrument.wit",
            "wit/log.wit",
            "wit/types.wit",
            "wit/world.wit",
        ]
    );
    let bundle = read(&a).expect("read");
    assert_eq!(bundle.id(), "probe@1.0.0");
    assert_eq!(bundle.doc().component.path, "component.wasm");
    assert_eq!(
        bundle.doc().component.digest.as_deref(),
        Some(bundle.component_digest())
    );
    assert!(bundle.wit_is_hosts());
    assert_eq!(bundle.wit().id(), "hcp:capability@1.0.0");
    assert_eq!(bundle.data_dirs(), ["samples"]);
    assert_eq!(bundle.check_world(), Ok(()));
    // Every header is the fixed one: mode 0644, owner 0, mtime 0.
    let mut archive = tar::Archive::new(archive.as_slice());
    for e in archive.entries().expect("entries") {
        let e = e.expect("entry");
        let h = e.header();
        assert_eq!(
            (h.mode().ok(), h.uid().ok(), h.mtime().ok()),
            (Some(0o644), Some(0), Some(0))
        );
    }
    // Signing and reading back keeps it.
    let signed = signed().to_bytes().expect("bytes");
    assert_eq!(
        read(&signed).expect("read").to_bytes().expect("bytes"),
        signed
    );
}

#[test]
fn packing_refuses_what_a_bundle_cannot_ship() {
    let mut rw = manifest();
    rw["grants"]["filesystem"][0]["access"] = json!("read-write");
    let dir = plugin_dir(&rw);
    let e = hcp_bundle::pack_dir(dir.path(), WitSource::Host).expect_err("read-write");
    assert_eq!(
        e.to_string(),
        "manifest.json: grants.filesystem[0] ${manifest_dir}/samples is read-write: a bundle \
         ships read-only data only; grant a directory the operator provides for anything written"
    );

    let mut whole = manifest();
    whole["grants"]["filesystem"][0]["path"] = json!("${manifest_dir}");
    let dir = plugin_dir(&whole);
    let e = hcp_bundle::pack_dir(dir.path(), WitSource::Host).expect_err("whole dir");
    assert_eq!(
        e.to_string(),
        "manifest.json: grants.filesystem[0] ${manifest_dir}: a bundle cannot grant \
         ${manifest_dir} itself (its own install directory); grant a subdirectory"
    );

    #[cfg(unix)]
    {
        let dir = plugin_dir(&manifest());
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("samples/passwd"))
            .expect("symlink");
        let e = hcp_bundle::pack_dir(dir.path(), WitSource::Host).expect_err("symlink");
        assert_eq!(
            e.to_string(),
            format!(
                "{}/samples/passwd: a symbolic link; a bundle ships regular files only",
                dir.path().display()
            )
        );
    }

    // The manifest's world is not the version of the WIT package packed.
    let dir = plugin_dir(&manifest());
    let wit = dir.path().join("other-wit");
    std::fs::create_dir(&wit).expect("mkdir");
    std::fs::write(
        wit.join("world.wit"),
        "package hcp:capability@1.0.1;\n/// A capability.\nworld capability {}\n",
    )
    .expect("write");
    let e = hcp_bundle::pack_dir(dir.path(), WitSource::Dir(&wit)).expect_err("world");
    assert_eq!(
        e.to_string(),
        "the bundle's WIT package is hcp:capability@1.0.1 but its manifest targets \
         hcp:capability@1.0.0; pack with --wit <dir> naming the WIT package the component was \
         built against"
    );

    // A world this host does not run is refused by the manifest check,
    // naming both versions.
    let mut newer = manifest();
    newer["component"]["world"] = json!("hcp:capability/capability@2.0.0");
    let dir = plugin_dir(&newer);
    let e = hcp_bundle::pack_dir(dir.path(), WitSource::Host).expect_err("world");
    assert!(
        e.to_string().ends_with(
            "manifest.json: invalid manifest:\n  /component/world: component targets \
             hcp:capability@2.0.0 but this host implements hcp:capability@1.0.0; a host runs \
             components of the same major version, not newer than its own"
        ),
        "{e}"
    );
}

#[test]
fn not_a_tar_or_truncated() {
    let good = packed().to_archive().expect("archive");
    // Where the last entry's data starts, and its size.
    let (start, size) = {
        let mut archive = tar::Archive::new(std::io::Cursor::new(good.as_slice()));
        archive
            .entries_with_seek()
            .expect("entries")
            .map(|e| e.expect("entry"))
            .map(|e| (e.raw_file_position() as usize, e.size()))
            .last()
            .expect("entries")
    };
    assert!(size > 512, "wit/world.wit holds more than one block");
    let cases: Vec<(Vec<u8>, String)> = vec![
        (
            Vec::new(),
            "not a bundle: 0 bytes, shorter than one 512-byte tar header".into(),
        ),
        (
            br#"{"capability": "not a tar at all"}"#.repeat(40),
            "not a bundle: neither a zstd frame nor a tar archive (the first block is not a tar \
             header)"
                .into(),
        ),
        (
            good[..good.len() - 1].to_vec(),
            format!(
                "truncated bundle: {} bytes is not a whole number of 512-byte tar blocks",
                good.len() - 1
            ),
        ),
        (
            good[..start + 512].to_vec(),
            format!(
                "truncated bundle: entry \"wit/world.wit\" declares {size} bytes, the archive holds 512"
            ),
        ),
        (
            good[..good.len() - 1024].to_vec(),
            "truncated bundle: the archive ends without its end-of-archive marker (two zero blocks)"
                .into(),
        ),
    ];
    for (bytes, expected) in cases {
        let e = read(&bytes).expect_err(&expected);
        assert_eq!(e, expected);
    }
}

#[test]
fn compressed_bundles_are_checked_like_plain_ones() {
    let good = packed().to_bytes().expect("bytes");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            good[..good.len() / 2].to_vec(),
            "truncated bundle: the zstd frame ends early",
        ),
        (
            [good.as_slice(), b"trailing"].concat(),
            "not a bundle: 8 bytes after the zstd frame",
        ),
        (
            // A frame that holds no tar.
            zstd_frame(&br#"{"not": "a tar"}"#.repeat(40)),
            "not a bundle: neither a zstd frame nor a tar archive (the first block is not a tar \
             header)",
        ),
        (
            // Hostile entries inside a frame are refused the same way.
            zstd_frame(&raw_tar(&[Raw::file("../evil.sh", b"x")])),
            "entry \"../evil.sh\" escapes the bundle (absolute path or `..`)",
        ),
        (
            // A small file that decompresses to a manifest over its limit.
            zstd_frame(&raw_tar(&[Raw::file(
                "manifest.json",
                &vec![b' '; (1 << 20) + 1],
            )])),
            "entry \"manifest.json\" has 1048577 bytes, over the limit of 1048576 for the manifest",
        ),
    ];
    for (bytes, expected) in cases {
        let e = read(&bytes).expect_err(expected);
        assert_eq!(e, expected);
    }
    let mut garbled = good.clone();
    for b in &mut garbled[16..64] {
        *b = !*b;
    }
    let e = read(&garbled).expect_err("garbled");
    assert!(e.starts_with("not a bundle: corrupt zstd frame: "), "{e}");
    // A frame that would decompress past the limits stops there.
    let bomb = zstd_frame(&vec![0; 4 << 20]);
    assert!(bomb.len() < 4096);
    let small = Limits {
        total_bytes: 1 << 20,
        entries: 16,
        ..Limits::default()
    };
    let e = Bundle::read(&bomb, &small).expect_err("bomb");
    assert_eq!(
        e.to_string(),
        "bundle too large: it decompresses to more than 1065984 bytes"
    );
}

/// `bytes` as one zstd frame.
fn zstd_frame(bytes: &[u8]) -> Vec<u8> {
    // The crate compresses whatever pays; these inputs all compress.
    let out = hcp_bundle::container::compress(bytes).expect("compress");
    assert!(out.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
    out
}

#[test]
fn traversal_links_and_special_entries() {
    let m = serde_json::to_vec(&manifest()).expect("json");
    let link = |name: &'static str, kind, target: &'static [u8]| Raw {
        name: name.as_bytes(),
        kind,
        data: b"",
        link: Some(target),
    };
    let cases: Vec<(Vec<Raw<'_>>, &str)> = vec![
        (
            vec![Raw::file("../evil.sh", b"x")],
            "entry \"../evil.sh\" escapes the bundle (absolute path or `..`)",
        ),
        (
            vec![Raw::file("samples/../../evil.sh", b"x")],
            "entry \"samples/../../evil.sh\" escapes the bundle (absolute path or `..`)",
        ),
        (
            vec![Raw::file("/etc/cron.d/evil", b"x")],
            "entry \"/etc/cron.d/evil\" escapes the bundle (absolute path or `..`)",
        ),
        (
            vec![link(
                "samples/passwd",
                tar::EntryType::Symlink,
                b"/etc/passwd",
            )],
            "entry \"samples/passwd\" is a link; a bundle holds regular files only",
        ),
        (
            vec![link("samples/hard", tar::EntryType::Link, b"manifest.json")],
            "entry \"samples/hard\" is a link; a bundle holds regular files only",
        ),
        (
            vec![Raw {
                name: b"samples/",
                kind: tar::EntryType::Directory,
                data: b"",
                link: None,
            }],
            "entry \"samples/\" is not a regular file (tar type '5'); a bundle holds regular files only",
        ),
        (
            vec![Raw {
                name: b"fifo",
                kind: tar::EntryType::Fifo,
                data: b"",
                link: None,
            }],
            "entry \"fifo\" is not a regular file (tar type '6'); a bundle holds regular files only",
        ),
        (
            vec![Raw {
                name: b"pax",
                kind: tar::EntryType::XHeader,
                data: b"",
                link: None,
            }],
            "entry \"pax\" is a PAX or GNU extension header (tar type 'x'); bundles use plain ustar headers",
        ),
        (
            vec![
                Raw::file("manifest.json", &m),
                Raw::file("manifest.json", &m),
            ],
            "entry \"manifest.json\" appears twice",
        ),
        (
            vec![Raw::file("sp ace", b"x")],
            "entry \"sp ace\": path components use [A-Za-z0-9._-] only",
        ),
    ];
    for (raws, expected) in cases {
        let e = read(&raw_tar(&raws)).expect_err(expected);
        assert_eq!(e, expected);
    }
}

#[test]
fn oversized_entries_are_refused_before_they_are_read() {
    let big = vec![b' '; (1 << 20) + 1];
    let e = read(&raw_tar(&[Raw::file("manifest.json", &big)])).expect_err("big");
    assert_eq!(
        e,
        "entry \"manifest.json\" has 1048577 bytes, over the limit of 1048576 for the manifest"
    );
    // A header that claims more than the limit, with no data behind it: the
    // size alone refuses it.
    let mut bytes = raw_tar(&[Raw::file("component.wasm", b"")]);
    let mut h = tar::Header::new_ustar();
    h.as_mut_bytes().copy_from_slice(&bytes[..512]);
    h.set_size(1 << 40);
    h.set_cksum();
    bytes[..512].copy_from_slice(h.as_bytes());
    let e = read(&bytes).expect_err("huge");
    assert_eq!(
        e,
        "entry \"component.wasm\" has 1099511627776 bytes, over the limit of 268435456 for the component"
    );
    let small = Limits {
        data_file_bytes: 2,
        ..Limits::default()
    };
    let e = Bundle::read(&packed().to_bytes().expect("bytes"), &small).expect_err("small");
    assert_eq!(
        e.to_string(),
        "entry \"samples/a.md\" has 4 bytes, over the limit of 2 for a data file"
    );
    let few = Limits {
        entries: 3,
        ..Limits::default()
    };
    let e = Bundle::read(&packed().to_bytes().expect("bytes"), &few).expect_err("few");
    assert_eq!(e.to_string(), "bundle too large: more than 3 entries");
}

#[test]
fn unexpected_and_missing_entries() {
    let e = read(&tampered(|l| {
        l.push(("run.sh".into(), b"#!/bin/sh".to_vec()))
    }))
    .expect_err("x");
    assert_eq!(
        e,
        "unexpected entry \"run.sh\": a bundle holds manifest.json, component.wasm, wit/*.wit, \
         signature.json, and files under directories its manifest grants read-only as \
         ${manifest_dir}/<dir>"
    );
    let e = read(&tampered(|l| {
        l.push(("wit/deps/x.wit".into(), b"".to_vec()))
    }))
    .expect_err("x");
    assert!(e.starts_with("unexpected entry \"wit/deps/x.wit\""), "{e}");
    let e = read(&tampered(|l| l.retain(|(p, _)| p != "component.wasm"))).expect_err("x");
    assert_eq!(e, "the bundle has no component.wasm");
    let e = read(&tampered(|l| l.retain(|(p, _)| p != "manifest.json"))).expect_err("x");
    assert_eq!(e, "the bundle has no manifest.json");
    let e = read(&tampered(|l| l.retain(|(p, _)| !p.starts_with("wit/")))).expect_err("x");
    assert_eq!(e, "the bundle has no WIT package (wit/*.wit)");
}

#[test]
fn the_component_must_be_the_one_the_manifest_pins() {
    let bytes = tampered(|l| {
        for (p, d) in l.iter_mut() {
            if p == "component.wasm" {
                d.push(0);
            }
        }
    });
    let e = read(&bytes).expect_err("tampered");
    assert!(
        e.starts_with("component.wasm does not match the manifest: it has sha256:"),
        "{e}"
    );
    let edit_manifest = |f: &dyn Fn(&mut serde_json::Value)| {
        tampered(|l| {
            for (p, d) in l.iter_mut() {
                if p == "manifest.json" {
                    let mut v: serde_json::Value = serde_json::from_slice(d).expect("json");
                    f(&mut v);
                    *d = serde_json::to_vec(&v).expect("json");
                }
            }
        })
    };
    let e = read(&edit_manifest(&|v| {
        v["component"]["path"] = json!("../x.wasm")
    }))
    .expect_err("x");
    assert_eq!(
        e,
        "manifest.json: component.path is \"../x.wasm\"; in a bundle it must be \"component.wasm\""
    );
    let e = read(&edit_manifest(&|v| {
        v["component"]
            .as_object_mut()
            .expect("obj")
            .remove("digest");
    }))
    .expect_err("x");
    assert_eq!(e, "manifest.json: component.digest is required in a bundle");
    let e = read(&edit_manifest(&|v| v["backdoor"] = json!(true))).expect_err("x");
    assert!(
        e.starts_with("manifest.json: unknown field `backdoor`"),
        "{e}"
    );
}
