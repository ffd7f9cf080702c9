//! Deletes on condition, which object_store does not offer (its `delete`
//! takes no options): a DELETE presigned by the backend's own signer and
//! sent with `If-Match`, which S3 and Azure Blob honour. A write that
//! empties a chunk deletes it only at the version it read, so a writer that
//! filled it in the moment between is not lost.
//!
//! Where no URL can be signed (other backends, credentials a signer cannot
//! use) the version is checked first and the object deleted plainly: the
//! moment between the two stays open there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{ObjectStore, ObjectStoreExt};
use reqwest13 as reqwest;

use super::StoreError;

/// How long a presigned DELETE stays valid: it is sent at once.
const VALID_FOR: Duration = Duration::from_secs(300);

/// Attempts of a DELETE that failed in transit or with a server error.
const ATTEMPTS: u32 = 3;

/// Conditional deletes for one backend that can presign requests.
pub(super) struct SignedDeletes {
    signer: Arc<dyn Signer>,
    client: reqwest::Client,
    /// Whether signing has failed once (then every delete checks first).
    unsigned: AtomicBool,
}

impl std::fmt::Debug for SignedDeletes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedDeletes").finish_non_exhaustive()
    }
}

impl SignedDeletes {
    pub(super) fn new(signer: Arc<dyn Signer>, client: reqwest::Client) -> Self {
        Self {
            signer,
            client,
            unsigned: AtomicBool::new(false),
        }
    }

    /// Delete `path` (the store's `key`) if it is still at `etag`:
    /// [`StoreError::Changed`] if it is at another version or gone.
    /// `None` when no URL could be signed (the caller falls back).
    pub(super) async fn delete(&self, path: &Path, key: &str, etag: &str) -> Option<Result<(), StoreError>> {
        if self.unsigned.load(Ordering::Relaxed) {
            return None;
        }
        let url = match self.signer.signed_url(reqwest::Method::DELETE, path, VALID_FOR).await {
            Ok(url) => url,
            Err(e) => {
                tracing::warn!(error = %e, "cannot presign a DELETE: deletes are checked, then plain");
                self.unsigned.store(true, Ordering::Relaxed);
                return None;
            }
        };
        Some(self.send(url, key, etag).await)
    }

    async fn send(&self, url: url::Url, key: &str, etag: &str) -> Result<(), StoreError> {
        let mut attempt = 1;
        loop {
            let sent = self
                .client
                .delete(url.clone())
                .header(reqwest::header::IF_MATCH, etag)
                .send()
                .await;
            let failure = match sent {
                Ok(response) => match response.status() {
                    s if s.is_success() => return Ok(()),
                    // Another version, or deleted by another writer.
                    reqwest::StatusCode::PRECONDITION_FAILED | reqwest::StatusCode::NOT_FOUND => {
                        return Err(StoreError::Changed(key.to_string()))
                    }
                    s if s.is_server_error() => format!("answered {s}"),
                    s => {
                        return Err(StoreError::Unavailable(format!(
                            "deleting '{key}': the store answered {s}"
                        )))
                    }
                },
                Err(e) => e.to_string(),
            };
            if attempt == ATTEMPTS {
                return Err(StoreError::Unavailable(format!("deleting '{key}': {failure}")));
            }
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            attempt += 1;
        }
    }
}

/// The check-then-delete of a backend without signed deletes: not atomic,
/// but a version already replaced is never deleted.
pub(super) async fn checked(inner: &dyn ObjectStore, path: &Path, key: &str, etag: &str) -> Result<(), StoreError> {
    let current = match inner.head(path).await {
        Ok(meta) => meta.e_tag,
        Err(object_store::Error::NotFound { .. }) => None,
        Err(e) => return Err(StoreError::Unavailable(e.to_string())),
    };
    if current.as_deref() != Some(etag) {
        return Err(StoreError::Changed(key.to_string()));
    }
    match inner.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(StoreError::Unavailable(e.to_string())),
    }
}
