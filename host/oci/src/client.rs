//! A small client of the OCI distribution API, for what a bundle needs:
//! resolve a tag, fetch a manifest and blobs by digest, upload blobs and
//! a manifest.
//!
//! What it guarantees (each refusal an [`OciError::Refused`] naming what
//! the registry did):
//!
//! - Every body is bounded before it is read: a `Content-Length` beyond
//!   the bound is refused before a byte is taken, and no more than the
//!   bound (a blob: its declared size) is ever read.
//! - A blob's SHA-256 is computed while it streams and compared with the
//!   digest asked for; a blob longer or shorter than its descriptor is
//!   refused; an error mid-stream is an error, never a short blob.
//! - Redirects are followed only within the registry's own origin (scheme,
//!   host and port), at most three; a redirect elsewhere is refused, and so
//!   is an upload location on another host (credentials go to the registry
//!   named, nowhere else but its token service).
//! - HTTPS, trusting the webpki roots or the CA file given; plain HTTP only
//!   to a loopback registry (without a CA file) or with `plain_http`.
//! - Authentication: anonymous first; on a `401`, `Basic` with the
//!   credentials given, or the registry token flow (`Bearer realm=...`),
//!   presenting the credentials, if any, to the token service.
//!
//! # Ambient authority
//!
//! Network connections to the registry and its token service only; reads
//! the CA file it is given.

use crate::error::{OciError, printable};
use crate::reference::{Reference, check_digest, host_of, is_loopback_host};
use base64::Engine as _;
use sha2::Digest as _;
use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

/// Most redirects followed within the registry's origin.
const MAX_REDIRECTS: u32 = 3;
/// Longest one request may take, its body read (a bundle's largest
/// component, 256 MiB, at about 1 Mbit/s).
const CALL_TIMEOUT: Duration = Duration::from_secs(45 * 60);
/// Largest token answer or error body read.
const MAX_SMALL_BODY: u64 = 64 << 10;

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// A PEM file of CA certificates to trust instead of the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// Speak plain HTTP to a registry that is not on loopback.
    pub plain_http: bool,
    /// A user and password for `Basic` or the token service.
    pub credentials: Option<Credentials>,
}

/// A registry user and password.
#[derive(Clone)]
pub struct Credentials {
    /// The user.
    pub user: String,
    password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<withheld>")
            .finish()
    }
}

impl Credentials {
    /// A user and password.
    pub fn new(user: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            password: password.into(),
        }
    }

    fn basic(&self) -> String {
        let pair = format!("{}:{}", self.user, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// An answer's status, headers and body (read or not yet).
pub(crate) type Answer = http::Response<ureq::Body>;

/// One conversation with one repository of one registry.
pub(crate) struct Session {
    agent: ureq::Agent,
    /// `scheme://host[:port]`.
    origin: String,
    registry: String,
    repository: String,
    /// `pull` or `pull,push`.
    actions: &'static str,
    access: Access,
    authorization: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("origin", &self.origin)
            .field("repository", &self.repository)
            .finish_non_exhaustive()
    }
}

/// Whether plain HTTP may be spoken to `host`.
fn plain_allowed(host: &str, access: &Access) -> bool {
    access.plain_http || is_loopback_host(host)
}

impl Session {
    /// A session with `reference`'s repository, for `push` or pull only.
    pub(crate) fn new(
        reference: &Reference,
        access: &Access,
        push: bool,
    ) -> Result<Self, OciError> {
        let https = !(access.plain_http || (reference.is_loopback() && access.ca_file.is_none()));
        let mut tls = ureq::tls::TlsConfig::builder().provider(ureq::tls::TlsProvider::Rustls);
        if let Some(path) = &access.ca_file {
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&read_ca(path)?));
        }
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(format!("hcp/{}", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(120)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            // A registry trickling bytes cannot hold a call for good: no
            // request, body included, takes longer than this.
            .timeout_per_call(Some(CALL_TIMEOUT))
            .tls_config(tls.build());
        if reference.is_loopback() {
            // A proxy from the environment never stands between this host
            // and a registry on itself.
            config = config.proxy(None);
        }
        Ok(Self {
            agent: ureq::Agent::new_with_config(config.build()),
            origin: format!(
                "{}://{}",
                if https { "https" } else { "http" },
                reference.registry
            ),
            registry: reference.registry.clone(),
            repository: reference.repository.clone(),
            actions: if push { "pull,push" } else { "pull" },
            access: access.clone(),
            authorization: None,
        })
    }

    /// `<origin>/v2/<repository>/<rest>`.
    pub(crate) fn url(&self, rest: &str) -> String {
        format!("{}/v2/{}/{rest}", self.origin, self.repository)
    }

    /// Sends one request, authenticating on a `401` and following
    /// redirects within the origin. `what` names the request in messages.
    pub(crate) fn send(
        &mut self,
        method: http::Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
        what: &str,
    ) -> Result<Answer, OciError> {
        let mut url = url.to_owned();
        let mut redirects = 0;
        let mut authenticated = false;
        loop {
            let mut request = http::Request::builder().method(method.clone()).uri(&url);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            if let Some(authorization) = &self.authorization {
                request = request.header(http::header::AUTHORIZATION, authorization);
            }
            let sent = match body {
                Some(bytes) => request.body(bytes).map(|r| self.agent.run(r)),
                None => request.body(()).map(|r| self.agent.run(r)),
            };
            let answer = sent
                .map_err(|e| OciError::Local(format!("{what}: {e}")))?
                .map_err(|e| OciError::Registry(format!("{}: {what}: {e}", self.registry)))?;
            let status = answer.status();
            if status.is_redirection() {
                let location = header(&answer, http::header::LOCATION).ok_or_else(|| {
                    OciError::Registry(format!(
                        "{}: {what}: a redirect ({status}) without a location",
                        self.registry
                    ))
                })?;
                url = self.within_origin(&location, what)?;
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(OciError::Refused(format!(
                        "{what}: more than {MAX_REDIRECTS} redirects"
                    )));
                }
                continue;
            }
            if status == http::StatusCode::UNAUTHORIZED && !authenticated {
                let challenge =
                    header(&answer, http::header::WWW_AUTHENTICATE).ok_or_else(|| {
                        OciError::Registry(format!(
                            "{}: {what}: 401 Unauthorized without a WWW-Authenticate challenge",
                            self.registry
                        ))
                    })?;
                self.authenticate(&challenge)?;
                authenticated = true;
                continue;
            }
            return Ok(answer);
        }
    }

    /// `location` (absolute, or a path on the origin) as a URL, refused
    /// unless it is on the registry's own origin.
    pub(crate) fn within_origin(&self, location: &str, what: &str) -> Result<String, OciError> {
        if location.starts_with('/') && !location.starts_with("//") {
            return Ok(format!("{}{location}", self.origin));
        }
        let lower = location.to_ascii_lowercase();
        let same = lower == self.origin.to_ascii_lowercase()
            || lower.starts_with(&format!("{}/", self.origin.to_ascii_lowercase()))
            || lower.starts_with(&format!("{}?", self.origin.to_ascii_lowercase()));
        if same {
            return Ok(location.to_owned());
        }
        Err(OciError::Refused(format!(
            "{what}: the registry {} sent it to {:?}, outside the registry: refused \
             (hcp fetches from and sends to the registry named only)",
            self.registry,
            printable(location)
        )))
    }

    /// Answers a `401` challenge: `Basic` with the credentials, or the
    /// token flow.
    fn authenticate(&mut self, challenge: &str) -> Result<(), OciError> {
        let (scheme, params) = parse_challenge(challenge).ok_or_else(|| {
            OciError::Registry(format!(
                "{}: cannot read the authentication challenge {:?}",
                self.registry,
                printable(challenge)
            ))
        })?;
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                let credentials = self.credentials()?;
                self.authorization = Some(credentials.basic());
                Ok(())
            }
            "bearer" => {
                let token = self.token(&params)?;
                self.authorization = Some(format!("Bearer {token}"));
                Ok(())
            }
            other => Err(OciError::Registry(format!(
                "{}: the registry asks for {:?} authentication, which hcp does not speak",
                self.registry,
                printable(other)
            ))),
        }
    }

    /// The credentials, or why there are none. (Plain HTTP is spoken only
    /// to loopback or with `plain_http`: they cross nothing else in clear.)
    fn credentials(&self) -> Result<Credentials, OciError> {
        let credentials = self.access.credentials.clone().ok_or_else(|| {
            OciError::Registry(format!(
                "{}: the registry asks for a user and password: set HCP_REGISTRY_USER and \
                 HCP_REGISTRY_PASSWORD, or log in with docker login (config.json)",
                self.registry
            ))
        })?;
        Ok(credentials)
    }

    /// A token from the registry's token service (`realm`), for this
    /// repository and the session's actions.
    fn token(&mut self, params: &[(String, String)]) -> Result<String, OciError> {
        let get = |name: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let realm = get("realm").ok_or_else(|| {
            OciError::Registry(format!(
                "{}: a Bearer challenge without a realm",
                self.registry
            ))
        })?;
        let (scheme, rest) = realm.split_once("://").ok_or_else(|| {
            OciError::Refused(format!(
                "{}: the token service {:?} is not an http(s) URL",
                self.registry,
                printable(realm)
            ))
        })?;
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let realm_host = host_of(authority);
        match scheme.to_ascii_lowercase().as_str() {
            "https" => {}
            "http" if plain_allowed(realm_host, &self.access) => {}
            _ => {
                return Err(OciError::Refused(format!(
                    "{}: the token service {:?} is not HTTPS: refused (plain HTTP only to \
                     loopback, or with --plain-http)",
                    self.registry,
                    printable(realm)
                )));
            }
        }
        let scope = format!("repository:{}:{}", self.repository, self.actions);
        let mut url = format!(
            "{realm}{}scope={}",
            if realm.contains('?') { '&' } else { '?' },
            encode(&scope)
        );
        if let Some(service) = get("service") {
            url.push_str(&format!("&service={}", encode(service)));
        }
        let mut request = http::Request::builder().method(http::Method::GET).uri(&url);
        if let Some(credentials) = &self.access.credentials {
            request = request.header(http::header::AUTHORIZATION, credentials.basic());
        }
        let what = format!("the token service {}", printable(realm));
        let mut answer = request
            .body(())
            .map_err(|e| OciError::Local(format!("{what}: {e}")))
            .and_then(|r| {
                self.agent
                    .run(r)
                    .map_err(|e| OciError::Registry(format!("{what}: {e}")))
            })?;
        if answer.status().is_redirection() {
            return Err(OciError::Refused(format!(
                "{what} redirected the token request: refused"
            )));
        }
        if !answer.status().is_success() {
            return Err(status_error(&mut answer, &what));
        }
        let body = read_bounded(&mut answer, MAX_SMALL_BODY, &what)?;
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| OciError::Registry(format!("{what}: not a token answer: {e}")))?;
        value
            .get("token")
            .or_else(|| value.get("access_token"))
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_graphic()))
            .map(str::to_owned)
            .ok_or_else(|| OciError::Registry(format!("{what}: the answer holds no token")))
    }
}

/// The certificates of a PEM file.
fn read_ca(path: &std::path::Path) -> Result<Vec<ureq::tls::Certificate<'static>>, OciError> {
    let pem = std::fs::read(path).map_err(|e| {
        OciError::Local(format!("{}: cannot read the CA file: {e}", path.display()))
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(OciError::Local(format!(
                    "{}: not a PEM file of certificates: {e}",
                    path.display()
                )));
            }
        }
    }
    if certs.is_empty() {
        return Err(OciError::Local(format!(
            "{}: holds no certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// A header's value as text.
pub(crate) fn header(answer: &Answer, name: http::header::HeaderName) -> Option<String> {
    answer
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The declared `Content-Length`, if any.
fn content_length(answer: &Answer) -> Option<u64> {
    header(answer, http::header::CONTENT_LENGTH).and_then(|v| v.trim().parse().ok())
}

/// A body of at most `limit` bytes: refused before reading when its
/// `Content-Length` is larger, and when more arrives.
pub(crate) fn read_bounded(
    answer: &mut Answer,
    limit: u64,
    what: &str,
) -> Result<Vec<u8>, OciError> {
    if let Some(len) = content_length(answer)
        && len > limit
    {
        return Err(OciError::Refused(format!(
            "{what}: the registry announces {len} bytes, more than the {limit} accepted: refused \
             before reading it"
        )));
    }
    let mut bytes = Vec::new();
    answer
        .body_mut()
        .as_reader()
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| {
            OciError::Refused(format!(
                "{what}: the transfer failed after {} bytes: {e}",
                bytes.len()
            ))
        })?;
    if bytes.len() as u64 > limit {
        return Err(OciError::Refused(format!(
            "{what}: more than the {limit} bytes accepted: refused"
        )));
    }
    Ok(bytes)
}

/// A blob's body, exactly `size` bytes whose SHA-256 is `digest`, checked
/// as it streams.
pub(crate) fn read_blob(
    answer: &mut Answer,
    digest: &str,
    size: u64,
    what: &str,
) -> Result<Vec<u8>, OciError> {
    if let Some(len) = content_length(answer)
        && len != size
    {
        return Err(OciError::Refused(format!(
            "{what}: the registry announces {len} bytes, the manifest declares {size}: refused \
             before reading it"
        )));
    }
    let mut hasher = sha2::Sha256::new();
    let mut bytes = Vec::with_capacity(usize::try_from(size.min(16 << 20)).unwrap_or(0));
    let mut reader = answer.body_mut().as_reader().take(size.saturating_add(1));
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(OciError::Refused(format!(
                    "{what}: the transfer failed after {} of {size} bytes: {e}",
                    bytes.len()
                )));
            }
        };
        let chunk = &buf[..n];
        if bytes.len() as u64 + n as u64 > size {
            return Err(OciError::Refused(format!(
                "{what}: the registry sent more than the {size} bytes the manifest declares: refused"
            )));
        }
        hasher.update(chunk);
        bytes.extend_from_slice(chunk);
    }
    if (bytes.len() as u64) < size {
        return Err(OciError::Refused(format!(
            "{what}: the transfer ended after {} of the {size} bytes the manifest declares",
            bytes.len()
        )));
    }
    let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
    if actual != digest {
        return Err(OciError::Refused(format!(
            "{what}: the registry sent a blob with digest {actual}, not the {digest} asked for: refused"
        )));
    }
    Ok(bytes)
}

/// The error for an answer that is not a success, with the registry's own
/// `errors` when it gives them.
pub(crate) fn status_error(answer: &mut Answer, what: &str) -> OciError {
    let status = answer.status();
    let body = read_bounded(answer, MAX_SMALL_BODY, what).unwrap_or_default();
    let detail = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("errors")?.as_array()?.first().map(|e| {
                format!(
                    "{} {}",
                    e.get("code").and_then(|c| c.as_str()).unwrap_or(""),
                    e.get("message").and_then(|c| c.as_str()).unwrap_or("")
                )
            })
        })
        .map(|d| format!(": {}", printable(d.trim())))
        .unwrap_or_default();
    let hint = if status == http::StatusCode::UNAUTHORIZED || status == http::StatusCode::FORBIDDEN
    {
        " (the registry refused the credentials, or they do not grant this repository)"
    } else {
        ""
    };
    OciError::Registry(format!(
        "{what}: the registry answered {status}{detail}{hint}"
    ))
}

/// A digest named by the registry in `Docker-Content-Digest`, checked.
pub(crate) fn digest_header(answer: &Answer) -> Result<Option<String>, OciError> {
    match header(
        answer,
        http::header::HeaderName::from_static("docker-content-digest"),
    ) {
        None => Ok(None),
        Some(d) => check_digest(d.trim())
            .map(|()| Some(d.trim().to_owned()))
            .map_err(|e| OciError::Refused(format!("the registry names the manifest {e}"))),
    }
}

/// `scheme k="v", k2=v2` of a `WWW-Authenticate` header (one challenge).
fn parse_challenge(header: &str) -> Option<(String, Vec<(String, String)>)> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = Vec::new();
    let mut chars = rest.trim().chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ',')).collect();
        if chars.next() != Some('=') {
            return None;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect();
        }
        params.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Some((scheme.to_owned(), params))
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse() {
        let (scheme, params) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        )
        .expect("parse");
        assert_eq!(scheme, "Bearer");
        assert_eq!(
            params,
            [
                ("realm".into(), "https://auth.example/token".into()),
                ("service".into(), "registry.example".into()),
                ("scope".into(), "repository:a/b:pull,push".into()),
            ]
        );
        let (scheme, params) = parse_challenge(r#"Basic realm="Registry Realm""#).expect("parse");
        assert_eq!((scheme.as_str(), params.len()), ("Basic", 1));
        assert!(parse_challenge(r#"Bearer realm="unterminated"#).is_none());
        assert_eq!(
            encode("repository:a/b:pull,push"),
            "repository%3Aa%2Fb%3Apull%2Cpush"
        );
    }

    #[test]
    fn credentials_never_print_the_password() {
        let c = Credentials::new("user", "s3cret");
        assert!(!format!("{c:?}").contains("s3cret"));
    }
}
