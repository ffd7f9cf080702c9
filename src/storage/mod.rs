//! The store layer: the only module that talks to `object_store`.
//!
//! # Contract
//! A [`Store`] is one dataset's root in a local directory, S3 or an
//! S3-compatible server, GCS, Azure or plain HTTP; or an Icechunk
//! repository or a kerchunk reference set there. It offers whole and ranged
//! reads (optionally conditional on an ETag), HEAD and directory listing.
//! Every key is validated ([`validate_key`]) before it reaches a backend.
//! Missing keys are `Ok(None)`, never errors. Every request is bounded by a
//! timeout and by the dataset's limit of concurrent requests, and counted.
//!
//! # Shape
//! Each kind of store is a [`source::KeySource`] (get, get_ranges, head,
//! list): [`objects::ObjectKeys`], [`icechunk::IcechunkSnapshot`] (and a
//! repository's `main` tip), [`references::ReferenceSet`]. The limiter,
//! timeout and counters ([`bounds`]) and the request shapes of remote
//! backends ([`objects::Remote`]: range coalescing, suffix reads via HEAD,
//! the HTTP listing back-off) wrap a source; [`Store`] holds the wrapped
//! source and, for a repository, what resolves its refs.

mod bounds;
mod conditional_delete;
mod containers;
mod icechunk;
mod key;
mod local;
mod objects;
mod open;
mod payload;
mod redirects;
mod references;
mod source;
/// The fuzz property of the kerchunk parser ([`crate::fuzz_checks`]).
pub(crate) use references::check_parse as check_reference_set;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

pub use bounds::StoreStats;
pub use containers::VirtualContainer;
pub use icechunk::{Commit, RefKind, Refs, TransactionInfo, TransactionTimes, Version};
pub use key::{join, validate_key};
pub use open::StoreOptions;
pub use payload::Payload;

use self::bounds::Bounds;
use self::icechunk::{IcechunkRepository, IcechunkSnapshot};
use self::objects::{ObjectKeys, Remote};
use self::source::KeySource;

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
    /// A commit conflicts with what others committed; nothing was committed.
    #[error("{0}")]
    Conflict(String),
    /// What is named existed and is no more (an expired, committed or
    /// aborted transaction).
    #[error("{0}")]
    Gone(String),
}

/// What a write expects of the object it replaces or removes; when the
/// object is otherwise, the write is [`StoreError::Changed`] and changes
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Whatever is there (or nothing).
    Anything,
    /// No object (a create).
    Absent,
    /// The object with this ETag (as a read of it reported).
    Version(String),
}

impl Expect {
    /// What a write expects of an object a read found with `etag` (`None`
    /// outside: the object was missing).
    pub fn of(found: Option<Option<&str>>) -> Self {
        match found {
            None => Expect::Absent,
            Some(Some(etag)) => Expect::Version(etag.to_string()),
            Some(None) => Expect::Anything,
        }
    }
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
    /// Where keys are read from, inside this store's bounds.
    keys: Arc<dyn KeySource>,
    bounds: Bounds,
    /// Whether the backend reads "the last n bytes" in one request.
    suffix_ranges: bool,
    /// An Icechunk repository's, when the store has versions.
    versions: Option<Versions>,
    /// The key readiness asks for.
    probe: &'static str,
}

/// An Icechunk store's repository, and the snapshot it reads when pinned.
#[derive(Debug, Clone)]
struct Versions {
    repository: Arc<IcechunkRepository>,
    snapshot: Option<Arc<IcechunkSnapshot>>,
}

/// How a backend's objects are read: see [`objects`].
#[derive(Debug, Clone, Copy, Default)]
struct Backend {
    /// It cannot read the last n bytes of an object in one request.
    no_suffix_ranges: bool,
    /// Its listings often fail (plain HTTP servers).
    may_refuse_listing: bool,
}

impl Store {
    /// Wrap an object store rooted at `root`.
    pub fn new(
        inner: Arc<dyn object_store::ObjectStore>,
        root: object_store::path::Path,
        options: &StoreOptions,
    ) -> Self {
        Self::of_objects(ObjectKeys::new(inner, root, None), Backend::default(), options)
    }

    /// A store of `objects`, shaped for its backend.
    fn of_objects(objects: ObjectKeys, backend: Backend, options: &StoreOptions) -> Self {
        let bounds = Bounds::new(options.max_concurrent_requests, options.timeout);
        let local = objects.is_local();
        let bounded = bounds.wrap(Arc::new(objects));
        // Local files are read range by range (reading a gap only costs
        // copies), list, and read suffixes: no shapes to add.
        let keys: Arc<dyn KeySource> = match local {
            true => bounded,
            false => Arc::new(Remote {
                inner: bounded,
                // Byte ranges of one object closer than this are fetched in
                // one request: the configured gap, else 256 KiB (a request
                // to a remote store costs more than that much transfer).
                gap: options.coalesce_gap.unwrap_or(256 << 10),
                suffix_via_head: backend.no_suffix_ranges,
                listing_refused: backend.may_refuse_listing.then(Default::default),
            }),
        };
        Self {
            keys,
            bounds,
            suffix_ranges: !backend.no_suffix_ranges,
            versions: None,
            probe: "zarr.json",
        }
    }

    /// This store reading `source` instead (with its limits and counters).
    fn reading(&self, source: Arc<dyn KeySource>) -> Self {
        Self {
            keys: self.bounds.wrap(source),
            ..self.clone()
        }
    }

    /// An Icechunk repository's store: reads not pinned to a version
    /// (readiness) read `main`'s tip.
    fn of_repository(&self, repository: Arc<IcechunkRepository>) -> Self {
        Self {
            versions: Some(Versions {
                repository: repository.clone(),
                snapshot: None,
            }),
            ..self.reading(Arc::new(icechunk::MainTip(repository)))
        }
    }

    /// A kerchunk reference set's store.
    fn of_references(&self, references: references::ReferenceSet) -> Self {
        Self {
            probe: ".zgroup",
            ..self.reading(Arc::new(references))
        }
    }

    /// Whether the store has versions (an Icechunk repository).
    pub fn is_versioned(&self) -> bool {
        self.versions.is_some()
    }

    /// The snapshot this store reads, when it is one.
    pub fn snapshot_id(&self) -> Option<&str> {
        self.versions.as_ref()?.snapshot.as_deref().map(IcechunkSnapshot::id)
    }

    fn repository(&self) -> Result<&Arc<IcechunkRepository>, StoreError> {
        match &self.versions {
            Some(versions) => Ok(&versions.repository),
            None => Err(StoreError::BadVersion(
                "refs ('@ref') are only for Icechunk repositories; this dataset is not one".into(),
            )),
        }
    }

    /// This repository at `version`: a store reading the snapshot that
    /// `version` names now.
    pub async fn at(&self, version: &Version) -> Result<Store, StoreError> {
        let repository = self.repository()?.clone();
        let snapshot = match version {
            Version::Transaction(id) => self.bounds.run(repository.transaction_view(id)).await?,
            _ => {
                let id = self.bounds.run(repository.resolve(version)).await?;
                self.bounds.run(repository.snapshot(&id)).await?
            }
        };
        Ok(Self {
            versions: Some(Versions {
                repository,
                snapshot: Some(snapshot.clone()),
            }),
            ..self.reading(snapshot)
        })
    }

    /// This repository's `branch` at its tip now, to write: reads see the
    /// store's own changes, nobody else sees them until [`Store::commit`].
    pub async fn on_branch(&self, branch: &str) -> Result<Store, StoreError> {
        let repository = self.repository()?.clone();
        let session = self.bounds.run(repository.writable(branch)).await?;
        Ok(Self {
            versions: Some(Versions {
                repository,
                snapshot: Some(session.clone()),
            }),
            ..self.reading(session)
        })
    }

    /// A new transaction on `branch` at its tip now (api.md 4.3).
    pub async fn begin_transaction(
        &self,
        branch: &str,
        times: TransactionTimes,
    ) -> Result<TransactionInfo, StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.begin(branch, times)).await
    }

    /// Transaction `id`, to write like a store made by [`Store::on_branch`]:
    /// this request holds it (others wait) until [`Store::save_transaction`]
    /// keeps what it wrote, or the store is dropped and nothing is kept.
    pub async fn in_transaction(&self, id: &str, times: TransactionTimes) -> Result<Store, StoreError> {
        let repository = self.repository()?.clone();
        // Not under the store's timeout: waiting for another request's
        // hold is bounded by `times.wait`, each request by the timeout.
        let session = repository.in_transaction(id, times).await?;
        Ok(Self {
            versions: Some(Versions {
                repository,
                snapshot: Some(session.clone()),
            }),
            ..self.reading(session)
        })
    }

    /// The transaction a store made by [`Store::in_transaction`] writes in.
    pub fn transaction(&self) -> Option<&str> {
        self.versions.as_ref()?.snapshot.as_ref()?.transaction()
    }

    /// Keep what was written to a store made by [`Store::in_transaction`];
    /// the transaction then expires `times.ttl` from now.
    pub async fn save_transaction(&self, times: TransactionTimes) -> Result<TransactionInfo, StoreError> {
        let (repository, changes) = self.changes()?;
        repository.save(changes, times).await
    }

    /// Commit transaction `id` to its branch (rebased as [`Store::commit`]
    /// is): the new snapshot's id and the branch.
    pub async fn commit_transaction(
        &self,
        id: &str,
        message: &str,
        properties: std::collections::BTreeMap<String, serde_json::Value>,
        attempts: u16,
        times: TransactionTimes,
    ) -> Result<(String, String), StoreError> {
        let repository = self.repository()?;
        repository
            .commit_transaction(id, message, properties, attempts, times)
            .await
    }

    /// Transaction `id` now (its expiry, its writes).
    pub async fn transaction_info(&self, id: &str) -> Result<TransactionInfo, StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.transaction_info(id)).await
    }

    /// Abort transaction `id`.
    pub async fn abort_transaction(&self, id: &str, times: TransactionTimes) -> Result<(), StoreError> {
        let repository = self.repository()?;
        repository.abort_transaction(id, times).await
    }

    /// The branch a store made by [`Store::on_branch`] writes to.
    pub fn branch(&self) -> Option<&str> {
        self.versions.as_ref()?.snapshot.as_ref()?.branch()
    }

    /// Commit the changes of a store made by [`Store::on_branch`], with
    /// `message` and `properties` (author and the like), rebased when the
    /// branch moved (up to `attempts` times); the new snapshot's id.
    pub async fn commit(
        &self,
        message: &str,
        properties: std::collections::BTreeMap<String, serde_json::Value>,
        attempts: u16,
    ) -> Result<String, StoreError> {
        let (repository, changes) = self.changes()?;
        repository.commit(changes, message, properties, attempts).await
    }

    /// The repository and the session of a store on a branch.
    fn changes(&self) -> Result<(&IcechunkRepository, &IcechunkSnapshot), StoreError> {
        let versions = self
            .versions
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("only an Icechunk repository's branch takes commits".into()))?;
        let changes = versions
            .snapshot
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("commits are made on a branch's session".into()))?;
        Ok((&versions.repository, changes))
    }

    /// The snapshots `version` descends from, newest first, at most `limit`.
    pub async fn history(&self, version: &Version, limit: usize) -> Result<Vec<Commit>, StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.history(version, limit)).await
    }

    /// Make branch or tag `name` at snapshot `snapshot` (409 when the name exists).
    pub async fn create_ref(&self, kind: RefKind, name: &str, snapshot: &str) -> Result<(), StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.create_ref(kind, name, snapshot)).await
    }

    /// Point branch `name` at `snapshot`; with a `condition`, only while it
    /// holds for the snapshot id the branch is at ([`StoreError::Changed`]
    /// otherwise).
    pub async fn reset_branch(
        &self,
        name: &str,
        snapshot: &str,
        condition: Option<&(dyn Fn(&str) -> bool + Sync)>,
    ) -> Result<(), StoreError> {
        let repository = self.repository()?;
        self.bounds
            .run(repository.reset_branch(name, snapshot, condition))
            .await
    }

    /// Remove branch or tag `name` (never `main`).
    pub async fn delete_ref(&self, kind: RefKind, name: &str) -> Result<(), StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.delete_ref(kind, name)).await
    }

    /// The repository's branches and tags.
    pub async fn refs(&self) -> Result<Refs, StoreError> {
        let repository = self.repository()?;
        self.bounds.run(repository.refs()).await
    }

    /// Whether the backend reads the last n bytes of an object in one
    /// request (all but Azure Blob).
    pub fn reads_suffix_ranges(&self) -> bool {
        self.suffix_ranges
    }

    /// This store's counters.
    pub fn stats(&self) -> &StoreStats {
        self.bounds.stats()
    }

    /// Read `range` of `key`; with `if_match`, only while the object's ETag
    /// is still that ([`StoreError::Changed`] otherwise).
    pub async fn get(
        &self,
        key: &str,
        range: ByteRange,
        if_match: Option<&str>,
    ) -> Result<Option<ReadResult>, StoreError> {
        valid(key)?;
        self.keys.get(key, range, if_match).await
    }

    /// Read several ranges of `key`, all conditional on `if_match`, one
    /// `Bytes` per range in the order asked. `None` when the object is
    /// missing. A range the object does not fully cover comes back short.
    /// A local file is opened once and its ranges read on one blocking
    /// thread; other stores get one request per group of ranges closer than
    /// [`StoreOptions::coalesce_gap`].
    pub async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        valid(key)?;
        self.keys.get_ranges(key, ranges, if_match).await
    }

    /// Metadata of `key`, `None` when missing.
    pub async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        valid(key)?;
        self.keys.head(key).await
    }

    /// The names of the children of `prefix` (`""` for the root): the
    /// sub-directories and the objects directly under it, each sorted.
    pub async fn list_dir(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), StoreError> {
        valid(prefix)?;
        self.keys.list_dir(prefix).await
    }

    /// Write `data` at `key` if the object there is as `expect` says
    /// (else [`StoreError::Changed`], nothing written): atomic per object,
    /// conditional puts on object stores, a new file renamed into place on
    /// local disks. The new object's ETag, when the backend reports one.
    pub async fn put(&self, key: &str, data: impl Into<Payload>, expect: Expect) -> Result<Option<String>, StoreError> {
        valid(key)?;
        self.keys.put(key, data.into(), expect).await
    }

    /// Remove `key` if the object there is as `expect` says (else
    /// [`StoreError::Changed`], nothing removed; with `Expect::Anything`
    /// a missing key is already removed): checked under the object's lock
    /// on local disks, a presigned `DELETE` with `If-Match` on S3 and
    /// Azure, a check and then a plain delete on other backends.
    pub async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        valid(key)?;
        self.keys.delete(key, expect).await
    }

    /// Whether the store is read-only whatever its configuration: an
    /// Icechunk repository (written through 4.3) or a reference set.
    pub fn is_read_only(&self) -> bool {
        self.versions.is_some() || self.probe == ".zgroup"
    }

    /// Whether the store answers at all (for readiness).
    pub async fn check(&self) -> Result<(), StoreError> {
        self.head(self.probe).await.map(|_| ())
    }
}

/// Keys are checked before they reach any source.
fn valid(key: &str) -> Result<(), StoreError> {
    validate_key(key).map_err(StoreError::InvalidKey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn invalid_keys_never_reach_a_source() {
        let store = Store::new(
            Arc::new(object_store::memory::InMemory::new()),
            object_store::path::Path::from("root"),
            &StoreOptions::default(),
        );
        for bad in ["../x", "a//b", "a/./b", "a b", "%2e%2e", "/a"] {
            let read = store.get(bad, ByteRange::All, None).await;
            assert!(matches!(read, Err(StoreError::InvalidKey(_))), "{bad:?} accepted");
            assert!(
                matches!(store.head(bad).await, Err(StoreError::InvalidKey(_))),
                "{bad:?}"
            );
        }
        assert_eq!(store.stats().requests.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    async fn read(store: &Store, key: &str) -> Option<(Bytes, Option<String>)> {
        let read = store.get(key, ByteRange::All, None).await.unwrap()?;
        Some((read.data, read.info.etag))
    }

    #[tokio::test]
    async fn local_writes_are_conditional_and_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().join("ds");
        std::fs::create_dir(&root).unwrap();
        let store = Store::open(root.to_str().unwrap(), &StoreOptions::default()).unwrap();
        // A stale version is refused on local disks too, and deletes check it.
        let etag = store
            .put("k", Bytes::from_static(b"v1"), Expect::Absent)
            .await
            .unwrap()
            .unwrap();
        store
            .put("k", Bytes::from_static(b"v2"), Expect::Version(etag.clone()))
            .await
            .unwrap();
        assert!(matches!(
            store.delete("k", Expect::Version(etag)).await,
            Err(StoreError::Changed(_))
        ));
        assert_eq!(&read(&store, "k").await.unwrap().0[..], b"v2");
        // A linked directory out of the dataset is never written through.
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        for key in ["out/zarr.json", "out/new/c/0"] {
            let put = store.put(key, Bytes::from_static(b"x"), Expect::Anything).await;
            assert!(matches!(put, Err(StoreError::Forbidden(_))), "{key}: {put:?}");
        }
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "nothing written outside"
        );
        // Temporary files do not stay behind.
        let names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
    }
}
