//! The engine's error type: one variant per thing a caller branches on.

use crate::storage::StoreError;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading a Zarr hierarchy.
///
/// The HTTP layer maps each variant to exactly one status code; keep the
/// variants to what callers need to tell apart.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A node or key does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed: a bad selection, an index out of bounds, a bad key.
    #[error("{0}")]
    InvalidRequest(String),
    /// The node is valid Zarr but uses something this engine does not implement.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Stored data or metadata is damaged; `key` names the store key.
    #[error("corrupt data at key '{key}': {reason}")]
    Corrupt {
        /// The store key whose content is corrupt.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another writer kept changing an object a write needed (409).
    #[error("{0}")]
    Conflict(String),
    /// A write's precondition (`If-Match`) does not hold (412).
    #[error("{0}")]
    PreconditionFailed(String),
    /// The process is at one of its limits (memory for decoded data); retry later.
    #[error("{0}")]
    Overloaded(String),
    /// A bug: code that should not fail did (a panic while decoding, say).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// A corrupt-data error for `key`.
    pub fn corrupt(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Attach a store key to a codec-level corruption message.
    pub(crate) fn at_key(self, key: &str) -> Self {
        match self {
            Error::Corrupt { key: k, reason } if k.is_empty() => Error::Corrupt {
                key: key.to_string(),
                reason,
            },
            other => other,
        }
    }
}

/// A codec-level corruption, before the key is known (see [`Error::at_key`]).
pub(crate) fn corrupt(reason: impl Into<String>) -> Error {
    Error::corrupt("", reason)
}
