//! Why a push or a pull did not happen.

/// A push or pull that failed. Nothing was written in any case (a pull
/// keeps what it fetched in memory until every check passed).
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The `oci://` reference is malformed.
    #[error("not a registry reference: {0}")]
    Reference(String),
    /// What the registry served is refused: a digest or size that is not
    /// the one asked for, a redirect to another host, not a bundle.
    #[error("{0}")]
    Refused(String),
    /// The registry could not be reached or answered with an error.
    #[error("{0}")]
    Registry(String),
    /// The local side: a CA file, a credentials file.
    #[error("{0}")]
    Local(String),
}

/// `text` with control characters replaced and cut to 200 characters: what
/// a registry says is quoted in messages, never trusted to be printable.
pub(crate) fn printable(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().count() > 200 {
        out.push_str("...");
    }
    out
}
