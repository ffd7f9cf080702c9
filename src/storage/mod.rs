//! The store layer: the only module that talks to `object_store`.
//!
//! # Contract
//! A [`Store`] is one dataset's root in a local directory, S3 or an
//! S3-compatible server, GCS, Azure or plain HTTP. It offers whole and ranged
//! reads (optionally conditional on an ETag), HEAD and directory listing.
//! Every key is validated ([`validate_key`]) before it reaches a backend.
//! Missing keys are `Ok(None)`, never errors. Every request is bounded by a
//! timeout and by the dataset's limit of concurrent requests, and counted.

mod containers;
mod icechunk;
mod key;
mod local;
mod open;
mod redirects;
mod references;
/// The fuzz property of the kerchunk parser ([`crate::fuzz_checks`]).
pub(crate) use references::check_parse as check_reference_set;

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use tokio::sync::Semaphore;

pub use containers::VirtualContainer;
pub use icechunk::{Refs, Version};
pub use key::{join, validate_key};
pub use open::StoreOptions;

use self::icechunk::{IcechunkRepository, IcechunkSnapshot};
use self::references::ReferenceSet;

/// Why a store request failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store answered with an error or could not be reached.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store did not answer within the configured timeout.
    #[error("store timed out after {0:?}")]
    Timeout(Duration),
    /// A conditional read found that the object changed.
    #[error("object '{0}' changed during the read")]
    Changed(String),
    /// A key failed validation; it never reached the store.
    #[error("{0}")]
    InvalidKey(String),
    /// The requested byte range is outside the object.
    #[error("range not satisfiable for an object of {0} bytes")]
    RangeNotSatisfiable(u64),
    /// A reference points outside the dataset's `virtual_chunk_containers`;
    /// nothing was fetched.
    #[error("{0}")]
    Forbidden(String),
    /// A well-formed ref that the repository does not have.
    #[error("{0}")]
    UnknownVersion(String),
    /// A malformed ref, or a ref of a store without versions.
    #[error("{0}")]
    BadVersion(String),
}

/// Counters of one store, read by `/metrics`.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Requests sent (GET, ranged GET, HEAD, LIST).
    pub requests: AtomicU64,
    /// Ranged GET requests among them.
    pub range_requests: AtomicU64,
    /// Payload bytes received.
    pub bytes: AtomicU64,
    /// Requests that failed (not counting missing keys).
    pub(crate) errors: AtomicU64,
}

/// Metadata of a stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Size in bytes.
    pub size: u64,
    /// The store's ETag (version) of the object.
    pub etag: Option<String>,
    /// Last modification time.
    pub(crate) last_modified: std::time::SystemTime,
}

/// Bytes read from an object, with the object's metadata.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// The bytes read.
    pub data: Bytes,
    /// The byte range they cover.
    pub range: Range<u64>,
    /// The object's metadata.
    pub info: ObjectInfo,
}

/// Which bytes of an object to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ByteRange {
    /// The whole object.
    All,
    /// `start..end`
    Bounded(Range<u64>),
    /// From an offset to the end.
    From(u64),
    /// The last `n` bytes.
    Suffix(u64),
}

impl ByteRange {
    /// The bytes this selects of an object of `len` bytes (clamped to it).
    pub(crate) fn within(&self, len: u64) -> Range<u64> {
        match self {
            ByteRange::All => 0..len,
            ByteRange::Bounded(r) => r.start.min(len)..r.end.min(len),
            ByteRange::From(o) => (*o).min(len)..len,
            ByteRange::Suffix(n) => len.saturating_sub(*n)..len,
        }
    }
}

/// `Changed` unless `if_match`, when given, is the object's `version`.
pub(crate) fn check_version(key: &str, if_match: Option<&str>, version: Option<&str>) -> Result<(), StoreError> {
    match if_match {
        Some(wanted) if Some(wanted) != version => Err(StoreError::Changed(key.to_string())),
        _ => Ok(()),
    }
}

/// One dataset's root in a store.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    root: Path,
    stats: Arc<StoreStats>,
    /// Bounds the requests in flight to this store, so one dataset cannot
    /// exhaust the backend (or the process) under a flood of requests.
    limiter: Arc<Semaphore>,
    timeout: Duration,
    /// The local file system, when that is the backend: cheap requests,
    /// read without object_store's extra blocking-thread hop.
    local: Option<local::LocalFiles>,
    /// Whether the backend reads "the last n bytes" (Azure Blob does not:
    /// such reads become a HEAD and a bounded range).
    suffix_ranges: bool,
    /// See [`StoreOptions::coalesce_gap`].
    coalesce_gap: Option<u64>,
    /// Plain HTTP servers: when a listing last failed. Most cannot list
    /// (WebDAV `PROPFIND`), and each try waits out the client's retries, so
    /// listings are not tried again for [`LISTING_RETRY_AFTER`].
    listing_refused: Option<Arc<std::sync::Mutex<Option<std::time::Instant>>>>,
    /// What the keys are read from.
    source: Source,
}

/// What a store's keys are read from.
#[derive(Debug, Clone)]
enum Source {
    /// Objects of the store itself.
    Objects,
    /// An Icechunk repository at its `main` branch.
    Repository(Arc<IcechunkRepository>),
    /// One snapshot of an Icechunk repository.
    Snapshot(Arc<IcechunkRepository>, Arc<IcechunkSnapshot>),
    /// A kerchunk reference set.
    References(Arc<ReferenceSet>),
}

/// How long a plain HTTP store is not asked to list again after it failed to.
const LISTING_RETRY_AFTER: Duration = Duration::from_secs(300);

impl Store {
    /// Wrap an object store rooted at `root`.
    pub fn new(inner: Arc<dyn ObjectStore>, root: Path, options: &StoreOptions) -> Self {
        Self {
            inner,
            root,
            stats: Arc::default(),
            limiter: Arc::new(Semaphore::new(options.max_concurrent_requests.max(1))),
            timeout: options.timeout,
            local: None,
            suffix_ranges: true,
            coalesce_gap: options.coalesce_gap,
            listing_refused: None,
            source: Source::Objects,
        }
    }

    /// Whether the store has versions (an Icechunk repository).
    pub fn is_versioned(&self) -> bool {
        matches!(self.source, Source::Repository(_) | Source::Snapshot(..))
    }

    /// The snapshot this store reads, when it is one.
    pub fn snapshot_id(&self) -> Option<&str> {
        match &self.source {
            Source::Snapshot(_, snapshot) => Some(snapshot.id()),
            _ => None,
        }
    }

    fn repository(&self) -> Result<&Arc<IcechunkRepository>, StoreError> {
        match &self.source {
            Source::Repository(r) | Source::Snapshot(r, _) => Ok(r),
            _ => Err(StoreError::BadVersion(
                "refs ('@ref') are only for Icechunk repositories; this dataset is not one".into(),
            )),
        }
    }

    /// This repository at `version`: a store reading the snapshot that
    /// `version` names now.
    pub async fn at(&self, version: &Version) -> Result<Store, StoreError> {
        let repository = self.repository()?;
        let snapshot = self.snapshot_at(repository, version).await?;
        Ok(Store {
            source: Source::Snapshot(repository.clone(), snapshot),
            ..self.clone()
        })
    }

    /// The snapshot `version` of `repository` names now.
    async fn snapshot_at(
        &self,
        repository: &IcechunkRepository,
        version: &Version,
    ) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let id = self.bounded(repository.resolve(version)).await?;
        self.bounded(repository.snapshot(&id)).await
    }

    /// The repository's branches and tags.
    pub async fn refs(&self) -> Result<Refs, StoreError> {
        let repository = self.repository()?;
        self.bounded(repository.refs()).await
    }

    /// Run a request of a versioned or referenced source under the limiter
    /// and the timeout, counting it.
    async fn bounded<T>(&self, fut: impl std::future::Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let _permit = self.limiter.acquire().await.expect("store limiter is never closed");
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let result = match tokio::time::timeout(self.timeout, fut).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        };
        if result.is_err() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }

    /// The snapshot or reference set reads go to, if not objects.
    async fn layered(&self) -> Result<Option<Layer>, StoreError> {
        Ok(match &self.source {
            Source::Objects => None,
            // Reads not pinned to a version (readiness) read main's tip.
            Source::Repository(r) => Some(Layer::Snapshot(
                self.snapshot_at(r, &Version::Branch("main".into())).await?,
            )),
            Source::Snapshot(_, s) => Some(Layer::Snapshot(s.clone())),
            Source::References(r) => Some(Layer::References(r.clone())),
        })
    }

    /// Byte ranges of one object closer than this are fetched in one
    /// request: the configured gap, else 256 KiB (a request to a remote
    /// store costs more than that much transfer). Local files are always
    /// read range by range (reading a gap only costs copies).
    fn coalesce_gap(&self) -> u64 {
        self.coalesce_gap.unwrap_or(256 << 10)
    }

    /// Whether the backend reads the last n bytes of an object in one
    /// request (all but Azure Blob).
    pub fn reads_suffix_ranges(&self) -> bool {
        self.suffix_ranges
    }

    /// This store's counters.
    pub fn stats(&self) -> &StoreStats {
        &self.stats
    }

    fn path(&self, key: &str) -> Result<Path, StoreError> {
        validate_key(key).map_err(StoreError::InvalidKey)?;
        if key.is_empty() {
            return Ok(self.root.clone());
        }
        // A valid key's segments need no percent-encoding: they join the
        // (already encoded) root as they are.
        Path::parse(format!("{}/{key}", self.root)).map_err(|e| StoreError::InvalidKey(e.to_string()))
    }

    /// Run one store request under the limiter and the timeout, counting it.
    async fn run<T>(
        &self,
        fut: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<Option<T>, StoreError> {
        let _permit = self.limiter.acquire().await.expect("store limiter is never closed");
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let result = tokio::time::timeout(self.timeout, fut).await;
        let error = match result {
            Ok(Ok(value)) => return Ok(Some(value)),
            Ok(Err(object_store::Error::NotFound { .. })) => return Ok(None),
            Ok(Err(e)) if is_missing_path(&e) => return Ok(None),
            Ok(Err(object_store::Error::Precondition { path, .. })) => StoreError::Changed(path),
            Ok(Err(e)) => StoreError::Unavailable(e.to_string()),
            Err(_) => StoreError::Timeout(self.timeout),
        };
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        Err(error)
    }

    /// Read `range` of `key`; with `if_match`, only while the object's ETag
    /// is still that ([`StoreError::Changed`] otherwise).
    pub async fn get(
        &self,
        key: &str,
        range: ByteRange,
        if_match: Option<&str>,
    ) -> Result<Option<ReadResult>, StoreError> {
        let path = self.path(key)?;
        match self.layered().await? {
            Some(Layer::Snapshot(s)) => return self.counted(self.bounded(Box::pin(s.get(key, range, if_match))).await),
            Some(Layer::References(r)) => {
                return self.counted(self.bounded(Box::pin(r.get(key, range, if_match))).await)
            }
            None => {}
        }
        if let (ByteRange::Suffix(n), false) = (&range, self.suffix_ranges) {
            return self.get_suffix_via_head(key, *n, if_match).await;
        }
        let range = match range {
            ByteRange::All => None,
            ByteRange::Bounded(r) if r.is_empty() => return self.empty_read(key, r.start).await,
            ByteRange::Bounded(r) => Some(GetRange::Bounded(r)),
            ByteRange::From(o) => Some(GetRange::Offset(o)),
            ByteRange::Suffix(n) => Some(GetRange::Suffix(n)),
        };
        if range.is_some() {
            self.stats.range_requests.fetch_add(1, Ordering::Relaxed);
        }
        let options = GetOptions {
            if_match: if_match.map(str::to_string),
            ..GetOptions::default()
        };
        let fetched = self
            .run(async {
                if let Some(local) = &self.local {
                    let (meta, mut parts) = local.read(path, range.map(|r| vec![r]), options).await?;
                    let (range, data) = parts.pop().expect("one range asked, one read");
                    return Ok((data, range, object_info(&meta)));
                }
                let options = GetOptions { range, ..options };
                let result = self.inner.get_opts(&path, options).await?;
                let info = object_info(&result.meta);
                let range = result.range.clone();
                let data = result.bytes().await?;
                Ok((data, range, info))
            })
            .await?;
        Ok(fetched.map(|(data, range, info)| {
            self.stats.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
            ReadResult { data, range, info }
        }))
    }

    /// The last `n` bytes of `key` for a backend without suffix ranges: its
    /// size from a HEAD, then a bounded read conditional on `if_match` (or
    /// on the HEAD's ETag), so both requests see the same version.
    async fn get_suffix_via_head(
        &self,
        key: &str,
        n: u64,
        if_match: Option<&str>,
    ) -> Result<Option<ReadResult>, StoreError> {
        let Some(info) = self.head(key).await? else {
            return Ok(None);
        };
        let start = info.size.saturating_sub(n);
        let version = if_match.map(str::to_string).or(info.etag);
        Box::pin(self.get(key, ByteRange::Bounded(start..info.size), version.as_deref())).await
    }

    /// An empty range still checks that the object exists.
    async fn empty_read(&self, key: &str, at: u64) -> Result<Option<ReadResult>, StoreError> {
        Ok(self.head(key).await?.map(|info| ReadResult {
            data: Bytes::new(),
            range: at..at,
            info,
        }))
    }

    /// Read several ranges of `key`, all conditional on `if_match`, one
    /// `Bytes` per range in the order asked. `None` when the object is
    /// missing. A range the object does not fully cover comes back short.
    /// A local file is opened once and its ranges read on one blocking
    /// thread; other stores get one request per group of ranges closer than
    /// [`StoreOptions::coalesce_gap`] (object_store's `coalesce_ranges`).
    pub async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.path(key)?;
        match self.layered().await? {
            Some(Layer::Snapshot(s)) => return self.bounded(Box::pin(s.get_ranges(key, ranges, if_match))).await,
            Some(Layer::References(r)) => return self.bounded(Box::pin(r.get_ranges(key, ranges, if_match))).await,
            None => {}
        }
        if let Some(local) = &self.local {
            return self.get_local_ranges(local, key, ranges, if_match).await;
        }
        /// Why a merged range could not be used.
        enum Failed {
            Missing,
            Short,
            Store(StoreError),
        }
        let fetch = |range: Range<u64>| async move {
            let asked = range.end - range.start;
            match self.get(key, ByteRange::Bounded(range), if_match).await {
                Ok(Some(read)) if read.data.len() as u64 == asked => Ok(read.data),
                Ok(Some(_)) => Err(Failed::Short),
                Ok(None) => Err(Failed::Missing),
                Err(e) => Err(Failed::Store(e)),
            }
        };
        match object_store::coalesce_ranges(ranges, fetch, self.coalesce_gap()).await {
            Ok(parts) => Ok(Some(parts)),
            Err(Failed::Missing) => Ok(None),
            Err(Failed::Short) => Ok(Some(vec![Bytes::new(); ranges.len()])),
            Err(Failed::Store(e)) => Err(e),
        }
    }

    /// [`Store::get_ranges`] for a local file: one open, one blocking hop.
    async fn get_local_ranges(
        &self,
        local: &local::LocalFiles,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let path = self.path(key)?;
        let options = GetOptions {
            if_match: if_match.map(str::to_string),
            ..GetOptions::default()
        };
        let asked = ranges.iter().map(|r| GetRange::Bounded(r.clone())).collect();
        let fetched = self.run(local.read(path, Some(asked), options)).await?;
        // Counted as the ranged reads they stand for, as on other stores.
        let count = ranges.len() as u64;
        self.stats
            .requests
            .fetch_add(count.saturating_sub(1), Ordering::Relaxed);
        self.stats.range_requests.fetch_add(count, Ordering::Relaxed);
        Ok(fetched.map(|(_, parts)| {
            let parts: Vec<Bytes> = parts.into_iter().map(|(_, data)| data).collect();
            let bytes: u64 = parts.iter().map(|p| p.len() as u64).sum();
            self.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            parts
        }))
    }

    /// Metadata of `key`, `None` when missing.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let path = self.path(key)?;
        match self.layered().await? {
            Some(Layer::Snapshot(s)) => return self.bounded(Box::pin(s.head(key))).await,
            Some(Layer::References(r)) => return self.bounded(Box::pin(r.head(key))).await,
            None => {}
        }
        let meta = self
            .run(async {
                match &self.local {
                    Some(local) => local.head(path).await,
                    None => self.inner.head(&path).await,
                }
            })
            .await?;
        Ok(meta.map(|m| object_info(&m)))
    }

    /// The names of the children of `prefix` (`""` for the root): the
    /// sub-directories and the objects directly under it, each sorted.
    pub async fn list_dir(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let path = self.path(prefix)?;
        match self.layered().await? {
            Some(Layer::Snapshot(s)) => return self.bounded(s.list_dir(prefix)).await,
            Some(Layer::References(r)) => return self.bounded(Box::pin(r.list_dir(prefix))).await,
            None => {}
        }
        if let Some(refused) = &self.listing_refused {
            let last = *refused.lock().expect("not poisoned");
            if last.is_some_and(|t| t.elapsed() < LISTING_RETRY_AFTER) {
                return Err(StoreError::Unavailable(
                    "this HTTP server does not list directories".into(),
                ));
            }
        }
        if self.local.as_ref().is_some_and(|local| !local.lists_inside(prefix)) {
            return Ok((vec![], vec![]));
        }
        let listing = self.run(self.inner.list_with_delimiter(Some(&path))).await;
        if let (Err(_), Some(refused)) = (&listing, &self.listing_refused) {
            *refused.lock().expect("not poisoned") = Some(std::time::Instant::now());
        }
        let listing = listing?;
        let Some(listing) = listing else {
            return Ok((vec![], vec![]));
        };
        let name = |p: &Path| p.filename().unwrap_or_default().to_string();
        let mut dirs: Vec<String> = listing.common_prefixes.iter().map(name).collect();
        let mut files: Vec<String> = listing.objects.iter().map(|m| name(&m.location)).collect();
        dirs.sort();
        files.sort();
        Ok((dirs, files))
    }

    /// Whether the store answers at all (for readiness).
    pub async fn check(&self) -> Result<(), StoreError> {
        let key = match self.source {
            Source::References(_) => ".zgroup",
            _ => "zarr.json",
        };
        self.head(key).await.map(|_| ())
    }

    /// Count a read's payload as object reads are counted.
    fn counted(&self, read: Result<Option<ReadResult>, StoreError>) -> Result<Option<ReadResult>, StoreError> {
        if let Ok(Some(read)) = &read {
            self.stats.bytes.fetch_add(read.data.len() as u64, Ordering::Relaxed);
        }
        read
    }
}

/// A source other than the store's objects, for one request.
enum Layer {
    Snapshot(Arc<IcechunkSnapshot>),
    References(Arc<ReferenceSet>),
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

fn object_info(meta: &object_store::ObjectMeta) -> ObjectInfo {
    ObjectInfo {
        size: meta.size,
        etag: meta.e_tag.clone(),
        last_modified: meta.last_modified.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The path object_store builds part by part, as `Store::path` did.
    fn joined_by_parts(root: &Path, key: &str) -> Path {
        Path::from_iter(root.parts().chain(Path::from(key).parts()))
    }

    fn store(root: Path) -> Store {
        Store::new(
            Arc::new(object_store::memory::InMemory::new()),
            root,
            &StoreOptions::default(),
        )
    }

    #[test]
    fn keys_join_roots_as_object_store_would() {
        let roots = [
            Path::default(),
            Path::from("bucket/prefix"),
            Path::from_iter(["a dir", "with%percent", "ünï", "x#1"]),
        ];
        for root in roots {
            let store = store(root.clone());
            for key in ["", "zarr.json", "a/b/c/0.0", "c/0/1", "x-y_z.0/.zattrs"] {
                assert_eq!(
                    store.path(key).unwrap(),
                    joined_by_parts(&root, key),
                    "root {root:?}, key {key:?}"
                );
            }
            for bad in ["../x", "a//b", "a/./b", "a b", "%2e%2e", "/a"] {
                assert!(store.path(bad).is_err(), "{bad:?} accepted");
            }
        }
    }

    proptest! {
        #[test]
        fn any_valid_key_joins_as_object_store_would(key in "[A-Za-z0-9._-]{1,8}(/[A-Za-z0-9._-]{1,8}){0,4}") {
            let root = Path::from_iter(["data set", "v%1"]);
            let store = store(root.clone());
            match store.path(&key) {
                Ok(path) => prop_assert_eq!(path, joined_by_parts(&root, &key)),
                Err(_) => prop_assert!(key.split('/').any(|s| s == "." || s == "..")),
            }
        }
    }
}
