//! Deletes on condition, which object_store does not offer (its `delete`
//! takes no options): a DELETE presigned by the backend's own signer and
//! sent with `If-Match`, which S3 and Azure Blob honour. A write that
//! empties a chunk deletes it only at the version it read, so a writer that
//! filled it in the moment between is not lost.
//!
//! Where no URL can be signed (other backends, credentials a signer cannot
//! use), or an S3-compatible server ignores `If-Match` on DELETE (probed
//! once), the version is checked first and the object deleted plainly: the
//! moment between the two stays open there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{ObjectStore, ObjectStoreExt};
use reqwest13 as reqwest;
use tokio::sync::OnceCell;

use super::StoreError;

/// How long a presigned DELETE stays valid: it is sent at once.
const VALID_FOR: Duration = Duration::from_secs(300);

/// Attempts of a DELETE that failed in transit or with a server error.
const ATTEMPTS: u32 = 3;

/// Conditional deletes for one backend that can presign requests.
pub(super) struct SignedDeletes {
    signer: Arc<dyn Signer>,
    client: reqwest::Client,
    /// A key never written, to learn whether the server honours `If-Match`
    /// on DELETE (S3-compatible servers may not); `None`: it does.
    probe: Option<Path>,
    honoured: OnceCell<bool>,
    /// Whether the signer cannot presign at all (then every delete checks first).
    unsigned: AtomicBool,
}

impl std::fmt::Debug for SignedDeletes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedDeletes").finish_non_exhaustive()
    }
}

impl SignedDeletes {
    /// The name of the probe key, in the store's root.
    pub(super) const PROBE: &'static str = ".zarr-serve-if-match-probe";

    pub(super) fn new(signer: Arc<dyn Signer>, client: reqwest::Client, probe: Option<Path>) -> Self {
        Self {
            signer,
            client,
            probe,
            honoured: OnceCell::new(),
            unsigned: AtomicBool::new(false),
        }
    }

    /// Delete `path` (the store's `key`) if it is still at `etag`:
    /// [`StoreError::Changed`] if it is at another version or gone.
    /// `None` when the backend cannot delete on condition (the caller
    /// falls back).
    pub(super) async fn delete(&self, path: &Path, key: &str, etag: &str) -> Option<Result<(), StoreError>> {
        if self.unsigned.load(Ordering::Relaxed) || !self.honours_if_match().await? {
            return None;
        }
        let url = match self.sign(path).await? {
            Ok(url) => url,
            Err(e) => return Some(Err(e)),
        };
        Some(self.send(url, key, etag).await)
    }

    /// A presigned DELETE of `path`; `None` when this signer cannot presign
    /// (remembered), an error when it failed this time.
    async fn sign(&self, path: &Path) -> Option<Result<url::Url, StoreError>> {
        match self.signer.signed_url(reqwest::Method::DELETE, path, VALID_FOR).await {
            Ok(url) => Some(Ok(url)),
            Err(e @ (object_store::Error::NotSupported { .. } | object_store::Error::NotImplemented { .. })) => {
                tracing::warn!(error = %e, "cannot presign a DELETE: deletes are checked, then plain");
                self.unsigned.store(true, Ordering::Relaxed);
                None
            }
            Err(e) => Some(Err(StoreError::Unavailable(format!("cannot sign a DELETE: {e}")))),
        }
    }

    /// Whether the server honours `If-Match` on DELETE, learnt once: a
    /// conditional DELETE of a key that does not exist is 404 (or 412)
    /// where it is honoured and 204 where it is ignored. `None` when the
    /// probe could not be sent (asked again next time).
    async fn honours_if_match(&self) -> Option<bool> {
        let Some(probe) = &self.probe else {
            return Some(true);
        };
        let learnt = self
            .honoured
            .get_or_try_init(|| async {
                let url = self.sign(probe).await.ok_or(())?.map_err(|_| ())?;
                let sent = self
                    .client
                    .delete(url)
                    .header(reqwest::header::IF_MATCH, "\"0\"")
                    .send()
                    .await;
                let status = sent.map_err(|_| ())?.status();
                let honoured = !status.is_success();
                if !honoured {
                    tracing::warn!("the S3 server ignores If-Match on DELETE: deletes are checked, then plain");
                }
                Ok::<bool, ()>(honoured)
            })
            .await;
        learnt.ok().copied()
    }

    async fn send(&self, url: url::Url, key: &str, etag: &str) -> Result<(), StoreError> {
        use reqwest::StatusCode;
        // After a failure in transit the DELETE may have been applied: a
        // 404 then is this delete's own.
        let mut uncertain = false;
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
                    StatusCode::NOT_FOUND if uncertain => return Ok(()),
                    // Another version, or deleted by another writer.
                    StatusCode::PRECONDITION_FAILED | StatusCode::NOT_FOUND => {
                        return Err(StoreError::Changed(key.to_string()))
                    }
                    // A concurrent request on the object (S3), throttling,
                    // a server error: asked again.
                    s if s == StatusCode::CONFLICT || s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() => {
                        uncertain |= s.is_server_error();
                        format!("answered {s}")
                    }
                    s => {
                        return Err(StoreError::Unavailable(format!(
                            "deleting '{key}': the store answered {s}"
                        )))
                    }
                },
                Err(e) => {
                    uncertain = true;
                    e.to_string()
                }
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
