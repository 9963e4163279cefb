//! Bundles through OCI registries: `hcp push`, `hcp pull`, `hcp install
//! oci://...` against Debian's `docker-registry` (distribution 2.8) with
//! and without htpasswd users, what was pushed read and copied by
//! `skopeo`, and every hostile registry behaviour refused with nothing
//! installed (against [`Hostile`], a registry that answers as each test
//! says).

use super::{Lab, code, s, stderr, stdout};
use hcp_bundle::{Bundle, Limits};
use hcp_oci::layout::{Artifact, MANIFEST_MEDIA_TYPE, WASM_CONFIG_MEDIA_TYPE};
use hcp_tests::registry::{Hostile, Registry, Reply, Request};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

const REPO: &str = "acme/document-analysis";

/// `hcp args` with `env` set, and a docker config directory of the test's
/// own (never the machine's `~/.docker`).
fn run_env(lab: &Lab, env: &[(&str, String)], args: &[&str]) -> Output {
    let docker = lab.work.path().join("docker");
    std::fs::create_dir_all(&docker).expect("mkdir");
    let mut wrapper = vec![
        "env".to_owned(),
        "-u".to_owned(),
        "HCP_REGISTRY_USER".to_owned(),
        "-u".to_owned(),
        "HCP_REGISTRY_PASSWORD".to_owned(),
        format!("DOCKER_CONFIG={}", docker.display()),
    ];
    wrapper.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    lab.hcp.run_under(&wrapper, args)
}

fn run(lab: &Lab, args: &[&str]) -> Output {
    run_env(lab, &[], args)
}

fn ok(lab: &Lab, args: &[&str]) -> Output {
    let out = run(lab, args);
    assert_eq!(code(&out), 0, "{args:?}\n{}{}", stdout(&out), stderr(&out));
    out
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// Submits the document-analysis example task; its last answer.
fn submit(lab: &Lab) -> Value {
    let path = crate::write_json(lab.work.path(), "submit.json", &crate::seed_submit());
    let out = run(
        lab,
        &["submit", "--as", "harness-local-01", "--wait", s(&path)],
    );
    let answers: Vec<Value> = serde_json::Deserializer::from_str(&stdout(&out))
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    answers.last().expect("an answer").clone()
}

/// The install receipt of the one installed version of document-analysis.
fn receipt(lab: &Lab) -> Value {
    let dir = lab.hcp.data.path().join("capabilities/document-analysis");
    let version = std::fs::read_dir(&dir)
        .expect("installed")
        .flatten()
        .next()
        .expect("a version")
        .file_name();
    let text =
        std::fs::read_to_string(dir.join(version).join("install-receipt.json")).expect("receipt");
    serde_json::from_str(&text).expect("json")
}

#[test]
fn a_pushed_bundle_installs_by_tag_and_by_digest_and_runs() {
    let registry = Registry::start(&[]);
    let lab = Lab::new();
    lab.trust("hcp-examples");
    let bundle = lab.example("document-analysis");
    let tagged = format!("oci://{}/{REPO}:1.0.0", registry.addr());
    let out = ok(&lab, &["push", s(&bundle), &tagged, "--json"]);
    let pushed = json(&out);
    let digest = pushed["digest"].as_str().expect("digest").to_owned();
    assert_eq!(pushed["publisher"], "hcp-examples");

    // A third-party client finds the component where the Wasm OCI
    // artifact puts it.
    let docker = format!("docker://{}/{REPO}:1.0.0", registry.addr());
    let raw = Command::new("skopeo")
        .args(["inspect", "--raw", "--tls-verify=false", &docker])
        .output()
        .expect("skopeo");
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    assert_eq!(
        hcp_contracts::jcs::sha256_bytes_tagged(&raw.stdout),
        digest,
        "skopeo reads the manifest hcp pushed"
    );
    let manifest: Value = serde_json::from_slice(&raw.stdout).expect("json");
    assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let wasm_digest = manifest["layers"][0]["digest"].as_str().expect("digest");
    let layout = lab.work.path().join("layout");
    let copied = Command::new("skopeo")
        .args(["copy", "--src-tls-verify=false", &docker])
        .arg(format!("oci:{}:copied", layout.display()))
        .output()
        .expect("skopeo");
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    let wasm = std::fs::read(
        layout
            .join("blobs/sha256")
            .join(wasm_digest.trim_start_matches("sha256:")),
    )
    .expect("skopeo copied the wasm layer");
    let component = Bundle::read(&std::fs::read(&bundle).expect("read"), &Limits::default())
        .expect("bundle")
        .component()
        .to_vec();
    assert_eq!(wasm, component, "the wasm layer is the component");

    // By tag: the receipt says where from, by the digest the tag named.
    let out = ok(&lab, &["install", &tagged, "--json"]);
    assert_eq!(json(&out)["origin"]["digest"], digest.as_str());
    let r = receipt(&lab);
    assert_eq!(
        r["receipt"]["origin"],
        serde_json::json!({
            "registry": registry.addr().to_string(),
            "repository": REPO,
            "tag": "1.0.0",
            "digest": digest,
        })
    );
    assert_eq!(r["receipt"]["publisher"]["name"], "hcp-examples");
    let out = ok(&lab, &["inspect", "document-analysis@1.0.0"]);
    assert!(
        stdout(&out).contains(&format!("from        {tagged}@{digest}\n")),
        "{}",
        stdout(&out)
    );
    assert_eq!(submit(&lab)["type"], "task_completed");

    // By digest, on another host: the same, with no tag recorded.
    let other = Lab::new();
    // Another host's own publisher key is not the one that signed: refused.
    other.trust("hcp-examples");
    let pinned = format!("oci://{}/{REPO}@{digest}", registry.addr());
    refused(
        &other,
        &pinned,
        "but this host trusts \"hcp-examples\" with key",
    );
    other.ok(&["trust", "remove", "hcp-examples"]);
    other.ok(&["trust", "add", "hcp-examples", &lab.public_key]);
    ok(&other, &["install", &pinned]);
    let r = receipt(&other);
    assert_eq!(r["receipt"]["origin"]["tag"], Value::Null);
    assert_eq!(r["receipt"]["origin"]["digest"], digest.as_str());
    assert_eq!(submit(&other)["type"], "task_completed");

    // A pull writes the bundle file that was pushed, byte for byte.
    let pulled = lab.work.path().join("pulled.hcpb");
    ok(&lab, &["pull", &pinned, "-o", s(&pulled)]);
    assert_eq!(
        std::fs::read(&pulled).expect("pulled"),
        std::fs::read(&bundle).expect("pushed")
    );
}

#[test]
fn an_unsigned_push_is_refused_at_install() {
    let registry = Registry::start(&[]);
    let lab = Lab::new();
    let bundle = lab.pack(
        &Path::new(hcp_tests::REPO_ROOT).join("plugins/document-analysis"),
        "unsigned.hcpb",
    );
    let tagged = format!("oci://{}/{REPO}:unsigned", registry.addr());
    let out = ok(&lab, &["push", s(&bundle), &tagged]);
    assert!(stderr(&out).contains("is unsigned"), "{}", stderr(&out));
    let out = run(&lab, &["install", &tagged]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("the bundle is unsigned")
            && stderr(&out).ends_with("nothing was installed\n"),
        "{}",
        stderr(&out)
    );
    lab.nothing_half_installed(&[]);
}

#[test]
fn a_registry_with_users_takes_their_credentials() {
    let registry = Registry::start(&[("alice", "s3cret-pw")]);
    let lab = Lab::new();
    lab.trust("hcp-examples");
    let bundle = lab.example("document-analysis");
    let tagged = format!("oci://{}/{REPO}:1.0.0", registry.addr());
    // Anonymous: refused by the registry.
    let out = run(&lab, &["push", s(&bundle), &tagged]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("asks for a user and password"),
        "{}",
        stderr(&out)
    );
    // A wrong password: the registry's refusal, said.
    let wrong = [
        ("HCP_REGISTRY_USER", "alice".to_owned()),
        ("HCP_REGISTRY_PASSWORD", "wrong".to_owned()),
    ];
    let out = run_env(&lab, &wrong, &["push", s(&bundle), &tagged]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("401 Unauthorized"),
        "{}",
        stderr(&out)
    );
    // From the environment.
    let env = [
        ("HCP_REGISTRY_USER", "alice".to_owned()),
        ("HCP_REGISTRY_PASSWORD", "s3cret-pw".to_owned()),
    ];
    let out = run_env(&lab, &env, &["push", s(&bundle), &tagged]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Installing anonymously is refused, nothing installed.
    let out = run(&lab, &["install", &tagged]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    lab.nothing_half_installed(&[]);
    // From docker login's config.json.
    let auth = base64_user("alice:s3cret-pw");
    std::fs::create_dir_all(lab.work.path().join("docker")).expect("mkdir");
    std::fs::write(
        lab.work.path().join("docker/config.json"),
        serde_json::json!({"auths": {registry.addr().to_string(): {"auth": auth}}}).to_string(),
    )
    .expect("write");
    ok(&lab, &["install", &tagged]);
    assert_eq!(lab.installed(), ["document-analysis@1.0.0"]);
}

fn base64_user(pair: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in pair.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A signed document-analysis bundle, trusted by `lab`, as an artifact.
fn artifact(lab: &Lab) -> Arc<Artifact> {
    lab.trust("hcp-examples");
    let bundle = lab.example("document-analysis");
    let bundle =
        Bundle::read(&std::fs::read(bundle).expect("read"), &Limits::default()).expect("bundle");
    Arc::new(hcp_oci::layout::artifact(&bundle).expect("artifact"))
}

/// What an honest registry answers for `artifact` (tag `1`).
fn honest(artifact: &Artifact, request: &Request) -> Reply {
    let head = request.method == "HEAD";
    let prefix = format!("/v2/{REPO}/");
    let Some(rest) = request.path.strip_prefix(&prefix) else {
        return Reply::not_found();
    };
    if let Some(reference) = rest.strip_prefix("manifests/") {
        if reference != "1" && reference != artifact.digest {
            return Reply::not_found();
        }
        return Reply::new(
            "200 OK",
            &[
                ("Content-Type", MANIFEST_MEDIA_TYPE),
                ("Docker-Content-Digest", &artifact.digest),
            ],
            &artifact.manifest,
            head,
        );
    }
    if let Some(digest) = rest.strip_prefix("blobs/") {
        let config = hcp_contracts::jcs::sha256_bytes_tagged(&artifact.config);
        if digest == config {
            return Reply::new("200 OK", &[], &artifact.config, head);
        }
        if let Some((_, bytes)) = artifact.layers.iter().find(|(d, _)| d.digest == digest) {
            return Reply::new("200 OK", &[], bytes, head);
        }
    }
    Reply::not_found()
}

/// The component's blob path in `artifact`.
fn wasm_path(artifact: &Artifact) -> String {
    format!("/v2/{REPO}/blobs/{}", artifact.layers[0].0.digest)
}

/// Installs `reference` from `registry` and asserts it was refused with a
/// message holding `says`, nothing installed.
fn refused(lab: &Lab, reference: &str, says: &str) -> String {
    let out = run(lab, &["install", reference]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{}{err}", stdout(&out));
    assert!(err.contains(says), "expected {says:?} in:\n{err}");
    assert!(err.ends_with("nothing was installed\n"), "{err}");
    lab.nothing_half_installed(&[]);
    err
}

/// A hostile registry serving `artifact` honestly but where `twist` answers.
fn hostile(
    artifact: &Arc<Artifact>,
    twist: impl Fn(&Artifact, &Request) -> Option<Reply> + Send + Sync + 'static,
) -> Hostile {
    let artifact = artifact.clone();
    Hostile::start(move |r| twist(&artifact, r).unwrap_or_else(|| honest(&artifact, r)))
}

/// `artifact`'s manifest with one annotation more: another valid
/// manifest, of another digest.
fn other_manifest(artifact: &Artifact) -> Vec<u8> {
    let mut m: Value = serde_json::from_slice(&artifact.manifest).expect("json");
    m["annotations"]["moved"] = "yes".into();
    serde_json::to_vec(&m).expect("json")
}

#[test]
fn the_honest_double_installs() {
    // The control of every hostile case below: served honestly, the same
    // artifact installs.
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let registry = hostile(&artifact, |_, _| None);
    ok(
        &lab,
        &["install", &format!("oci://{}/{REPO}:1", registry.addr())],
    );
    assert_eq!(lab.installed(), ["document-analysis@1.0.0"]);
}

#[test]
fn a_manifest_other_than_the_digest_asked_for_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let registry = hostile(&artifact, |a, r| {
        (r.method == "GET" && r.path.contains("/manifests/"))
            .then(|| Reply::new("200 OK", &[], &other_manifest(a), false))
    });
    let pinned = format!("oci://{}/{REPO}@{}", registry.addr(), artifact.digest);
    refused(&lab, &pinned, "sent a manifest with digest");
}

#[test]
fn a_tag_moved_between_resolve_and_pull_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    // The tag resolves to the artifact; asked by that digest, the registry
    // serves what the tag names by then.
    let registry = hostile(&artifact, |a, r| {
        (r.method == "GET" && r.path.ends_with(&a.digest))
            .then(|| Reply::new("200 OK", &[], &other_manifest(a), false))
    });
    let err = refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "a tag moved",
    );
    assert!(err.contains(&artifact.digest), "{err}");
    let by_tag = registry
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/manifests/1"))
        .count();
    assert_eq!(by_tag, 1, "the tag is resolved once");
}

#[test]
fn a_huge_manifest_is_refused_before_it_is_read() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    // No digest named: the manifest is fetched by tag, announced at 1 GiB.
    let registry = hostile(&artifact, |_, r| {
        r.path.contains("/manifests/").then(|| {
            Reply::raw(
                "200 OK",
                &[("Content-Length", "1073741824")],
                if r.method == "GET" { b"{}" } else { b"" },
            )
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "announces 1073741824 bytes, more than the 4194304 accepted: refused before reading it",
    );
    // Without a length: read no further than the bound.
    let registry = hostile(&artifact, |_, r| {
        r.path.contains("/manifests/").then(|| {
            let body = if r.method == "GET" {
                vec![b' '; 5 << 20]
            } else {
                Vec::new()
            };
            Reply::raw("200 OK", &[], &body)
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "more than the 4194304 bytes accepted",
    );
}

#[test]
fn a_layer_declared_beyond_the_bundle_limits_is_refused_before_download() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let mut m: Value = serde_json::from_slice(&artifact.manifest).expect("json");
    m["layers"][0]["size"] = (300u64 << 20).into();
    let big = serde_json::to_vec(&m).expect("json");
    let digest = hcp_contracts::jcs::sha256_bytes_tagged(&big);
    let registry = hostile(&artifact, move |_, r| {
        r.path.contains("/manifests/").then(|| {
            Reply::new(
                "200 OK",
                &[("Docker-Content-Digest", &digest)],
                &big,
                r.method == "HEAD",
            )
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "declares component.wasm as 314572800 bytes, larger than the component may be",
    );
    assert!(
        !registry
            .requests()
            .iter()
            .any(|r| r.path.contains("/blobs/")),
        "no blob was asked for"
    );
}

#[test]
fn a_blob_larger_than_declared_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    // Announced honestly, then more bytes than that until the connection
    // closes (no Content-Length).
    let registry = hostile(&artifact, |a, r| {
        (r.path == wasm_path(a)).then(|| {
            let mut body = a.layers[0].1.clone();
            body.extend_from_slice(&[0; 4096]);
            Reply::raw("200 OK", &[], &body)
        })
    });
    let reference = format!("oci://{}/{REPO}:1", registry.addr());
    refused(&lab, &reference, "sent more than the");
    // Announced larger than declared: refused before reading it.
    let registry = hostile(&artifact, |a, r| {
        (r.path == wasm_path(a)).then(|| {
            let mut body = a.layers[0].1.clone();
            body.push(0);
            Reply::new("200 OK", &[], &body, false)
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "the manifest declares",
    );
}

#[test]
fn a_blob_with_another_digest_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let registry = hostile(&artifact, |a, r| {
        (r.path == wasm_path(a)).then(|| {
            let mut body = a.layers[0].1.clone();
            let last = body.len() - 1;
            body[last] ^= 1;
            Reply::new("200 OK", &[], &body, false)
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        &format!("not the {} asked for", artifact.layers[0].0.digest),
    );
}

#[test]
fn a_redirect_to_another_host_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let elsewhere = hostile(&artifact, |_, _| None);
    let target = format!("http://localhost:{}", elsewhere.addr().port());
    let registry = hostile(&artifact, move |a, r| {
        (r.path == wasm_path(a)).then(|| {
            let location = format!("{target}{}", r.path);
            Reply::new(
                "307 Temporary Redirect",
                &[("Location", &location)],
                b"",
                false,
            )
        })
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "outside the registry: refused",
    );
    assert!(
        elsewhere.requests().is_empty(),
        "nothing was asked of the other host"
    );
}

#[test]
fn an_error_mid_stream_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let registry = hostile(&artifact, |a, r| {
        (r.path == wasm_path(a)).then(|| {
            let body = &a.layers[0].1;
            let len = body.len().to_string();
            Reply::raw(
                "200 OK",
                &[("Content-Length", &len)],
                &body[..body.len() / 2],
            )
        })
    });
    let half = artifact.layers[0].1.len() / 2;
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        &format!(
            "layer component.wasm ({}): the transfer failed after {half} of {} bytes",
            artifact.layers[0].0.digest,
            artifact.layers[0].1.len()
        ),
    );
}

#[test]
fn the_token_flow_fetches_with_a_bearer_token() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let realm = Arc::new(std::sync::OnceLock::<String>::new());
    let realm_in = realm.clone();
    let registry = hostile(&artifact, move |_, r| {
        if r.path.starts_with("/token?") {
            let basic = format!("Basic {}", base64_user("alice:pw"));
            return Some(if r.header("authorization") == Some(basic.as_str()) {
                Reply::new("200 OK", &[], br#"{"token":"t0k3n"}"#, false)
            } else {
                Reply::new("401 Unauthorized", &[], b"", false)
            });
        }
        if r.header("authorization") == Some("Bearer t0k3n") {
            return None;
        }
        let challenge = format!(
            r#"Bearer realm="{}",service="hostile""#,
            realm_in.get().map_or("", String::as_str)
        );
        Some(Reply::new(
            "401 Unauthorized",
            &[("WWW-Authenticate", &challenge)],
            b"",
            false,
        ))
    });
    let _ = realm.set(format!("http://{}/token", registry.addr()));
    let env = [
        ("HCP_REGISTRY_USER", "alice".to_owned()),
        ("HCP_REGISTRY_PASSWORD", "pw".to_owned()),
    ];
    let out = run_env(
        &lab,
        &env,
        &["install", &format!("oci://{}/{REPO}:1", registry.addr())],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let token = registry
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/token?"))
        .expect("a token request");
    assert!(
        token
            .path
            .contains("scope=repository%3Aacme%2Fdocument-analysis%3Apull"),
        "{}",
        token.path
    );
}

#[test]
fn a_tls_registry_is_reached_with_the_ca_file_given() {
    let registry = Registry::start_with(&[], true);
    let lab = Lab::new();
    lab.trust("hcp-examples");
    let bundle = lab.example("document-analysis");
    let ca = registry.ca();
    // With a CA file, a loopback registry is spoken to over HTTPS.
    let tagged = format!("oci://127.0.0.1:{}/{REPO}:1.0.0", registry.addr().port());
    ok(
        &lab,
        &["push", s(&bundle), &tagged, "--registry-ca", s(&ca)],
    );
    // Without it, plain HTTP to a TLS registry goes nowhere.
    let out = run(&lab, &["install", &tagged]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    lab.nothing_half_installed(&[]);
    // A CA that did not sign the registry's certificate: refused.
    let stranger = lab.work.path().join("stranger");
    hcp_tests::broker::make_certificates(&stranger).expect("certificates");
    let out = run(
        &lab,
        &[
            "install",
            &tagged,
            "--registry-ca",
            s(&stranger.join("ca.pem")),
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).to_lowercase().contains("certificate"),
        "{}",
        stderr(&out)
    );
    lab.nothing_half_installed(&[]);
    ok(&lab, &["install", &tagged, "--registry-ca", s(&ca)]);
    assert_eq!(lab.installed(), ["document-analysis@1.0.0"]);
}

#[test]
fn a_token_service_in_plain_http_off_loopback_is_refused() {
    let lab = Lab::new();
    let artifact = artifact(&lab);
    let registry = hostile(&artifact, |_, _| {
        Some(Reply::new(
            "401 Unauthorized",
            &[(
                "WWW-Authenticate",
                r#"Bearer realm="http://tokens.example/token",service="x""#,
            )],
            b"",
            false,
        ))
    });
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "the token service \"http://tokens.example/token\" is not HTTPS: refused",
    );
}

/// `artifact` with the layer at `path` replaced by `bytes`, its
/// descriptor and the manifest made to match: a consistent artifact whose
/// content the publisher never signed.
fn with_layer(artifact: &Artifact, path: &str, bytes: Vec<u8>) -> Arc<Artifact> {
    let mut layers = artifact.layers.clone();
    let (descriptor, old) = layers
        .iter_mut()
        .find(|(d, _)| {
            d.annotations
                .get(hcp_oci::layout::TITLE)
                .map(String::as_str)
                == Some(path)
        })
        .expect("layer");
    descriptor.digest = hcp_contracts::jcs::sha256_bytes_tagged(&bytes);
    descriptor.size = bytes.len() as u64;
    *old = bytes;
    let mut m: Value = serde_json::from_slice(&artifact.manifest).expect("json");
    m["layers"] =
        serde_json::to_value(layers.iter().map(|(d, _)| d).collect::<Vec<_>>()).expect("json");
    let manifest = serde_json::to_vec(&m).expect("json");
    Arc::new(Artifact {
        config: artifact.config.clone(),
        digest: hcp_contracts::jcs::sha256_bytes_tagged(&manifest),
        manifest,
        layers,
    })
}

#[test]
fn a_layer_the_publisher_did_not_sign_is_refused_by_the_signature() {
    let lab = Lab::new();
    let signed = artifact(&lab);
    // The bundle manifest changed (its description): every digest of the
    // artifact matches, the publisher's signature does not.
    let manifest = &signed.layers[1].1;
    let mut m: Value = serde_json::from_slice(manifest).expect("json");
    m["capability"]["description"] = "changed in the registry".into();
    let changed = with_layer(
        &signed,
        "manifest.json",
        serde_json::to_vec(&m).expect("json"),
    );
    let registry = hostile(&changed, |_, _| None);
    let reference = format!("oci://{}/{REPO}:1", registry.addr());
    refused(&lab, &reference, "the manifest changed after signing");
    // `hcp pull` writes nothing either.
    let pulled = lab.work.path().join("pulled.hcpb");
    let out = run(&lab, &["pull", &reference, "-o", s(&pulled)]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).ends_with("nothing was written\n"),
        "{}",
        stderr(&out)
    );
    assert!(!pulled.exists());
    // The component swapped: the signed manifest pins the original.
    let mut component = signed.layers[0].1.clone();
    component.extend_from_slice(b"\0");
    let swapped = with_layer(&signed, "component.wasm", component);
    let registry = hostile(&swapped, |_, _| None);
    refused(
        &lab,
        &format!("oci://{}/{REPO}:1", registry.addr()),
        "the layers do not form a valid bundle",
    );
}
