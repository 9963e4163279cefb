//! Session tokens (HCP L3): a JWT signed with EdDSA (Ed25519), the
//! algorithm pinned on both sides.
//!
//! The token carries the session, the caller, the capability and its
//! version, the approved risk level and data classification, the hash of the
//! session's safety envelope and its constraints; `exp` is never later than
//! the issue time plus the task's `max_duration`. Verification accepts only
//! `EdDSA` with this host's key, checks issuer, audience, `nbf` and `exp`
//! with no leeway: `alg: none`, HS256 keyed with the public key, a foreign
//! key, an altered payload and an expired token are all refused.

use hcp_contracts::{DataClass, RiskLevel};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The audience of every session token.
pub const AUDIENCE: &str = "hcp:session";

/// What a session token says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionClaims {
    /// The host that issued it.
    pub iss: String,
    /// The caller.
    pub sub: String,
    /// Always [`AUDIENCE`].
    pub aud: String,
    /// The session id.
    pub jti: String,
    /// Issued at (seconds since the epoch).
    pub iat: u64,
    /// Not before.
    pub nbf: u64,
    /// Expires at: at most `iat + max_duration`.
    pub exp: u64,
    /// The capability.
    pub cap: String,
    /// Its exact version.
    pub cap_version: String,
    /// Approved risk level.
    pub risk: RiskLevel,
    /// Approved data classification.
    pub data_class: DataClass,
    /// `sha256:` of the canonical effective safety envelope.
    pub envelope_hash: String,
    /// Approved operational constraints.
    pub constraints: Value,
}

/// Why a token was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Signature, algorithm, format, issuer, audience or time checks failed.
    #[error("session token refused: {0}")]
    Invalid(String),
    /// The token is for another session.
    #[error("session token is for session {found}, not {expected}")]
    WrongSession {
        /// The session it names.
        found: String,
        /// The session expected.
        expected: String,
    },
}

/// The PKCS#8 v1 prefix of an Ed25519 private key (RFC 8410, section 7),
/// followed by the 32-byte seed.
#[cfg(test)]
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// A token's header, encoded as `jsonwebtoken` encodes it.
fn encoded_header() -> String {
    use base64::Engine as _;
    let header =
        serde_json::to_vec(&Header::new(Algorithm::EdDSA)).expect("a JWT header serializes");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(header)
}

/// The host's token keys.
pub struct TokenKeys {
    issuer: String,
    /// Signs tokens: kept, so that a token is not a key parsed and its
    /// public half derived again (most of what `jsonwebtoken::encode`
    /// spends on EdDSA).
    signing: ed25519_dalek::SigningKey,
    /// The encoded header of every token (`{"typ":"JWT","alg":"EdDSA"}`).
    header: String,
    decoding: DecodingKey,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl TokenKeys {
    /// Keys from an Ed25519 seed for tokens issued as `issuer`.
    pub fn from_seed(seed: &[u8; 32], issuer: &str) -> Self {
        let signing = ed25519_dalek::SigningKey::from_bytes(seed);
        Self {
            issuer: issuer.to_owned(),
            decoding: DecodingKey::from_ed_der(signing.verifying_key().as_bytes()),
            header: encoded_header(),
            signing,
        }
    }

    /// Keys of the host key, for tokens issued as `issuer`.
    ///
    /// # Errors
    ///
    /// The key cannot be encoded (not expected).
    pub fn from_host_key(key: &hcp_receipts::HostKey, issuer: &str) -> Result<Self, TokenError> {
        use ed25519_dalek::pkcs8::DecodePrivateKey as _;
        let der = key
            .pkcs8_der()
            .map_err(|e| TokenError::Invalid(format!("host key: {e}")))?;
        let signing = ed25519_dalek::SigningKey::from_pkcs8_der(&der)
            .map_err(|e| TokenError::Invalid(format!("host key: {e}")))?;
        Ok(Self {
            issuer: issuer.to_owned(),
            decoding: DecodingKey::from_ed_der(&key.public().to_bytes()),
            header: encoded_header(),
            signing,
        })
    }

    /// Signs `claims` as this host: `iss` is always this host's issuer and
    /// `aud` always [`AUDIENCE`], whatever the claims say.
    ///
    /// # Errors
    ///
    /// Only if signing fails (a host bug).
    pub fn issue(&self, claims: &SessionClaims) -> Result<String, TokenError> {
        let claims = SessionClaims {
            iss: self.issuer.clone(),
            aud: AUDIENCE.to_owned(),
            ..claims.clone()
        };
        // What `jsonwebtoken::encode` writes (JWS compact serialization,
        // RFC 7515 §7.1), with the key kept.
        use base64::Engine as _;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use ed25519_dalek::Signer as _;
        let payload =
            serde_json::to_vec(&claims).map_err(|e| TokenError::Invalid(e.to_string()))?;
        let message = format!("{}.{}", self.header, URL_SAFE_NO_PAD.encode(payload));
        let signature = self.signing.sign(message.as_bytes());
        Ok(format!(
            "{message}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        ))
    }

    /// Verifies `token` and, when given, that it is for `session`.
    ///
    /// # Errors
    ///
    /// Any check that fails; see the module documentation.
    pub fn verify(&self, token: &str, session: Option<&str>) -> Result<SessionClaims, TokenError> {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.leeway = 0;
        validation.validate_nbf = true;
        validation.set_audience(&[AUDIENCE]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "nbf", "iat", "iss", "aud", "sub", "jti"]);
        let data = jsonwebtoken::decode::<SessionClaims>(token, &self.decoding, &validation)
            .map_err(|e| TokenError::Invalid(e.to_string()))?;
        let claims = data.claims;
        if claims.exp < claims.iat {
            return Err(TokenError::Invalid("expires before it was issued".into()));
        }
        if let Some(expected) = session
            && claims.jti != expected
        {
            return Err(TokenError::WrongSession {
                found: claims.jti,
                expected: expected.to_owned(),
            });
        }
        Ok(claims)
    }
}

impl SessionClaims {
    /// Whether claims that [`Tokens::verify`] accepted still hold at `now`
    /// (seconds since the epoch): their signature cannot change, only the
    /// time can pass `exp`, which `verify` refuses the same way.
    ///
    /// # Errors
    ///
    /// The token has expired.
    pub fn still_valid(&self, now: u64) -> Result<(), TokenError> {
        if self.exp < now {
            return Err(TokenError::Invalid("ExpiredSignature".into()));
        }
        Ok(())
    }
}

/// Seconds since the epoch, now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `exp` for a session issued at `iat` that may run `max_duration`: whole
/// seconds, rounded up, so that a fractional `max_duration` (`PT1.5S`) is
/// not cut to the second below it (the engine bounds the task's deadline
/// at `max_duration` from admission itself).
pub fn expiry(iat: u64, max_duration: Duration) -> u64 {
    let secs = max_duration.as_secs() + u64::from(max_duration.subsec_nanos() > 0);
    iat.saturating_add(secs.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use jsonwebtoken::EncodingKey;

    fn claims(iat: u64, exp: u64) -> SessionClaims {
        SessionClaims {
            iss: "host-test".into(),
            sub: "harness-alpha-001".into(),
            aud: AUDIENCE.into(),
            jti: "session-1".into(),
            iat,
            nbf: iat,
            exp,
            cap: "cvd-material-synthesis".into(),
            cap_version: "1.0.0".into(),
            risk: RiskLevel::R3,
            data_class: DataClass::T2,
            envelope_hash: "sha256:00".into(),
            constraints: serde_json::json!({"max_duration": "PT72H"}),
        }
    }

    fn keys() -> TokenKeys {
        TokenKeys::from_seed(&[7; 32], "host-test")
    }

    fn parts(token: &str) -> Vec<String> {
        token.split('.').map(str::to_owned).collect()
    }

    #[test]
    fn tokens_are_the_bytes_jsonwebtoken_writes() {
        let t = now();
        let c = claims(t, expiry(t, Duration::from_secs(3600)));
        let seed = [7; 32];
        let mut der = PKCS8_ED25519_PREFIX.to_vec();
        der.extend_from_slice(&seed);
        let theirs = |c: &SessionClaims| {
            jsonwebtoken::encode(
                &Header::new(Algorithm::EdDSA),
                c,
                &EncodingKey::from_ed_der(&der),
            )
            .expect("encode")
        };
        let mut expected = c.clone();
        expected.iss = "host-test".into();
        expected.aud = AUDIENCE.into();
        assert_eq!(keys().issue(&c).expect("issue"), theirs(&expected));
        // The same from the host key's PKCS#8 form.
        let host = hcp_receipts::HostKey::generate().expect("key");
        let k = TokenKeys::from_host_key(&host, "host-test").expect("keys");
        let der = host.pkcs8_der().expect("der");
        let token = k.issue(&c).expect("issue");
        let theirs = jsonwebtoken::encode(
            &Header::new(Algorithm::EdDSA),
            &expected,
            &EncodingKey::from_ed_der(&der),
        )
        .expect("encode");
        assert_eq!(token, theirs);
        assert!(k.verify(&token, Some("session-1")).is_ok());
    }

    #[test]
    fn a_fresh_token_verifies_and_carries_the_session() {
        let k = keys();
        let t = now();
        let token = k
            .issue(&claims(t, expiry(t, Duration::from_secs(3600))))
            .expect("issue");
        let header: Value =
            serde_json::from_slice(&B64.decode(&parts(&token)[0]).expect("b64")).expect("json");
        assert_eq!(header["alg"], "EdDSA");
        let c = k.verify(&token, Some("session-1")).expect("valid");
        assert_eq!(c.risk, RiskLevel::R3);
        assert!(matches!(
            k.verify(&token, Some("session-2")),
            Err(TokenError::WrongSession { .. })
        ));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let k = keys();
        let t = now() - 100;
        let token = k.issue(&claims(t - 10, t)).expect("issue");
        let err = k.verify(&token, None).expect_err("expired accepted");
        assert_eq!(err.to_string(), "session token refused: ExpiredSignature");
    }

    #[test]
    fn verified_claims_expire_as_verify_says() {
        let k = keys();
        let t = now();
        let token = k.issue(&claims(t, t + 5)).expect("issue");
        let c = k.verify(&token, None).expect("valid");
        assert!(c.still_valid(t).is_ok());
        assert!(c.still_valid(t + 5).is_ok(), "exp itself is still valid");
        // The same refusal `verify` gives once `exp` has passed.
        let expired = k.issue(&claims(t - 20, t - 10)).expect("issue");
        let by_verify = k.verify(&expired, None).expect_err("expired").to_string();
        let by_claims = c.still_valid(t + 6).expect_err("expired").to_string();
        assert_eq!(by_claims, by_verify);
    }

    #[test]
    fn an_altered_payload_is_refused() {
        let k = keys();
        let t = now();
        let token = k.issue(&claims(t, t + 600)).expect("issue");
        let p = parts(&token);
        let mut c: Value = serde_json::from_slice(&B64.decode(&p[1]).expect("b64")).expect("json");
        c["risk"] = "R5".into();
        let forged = format!("{}.{}.{}", p[0], B64.encode(c.to_string()), p[2]);
        let err = k.verify(&forged, None).expect_err("forged accepted");
        assert_eq!(err.to_string(), "session token refused: InvalidSignature");
    }

    #[test]
    fn alg_none_is_refused() {
        let k = keys();
        let t = now();
        let token = k.issue(&claims(t, t + 600)).expect("issue");
        let p = parts(&token);
        let none = B64.encode(r#"{"alg":"none","typ":"JWT"}"#);
        for forged in [
            format!("{none}.{}.", p[1]),
            format!("{none}.{}.{}", p[1], p[2]),
        ] {
            assert!(k.verify(&forged, None).is_err(), "{forged}");
        }
    }

    #[test]
    fn hs256_keyed_with_the_public_key_is_refused() {
        let k = keys();
        let t = now();
        let public = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
        let forged = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(t, t + 600),
            &EncodingKey::from_secret(public.as_bytes()),
        )
        .expect("encode");
        let err = k.verify(&forged, None).expect_err("HS256 accepted");
        assert_eq!(err.to_string(), "session token refused: InvalidAlgorithm");
    }

    #[test]
    fn a_token_of_another_key_is_refused() {
        let t = now();
        let foreign = TokenKeys::from_seed(&[9; 32], "host-test")
            .issue(&claims(t, t + 600))
            .expect("issue");
        let err = keys().verify(&foreign, None).expect_err("foreign accepted");
        assert_eq!(err.to_string(), "session token refused: InvalidSignature");
    }

    #[test]
    fn another_issuer_or_audience_is_refused() {
        let t = now();
        // Same key, another host name: refused.
        let other = TokenKeys::from_seed(&[7; 32], "host-other")
            .issue(&claims(t, t + 600))
            .expect("issue");
        assert_eq!(
            keys().verify(&other, None).expect_err("issuer").to_string(),
            "session token refused: InvalidIssuer"
        );
        // A hand-made token for another audience, signed with this key.
        let mut c = claims(t, t + 600);
        c.aud = "someone-else".into();
        let mut der = PKCS8_ED25519_PREFIX.to_vec();
        der.extend_from_slice(&[7; 32]);
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::EdDSA),
            &c,
            &EncodingKey::from_ed_der(&der),
        )
        .expect("encode");
        assert_eq!(
            keys().verify(&token, None).expect_err("aud").to_string(),
            "session token refused: InvalidAudience"
        );
    }
}
