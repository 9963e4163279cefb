//! Why a bundle was refused.

/// A bundle (or a plugin directory being packed) that cannot be accepted.
/// Each message is exact and names the entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Neither a tar archive nor a zstd frame holding one.
    #[error("not a bundle: {0}")]
    NotTar(String),
    /// The archive ends early.
    #[error("truncated bundle: {0}")]
    Truncated(String),
    /// A symbolic or hard link.
    #[error("entry {path:?} is a link; a bundle holds regular files only")]
    Link {
        /// Entry path.
        path: String,
    },
    /// A directory, device, FIFO or other non-regular entry.
    #[error(
        "entry {path:?} is not a regular file (tar type {kind:?}); a bundle holds regular files only"
    )]
    NotRegular {
        /// Entry path.
        path: String,
        /// The tar type flag.
        kind: char,
    },
    /// A PAX or GNU extension header.
    #[error(
        "entry {path:?} is a PAX or GNU extension header (tar type {kind:?}); bundles use plain ustar headers"
    )]
    Extension {
        /// Entry path.
        path: String,
        /// The tar type flag.
        kind: char,
    },
    /// An absolute path or one with `..`.
    #[error("entry {path:?} escapes the bundle (absolute path or `..`)")]
    Traversal {
        /// Entry path.
        path: String,
    },
    /// A path outside the naming rules.
    #[error("entry {path:?}: {reason}")]
    BadPath {
        /// Entry path.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// An entry over its size limit.
    #[error("entry {path:?} has {size} bytes, over the limit of {limit} for {what}")]
    TooLarge {
        /// Entry path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
        /// What kind of entry it is.
        what: &'static str,
    },
    /// Too many entries or bytes in all.
    #[error("bundle too large: {0}")]
    TooMuch(String),
    /// The same path twice.
    #[error("entry {path:?} appears twice")]
    Duplicate {
        /// Entry path.
        path: String,
    },
    /// A required entry is missing.
    #[error("the bundle has no {what}")]
    Missing {
        /// What is missing.
        what: &'static str,
    },
    /// An entry the layout does not allow.
    #[error(
        "unexpected entry {path:?}: a bundle holds manifest.json, component.wasm, wit/*.wit, \
         signature.json, and files under directories its manifest grants read-only as \
         ${{manifest_dir}}/<dir>"
    )]
    Unexpected {
        /// Entry path.
        path: String,
    },
    /// The manifest is not one a bundle may carry.
    #[error("manifest.json: {0}")]
    Manifest(String),
    /// The component is not the one the manifest pins.
    #[error(
        "component.wasm does not match the manifest: it has {actual}, the manifest pins {pinned}"
    )]
    ComponentDigest {
        /// The manifest's `component.digest`.
        pinned: String,
        /// The component's sha256.
        actual: String,
    },
    /// The WIT package is missing pieces or names another version.
    #[error("{0}")]
    Wit(String),
    /// `signature.json` cannot be read.
    #[error("signature.json: {0}")]
    Signature(String),
    /// A plugin directory cannot be packed.
    #[error("{0}")]
    Pack(String),
    /// Reading a file of a plugin directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
}
