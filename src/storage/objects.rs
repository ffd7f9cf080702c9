//! Keys as objects: of an `object_store` backend (S3, GCS, Azure, HTTP,
//! memory) or of a local directory, read without object_store's extra
//! blocking-thread hop ([`LocalFiles`]). And the request shapes remote
//! backends need, as one wrapper ([`Remote`]): ranges close together
//! fetched in one request, "the last n bytes" as a HEAD and a bounded read
//! where the backend cannot, and a plain HTTP server that cannot list asked
//! again only after a while.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::conditional_delete::{self, SignedDeletes};
use super::local::LocalFiles;
use super::source::{KeySource, Listing};
use super::{ByteRange, Expect, ObjectInfo, Payload, ReadResult, StoreError};

/// The objects under `root` of a backend.
#[derive(Debug)]
pub(super) struct ObjectKeys {
    inner: Arc<dyn ObjectStore>,
    root: Path,
    /// The local file system, when that is the backend.
    local: Option<LocalFiles>,
    /// Deletes on condition, where the backend can presign them.
    deletes: Option<SignedDeletes>,
}

impl ObjectKeys {
    pub(super) fn new(inner: Arc<dyn ObjectStore>, root: Path, local: Option<LocalFiles>) -> Self {
        Self {
            inner,
            root,
            local,
            deletes: None,
        }
    }

    /// These keys with deletes on condition sent as `deletes` presigns them.
    pub(super) fn with_deletes(self, deletes: Option<SignedDeletes>) -> Self {
        Self { deletes, ..self }
    }

    /// Whether this is a local directory (read range by range: reading a
    /// gap between ranges only costs copies).
    pub(super) fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// The backend's path of a valid key.
    pub(super) fn path(&self, key: &str) -> Result<Path, StoreError> {
        if key.is_empty() {
            return Ok(self.root.clone());
        }
        // A valid key's segments need no percent-encoding: they join the
        // (already encoded) root as they are.
        Path::parse(format!("{}/{key}", self.root)).map_err(|e| StoreError::InvalidKey(e.to_string()))
    }

    fn options(if_match: Option<&str>) -> GetOptions {
        GetOptions {
            if_match: if_match.map(str::to_string),
            ..GetOptions::default()
        }
    }

    /// An empty range still checks that the object exists.
    async fn empty_read(&self, key: &str, at: u64) -> Result<Option<ReadResult>, StoreError> {
        Ok(self.head(key).await?.map(|info| ReadResult {
            data: Bytes::new(),
            range: at..at,
            info,
        }))
    }
}

#[async_trait::async_trait]
impl KeySource for ObjectKeys {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        let path = self.path(key)?;
        let range = match range {
            ByteRange::All => None,
            ByteRange::Bounded(r) if r.is_empty() => return self.empty_read(key, r.start).await,
            ByteRange::Bounded(r) => Some(GetRange::Bounded(r)),
            ByteRange::From(o) => Some(GetRange::Offset(o)),
            ByteRange::Suffix(n) => Some(GetRange::Suffix(n)),
        };
        let options = Self::options(if_match);
        let read = async {
            if let Some(local) = &self.local {
                let (meta, mut parts) = local.read(path, range.map(|r| vec![r]), options).await?;
                let (range, data) = parts.pop().expect("one range asked, one read");
                return Ok(ReadResult {
                    data,
                    range,
                    info: object_info(&meta),
                });
            }
            let result = self.inner.get_opts(&path, GetOptions { range, ..options }).await?;
            let info = object_info(&result.meta);
            let range = result.range.clone();
            let data = result.bytes().await?;
            Ok(ReadResult { data, range, info })
        };
        found(read.await)
    }

    /// A local file is opened once and its ranges read on one blocking
    /// thread; other backends get a request per range ([`Remote`] wraps
    /// them to coalesce ranges first).
    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let Some(local) = &self.local else {
            let reads = ranges
                .iter()
                .map(|r| self.get(key, ByteRange::Bounded(r.clone()), if_match));
            let reads = futures::future::try_join_all(reads).await?;
            return Ok(reads.into_iter().map(|r| r.map(|r| r.data)).collect());
        };
        let asked = ranges.iter().map(|r| GetRange::Bounded(r.clone())).collect();
        let fetched = found(local.read(self.path(key)?, Some(asked), Self::options(if_match)).await)?;
        Ok(fetched.map(|(_, parts)| parts.into_iter().map(|(_, data)| data).collect()))
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let path = self.path(key)?;
        let meta = match &self.local {
            Some(local) => local.head(path).await,
            None => self.inner.head(&path).await,
        };
        Ok(found(meta)?.map(|m| object_info(&m)))
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        if self.local.as_ref().is_some_and(|local| !local.lists_inside(prefix)) {
            return Ok((vec![], vec![]));
        }
        let path = self.path(prefix)?;
        let Some(listing) = found(self.inner.list_with_delimiter(Some(&path)).await)? else {
            return Ok((vec![], vec![]));
        };
        let name = |p: &Path| p.filename().unwrap_or_default().to_string();
        let mut dirs: Vec<String> = listing.common_prefixes.iter().map(name).collect();
        let mut files: Vec<String> = listing.objects.iter().map(|m| name(&m.location)).collect();
        dirs.sort();
        files.sort();
        Ok((dirs, files))
    }

    /// A put conditional on `expect`: `If-None-Match: *` or `If-Match` on
    /// S3 and Azure (object_store's `PutMode`); on local disks a new file
    /// renamed into place ([`LocalFiles::put`]).
    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        let path = self.path(key)?;
        if let Some(local) = &self.local {
            return local.put(key, path, data, expect).await;
        }
        let mode = match expect {
            Expect::Anything => PutMode::Overwrite,
            Expect::Absent => PutMode::Create,
            Expect::Version(e_tag) => PutMode::Update(UpdateVersion {
                e_tag: Some(e_tag),
                version: None,
            }),
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self.inner.put_opts(&path, PutPayload::from(data), options).await {
            Ok(done) => Ok(done.e_tag),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Err(StoreError::Changed(key.to_string()))
            }
            Err(e) => Err(StoreError::Unavailable(e.to_string())),
        }
    }

    /// A delete conditional on `expect`: a presigned DELETE with
    /// `If-Match` on S3 and Azure ([`SignedDeletes`]), checked against
    /// `expect` on local disks, checked and then deleted elsewhere.
    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        let path = self.path(key)?;
        if let Some(local) = &self.local {
            return local.delete(key, path, expect).await;
        }
        let etag = match expect {
            Expect::Anything => return found(self.inner.delete(&path).await).map(|_| ()),
            // Nothing there to delete, or something another writer put.
            Expect::Absent => {
                return match self.head(key).await? {
                    None => Ok(()),
                    Some(_) => Err(StoreError::Changed(key.to_string())),
                }
            }
            Expect::Version(etag) => etag,
        };
        if let Some(deletes) = &self.deletes {
            if let Some(done) = deletes.delete(&path, key, &etag).await {
                return done;
            }
        }
        conditional_delete::checked(self.inner.as_ref(), &path, key, &etag).await
    }
}

/// A backend's answer as the store layer's: missing is `None`, a failed
/// precondition is [`StoreError::Changed`].
fn found<T>(result: object_store::Result<T>) -> Result<Option<T>, StoreError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) if is_missing_path(&e) => Ok(None),
        Err(object_store::Error::Precondition { path, .. }) => Err(StoreError::Changed(path)),
        Err(e) => Err(StoreError::Unavailable(e.to_string())),
    }
}

/// A local path through a file (`a.txt/zarr.json`) or naming a directory is
/// a missing key, not a store failure.
fn is_missing_path(error: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{IsADirectory, NotADirectory, NotFound};
            return matches!(io.kind(), NotFound | NotADirectory | IsADirectory);
        }
        source = e.source();
    }
    false
}

pub(super) fn object_info(meta: &object_store::ObjectMeta) -> ObjectInfo {
    ObjectInfo {
        size: meta.size,
        etag: meta.e_tag.clone(),
        last_modified: meta.last_modified.into(),
    }
}

/// How long a plain HTTP store is not asked to list again after it failed to.
const LISTING_RETRY_AFTER: Duration = Duration::from_secs(300);

/// The request shapes a remote backend needs, around its bounded source
/// (so each request it makes is limited and counted on its own).
#[derive(Debug)]
pub(super) struct Remote<S> {
    pub(super) inner: S,
    /// Ranges of one object closer than this are fetched in one request
    /// each (object_store's `coalesce_ranges`).
    pub(super) gap: u64,
    /// The backend cannot read "the last n bytes" (Azure Blob): such a
    /// read is the object's size from a HEAD, then a bounded read
    /// conditional on `if_match` (or on the HEAD's ETag), so both requests
    /// see one version.
    pub(super) suffix_via_head: bool,
    /// Plain HTTP servers: most cannot list (WebDAV `PROPFIND`), and each
    /// try waits out the client's retries, so after a failed listing none
    /// is tried for [`LISTING_RETRY_AFTER`]. When the last one failed;
    /// `None` for backends that list.
    pub(super) listing_refused: Option<Mutex<Option<Instant>>>,
}

#[async_trait::async_trait]
impl<S: KeySource> KeySource for Remote<S> {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        let (ByteRange::Suffix(n), true) = (&range, self.suffix_via_head) else {
            return self.inner.get(key, range, if_match).await;
        };
        let Some(info) = self.inner.head(key).await? else {
            return Ok(None);
        };
        let start = info.size.saturating_sub(*n);
        let version = if_match.map(str::to_string).or(info.etag);
        self.inner
            .get(key, ByteRange::Bounded(start..info.size), version.as_deref())
            .await
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        /// Why a merged range could not be used.
        enum Failed {
            Missing,
            Short,
            Store(StoreError),
        }
        let fetch = |range: Range<u64>| async move {
            let asked = range.end - range.start;
            match self.inner.get(key, ByteRange::Bounded(range), if_match).await {
                Ok(Some(read)) if read.data.len() as u64 == asked => Ok(read.data),
                Ok(Some(_)) => Err(Failed::Short),
                Ok(None) => Err(Failed::Missing),
                Err(e) => Err(Failed::Store(e)),
            }
        };
        match object_store::coalesce_ranges(ranges, fetch, self.gap).await {
            Ok(parts) => Ok(Some(parts)),
            Err(Failed::Missing) => Ok(None),
            Err(Failed::Short) => Ok(Some(vec![Bytes::new(); ranges.len()])),
            Err(Failed::Store(e)) => Err(e),
        }
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        self.inner.head(key).await
    }

    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        self.inner.put(key, data, expect).await
    }

    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        self.inner.delete(key, expect).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        let Some(refused) = &self.listing_refused else {
            return self.inner.list_dir(prefix).await;
        };
        let last = *refused.lock().expect("not poisoned");
        if last.is_some_and(|t| t.elapsed() < LISTING_RETRY_AFTER) {
            return Err(StoreError::Unavailable(
                "this HTTP server does not list directories".into(),
            ));
        }
        let listing = self.inner.list_dir(prefix).await;
        if listing.is_err() {
            *refused.lock().expect("not poisoned") = Some(Instant::now());
        }
        listing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The path object_store builds part by part.
    fn joined_by_parts(root: &Path, key: &str) -> Path {
        Path::from_iter(root.parts().chain(Path::from(key).parts()))
    }

    fn objects(root: Path) -> ObjectKeys {
        ObjectKeys::new(Arc::new(object_store::memory::InMemory::new()), root, None)
    }

    #[test]
    fn keys_join_roots_as_object_store_would() {
        let roots = [
            Path::default(),
            Path::from("bucket/prefix"),
            Path::from_iter(["a dir", "with%percent", "ünï", "x#1"]),
        ];
        for root in roots {
            let objects = objects(root.clone());
            for key in ["", "zarr.json", "a/b/c/0.0", "c/0/1", "x-y_z.0/.zattrs"] {
                assert_eq!(
                    objects.path(key).unwrap(),
                    joined_by_parts(&root, key),
                    "root {root:?}, key {key:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_valid_key_joins_as_object_store_would(key in "[A-Za-z0-9._-]{1,8}(/[A-Za-z0-9._-]{1,8}){0,4}") {
            prop_assume!(super::super::validate_key(&key).is_ok());
            let root = Path::from_iter(["data set", "v%1"]);
            prop_assert_eq!(objects(root.clone()).path(&key).unwrap(), joined_by_parts(&root, &key));
        }
    }
}
