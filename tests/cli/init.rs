//! `hcp init` as a new host's operator and author meet it: `--json`, a
//! publisher name of this host's own, the example bundles installing with
//! `--with-examples` (and the lines to add named without it), and two
//! hosts trusting each other's bundles by one explicit step.

use super::author::{hcp, ok};
use super::{code, stderr, stdout};
use hcp_tests::REPO_ROOT;
use serde_json::Value;
use std::path::Path;

const EXAMPLES: [&str; 3] = [
    "document-analysis",
    "cvd-material-synthesis",
    "hid-assistant",
];

/// `hcp init --json` (with `extra` flags) of `data`, run in `root`.
fn init_json(root: &Path, data: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["init", "--json"];
    args.extend_from_slice(extra);
    let out = hcp(root, data, &args);
    ok(&out, "hcp init --json");
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&out)))
}

/// Packs the example plugin `plugin` into `root/<plugin>.hcpb` and signs it
/// with `data`'s publisher key (named by `data`'s trust store).
fn pack_and_sign(root: &Path, data: &Path, plugin: &str) -> String {
    let bundle = root.join(format!("{plugin}.hcpb"));
    let bundle = bundle.to_str().expect("utf8").to_owned();
    let dir = Path::new(REPO_ROOT).join("plugins").join(plugin);
    ok(
        &hcp(
            root,
            data,
            &["bundle", "pack", dir.to_str().expect("utf8"), "-o", &bundle],
        ),
        "hcp bundle pack",
    );
    let key = data.join("keys/publisher.key");
    ok(
        &hcp(
            root,
            data,
            &[
                "bundle",
                "sign",
                &bundle,
                "--key",
                key.to_str().expect("utf8"),
            ],
        ),
        "hcp bundle sign",
    );
    bundle
}

#[test]
fn init_json_names_this_hosts_publisher_and_the_examples_install_with_with_examples() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let data = root.join("data");
    let init = init_json(root, &data, &["--with-examples"]);

    // The publisher: the host's name and the key id's first 8 digits,
    // trusted here, its public key beside the private one.
    let publisher = &init["publisher"];
    let name = publisher["name"].as_str().expect("name");
    let key_id = publisher["key_id"].as_str().expect("key_id");
    assert!(
        name.ends_with(&format!("-{}", &key_id[..8])) && name != "local-developer",
        "{init:#}"
    );
    assert_eq!(
        std::fs::read_to_string(data.join("keys/publisher.pub")).expect("publisher.pub"),
        format!(
            "{}\n",
            publisher["public_key"].as_str().expect("public_key")
        )
    );
    assert_eq!(
        publisher["trust_command"],
        format!(
            "hcp trust add {name} {}",
            publisher["public_key"].as_str().expect("key")
        )
    );
    let callers: Vec<&str> = init["callers"]
        .as_array()
        .expect("callers")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(callers, ["developer", "operator"]);
    assert!(
        init["callers"][0]["token"]
            .as_str()
            .is_some_and(|t| t.starts_with("hcp-")),
        "{init:#}"
    );
    assert_eq!(init["examples_admitted"], true);
    assert_eq!(
        init["install_policy_lacks_for_examples"],
        serde_json::json!([])
    );

    // Every example bundle installs on this host, signed by its own key.
    for plugin in EXAMPLES {
        let bundle = pack_and_sign(root, &data, plugin);
        let out = hcp(root, &data, &["install", &bundle]);
        ok(&out, &format!("hcp install {plugin}"));
    }
    let out = hcp(root, &data, &["list", "--json"]);
    ok(&out, "hcp list");
    for plugin in EXAMPLES {
        assert!(stdout(&out).contains(plugin), "{}", stdout(&out));
    }
}

#[test]
fn init_without_examples_names_what_install_json_lacks() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let data = root.join("data");
    let out = hcp(root, &data, &["init"]);
    ok(&out, "hcp init");
    let install = data.join("policies/install.json");
    assert!(
        stdout(&out).contains(&format!(
            "the example bundles (plugins/) install here once {} admits: network.allow \
             \"example.com:443\", instruments \"cvd-rig\", devices \"hid\" (or init with \
             --with-examples)\n",
            install.display()
        )),
        "{}",
        stdout(&out)
    );
    // And indeed: the install policy refuses document-analysis for its
    // destination, until the line is added.
    let bundle = pack_and_sign(root, &data, "document-analysis");
    let out = hcp(root, &data, &["install", &bundle]);
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            "grants.network[0] example.com:443 is not a destination this host admits (network.allow)"
        ),
        "{}",
        stderr(&out)
    );
    let mut policy: Value =
        serde_json::from_str(&std::fs::read_to_string(&install).expect("read")).expect("json");
    policy["network"]["allow"] = serde_json::json!(["example.com:443"]);
    std::fs::write(&install, policy.to_string()).expect("write");
    ok(&hcp(root, &data, &["install", &bundle]), "hcp install");
}

#[test]
fn two_hosts_publish_under_their_own_names_and_trust_each_other_explicitly() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let (alice, bob) = (root.join("alice"), root.join("bob"));
    let a = init_json(root, &alice, &["--with-examples"]);
    let b = init_json(root, &bob, &["--with-examples", "--publisher", "bob-lab"]);
    let a_name = a["publisher"]["name"].as_str().expect("name");
    assert_eq!(b["publisher"]["name"], "bob-lab", "--publisher names it");
    assert_ne!(a_name, "bob-lab");

    // Bob's host refuses Alice's bundle, naming the trust step.
    let bundle = pack_and_sign(root, &alice, "document-analysis");
    let out = hcp(root, &bob, &["install", &bundle]);
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stderr(&out).contains(&format!(
            "publisher \"{a_name}\" (key {}) is not trusted on this host",
            a["publisher"]["key_id"].as_str().expect("key id")
        )) && stderr(&out).contains(&format!(
            "`hcp trust add {a_name} <public key>` (the key, or the file holding it: `hcp init` \
             writes a host's as keys/publisher.pub)"
        )),
        "{}",
        stderr(&out)
    );
    // One explicit step, with the public key file Alice's init wrote.
    let public = alice.join("keys/publisher.pub");
    ok(
        &hcp(
            root,
            &bob,
            &["trust", "add", a_name, public.to_str().expect("utf8")],
        ),
        "hcp trust add",
    );
    ok(&hcp(root, &bob, &["install", &bundle]), "hcp install");
}

#[test]
fn a_publisher_name_that_is_not_one_is_refused() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let root = scratch.path();
    let out = hcp(
        root,
        &root.join("data"),
        &["init", "--publisher=not a name!"],
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--publisher"), "{}", stderr(&out));
    assert!(!root.join("data/policies").exists(), "nothing made");
}
