//! TLS for `hcp serve` (rustls with ring): the certificate chain and its
//! private key from PEM files (`--tls-cert`, `--tls-key`), read at start
//! and again on SIGHUP ([`Tls::reload`]). A new pair that does not load
//! (unreadable, no certificate, no key, a key that is not the
//! certificate's) is refused and the pair in force kept: connections
//! opened afterwards get the new certificate, open ones keep theirs.

use anyhow::{Context as _, Result};
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::Digest as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Largest PEM file read: a chain and a key are a few KB.
const PEM_LIMIT: u64 = 1 << 20;

/// Where the server's certificate and key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The server's TLS: its configuration, and the pair in force.
pub struct Tls {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: Arc<Current>,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

/// The pair in force, given to every handshake.
#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

impl Tls {
    /// Loads the pair `files` names.
    ///
    /// # Errors
    ///
    /// A file cannot be read, holds no certificate or no key, or the key
    /// is not the certificate's.
    pub fn load(files: TlsFiles) -> Result<Arc<Self>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (pair, _) = certified(&files, &provider)?;
        let current = Arc::new(Current(RwLock::new(Arc::new(pair))));
        let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        // The server speaks HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(Self {
            files,
            provider,
            current,
            config: Arc::new(config),
        }))
    }

    /// Reads the pair again (SIGHUP) and puts it in force; on any problem
    /// the pair in force is kept. Returns the new certificate's SHA-256
    /// fingerprint (hex).
    ///
    /// # Errors
    ///
    /// As [`Tls::load`]: the new pair is refused.
    pub fn reload(&self) -> Result<String> {
        let (pair, fingerprint) = certified(&self.files, &self.provider)?;
        *self.current.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pair);
        Ok(fingerprint)
    }

    /// The SHA-256 fingerprint (hex) of the certificate in force.
    pub fn fingerprint(&self) -> String {
        let pair = self
            .current
            .0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        pair.cert.first().map(fingerprint).unwrap_or_default()
    }

    /// The files it reads.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// What accepts a connection's handshake.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}

fn fingerprint(cert: &CertificateDer<'_>) -> String {
    hex::encode(sha2::Sha256::digest(cert.as_ref()))
}

/// A PEM file, bounded.
fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>> {
    let shown = path.display();
    let meta = std::fs::metadata(path).with_context(|| format!("{flag} {shown}"))?;
    if meta.len() > PEM_LIMIT {
        anyhow::bail!(
            "{flag} {shown}: {} bytes; a PEM file is at most {PEM_LIMIT}",
            meta.len()
        );
    }
    std::fs::read(path).with_context(|| format!("{flag} {shown}"))
}

/// The pair `files` names, checked, and its certificate's fingerprint.
fn certified(files: &TlsFiles, provider: &CryptoProvider) -> Result<(CertifiedKey, String)> {
    let cert_shown = files.cert.display();
    let key_shown = files.key.display();
    let chain = CertificateDer::pem_slice_iter(&read_pem(&files.cert, "--tls-cert")?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--tls-cert {cert_shown}: a damaged certificate: {e}"))?;
    let Some(first) = chain.first() else {
        anyhow::bail!(
            "--tls-cert {cert_shown}: no PEM certificate in it (-----BEGIN CERTIFICATE----- blocks)"
        );
    };
    let fingerprint = fingerprint(first);
    let key = PrivateKeyDer::from_pem_slice(&read_pem(&files.key, "--tls-key")?).map_err(|e| {
        anyhow::anyhow!(
            "--tls-key {key_shown}: no private key in it (a PKCS#8, PKCS#1 or SEC1 PEM block): {e}"
        )
    })?;
    let pair = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        anyhow::anyhow!("--tls-key {key_shown} is not the key of --tls-cert {cert_shown}: {e}")
    })?;
    Ok((pair, fingerprint))
}
