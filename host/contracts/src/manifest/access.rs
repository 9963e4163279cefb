//! The access of a grant to a granted directory or bucket: `read-only` or
//! `read-write`; a leaf that the manifest as written and its table grants
//! both use.

use serde::{Deserialize, Serialize};

/// Access to a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories.
    ReadOnly,
    /// Also create, write, rename and remove.
    ReadWrite,
}

impl Access {
    /// `read-only` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::ReadWrite => "read-write",
        }
    }
}
