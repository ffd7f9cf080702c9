//! One snapshot of a repository as a store of Zarr v3 keys: `zarr.json`
//! per node (the node's stored document) and chunk keys. Native and inline
//! chunks come from the crate's manifests; virtual chunks are read through
//! [`Containers`] (the allow-list), never by the crate. Every object of a
//! snapshot has the snapshot id as its ETag: a snapshot never changes.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use icechunk::format::manifest::{Checksum, ChunkPayload, ChunkRef};
use icechunk::format::{ChunkIndices, Path as IcPath, CHUNKS_FILE_PATH};
use icechunk::session::{Session, SessionError, SessionErrorKind};
use icechunk::store::ListDirItem;
use tokio::sync::RwLock;

use super::super::containers::Containers;
use super::super::source::{KeySource, Listing};
use super::super::{check_version, ByteRange, Expect, ObjectInfo, Payload, ReadResult, Store, StoreError};
use super::unavailable;

/// One snapshot of a repository, read through a read-only session; or a
/// branch's tip through a writable session, whose changes are seen by its
/// own reads and by nobody else's until committed.
pub(crate) struct IcechunkSnapshot {
    /// The snapshot read (for a writable session, the one it started from).
    pub(super) id: String,
    /// The branch a writable session commits to.
    pub(super) branch: Option<String>,
    pub(super) store: icechunk::Store,
    pub(super) session: Arc<RwLock<Session>>,
    pub(super) written: SystemTime,
    pub(super) containers: Arc<Containers>,
    /// The repository's objects: native chunks are read from here, at the
    /// path and range the crate's manifest gives, through the store layer's
    /// own reads (the crate streams a local file in 8 KiB pieces).
    pub(super) objects: Store,
    /// A transaction's lease, while a request writes in it.
    pub(super) held: Option<super::transaction::Held>,
}

impl std::fmt::Debug for IcechunkSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkSnapshot")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A key of a snapshot: a node's metadata or one of an array's chunks.
enum Key {
    Metadata(IcPath),
    Chunk(IcPath, ChunkIndices),
}

fn node_path(path: &str) -> Option<IcPath> {
    IcPath::try_from(format!("/{path}").as_str()).ok()
}

/// `a/b/zarr.json` or `a/b/c/0/1` (`c/0/1` at the root, `c` for a 0-d array).
fn parse_key(key: &str) -> Option<Key> {
    if key == "zarr.json" {
        return node_path("").map(Key::Metadata);
    }
    if let Some(path) = key.strip_suffix("/zarr.json") {
        return node_path(path).map(Key::Metadata);
    }
    let (path, coords) = if key == "c" {
        ("", "")
    } else if let Some(path) = key.strip_suffix("/c") {
        (path, "")
    } else if let Some(split) = key.rsplit_once("/c/") {
        split
    } else {
        ("", key.strip_prefix("c/")?)
    };
    let coords: Option<Vec<u32>> = if coords.is_empty() {
        Some(vec![])
    } else {
        coords.split('/').map(|c| c.parse().ok()).collect()
    };
    Some(Key::Chunk(node_path(path)?, ChunkIndices(coords?)))
}

/// A write the crate refused: a key or document it does not take is the
/// caller's error (Icechunk holds Zarr v3 only), anything else the store's.
fn refused(key: &str, e: icechunk::store::StoreError) -> StoreError {
    use icechunk::store::StoreErrorKind as K;
    match &e.kind {
        K::InvalidKey { .. } | K::Unimplemented(_) | K::BadMetadata(_) => {
            StoreError::InvalidKey(format!("'{key}' cannot be written to an Icechunk repository: {e}"))
        }
        _ => unavailable(e),
    }
}

fn session_error(e: SessionError) -> Option<StoreError> {
    match e.kind {
        SessionErrorKind::NodeNotFound { .. } | SessionErrorKind::NotAnArray { .. } => None,
        kind => Some(unavailable(kind)),
    }
}

impl IcechunkSnapshot {
    fn check_writable(&self, key: &str) -> Result<(), StoreError> {
        match self.branch {
            Some(_) => Ok(()),
            None => Err(StoreError::Unavailable(format!(
                "'{key}' is in a snapshot, which never changes; writes go to a branch"
            ))),
        }
    }

    /// The branch a writable session commits to.
    pub(crate) fn branch(&self) -> Option<&str> {
        self.branch.as_deref()
    }

    /// The transaction a request writes in, when it does.
    pub(crate) fn transaction(&self) -> Option<&str> {
        self.held.as_ref().map(super::transaction::Held::id)
    }

    /// This snapshot's id (the ETag of each of its objects).
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    fn info(&self, size: u64) -> ObjectInfo {
        ObjectInfo {
            size,
            etag: Some(self.id.clone()),
            last_modified: self.written,
        }
    }

    /// What `key` is in this snapshot, `None` when no such node or chunk.
    async fn entry(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let session = self.session.read().await;
        let found = match parse_key(key) {
            None => return Ok(None),
            // A node's document is bytes held like an inline chunk's.
            Some(Key::Metadata(path)) => session
                .get_node(&path)
                .await
                .map(|node| Some(ChunkPayload::Inline(node.user_data))),
            Some(Key::Chunk(path, coords)) => session.get_chunk_ref(&path, &coords).await,
        };
        let payload = match found {
            Ok(Some(payload)) => payload,
            Ok(None) => return Ok(None),
            Err(e) => return session_error(e).map_or(Ok(None), Err),
        };
        Ok(Some(match payload {
            ChunkPayload::Inline(bytes) => Entry::Bytes(bytes),
            ChunkPayload::Ref(chunk) => Entry::Native(chunk),
            ChunkPayload::Virtual(reference) => {
                let url = session.resolve_virtual_location(&reference.location).map_err(|e| {
                    StoreError::Forbidden(format!(
                        "virtual chunk '{}' names no container this server may read (virtual_chunk_containers): {e}",
                        reference.location.url()
                    ))
                })?;
                let container = session
                    .matching_container(&reference.location)
                    .map(|c| c.url_prefix().to_string());
                Entry::Virtual {
                    url,
                    container,
                    span: reference.offset..reference.offset + reference.length,
                    checksum: reference.checksum,
                }
            }
            other => {
                return Err(unavailable(format!(
                    "a kind of chunk this server does not read: {other:?}"
                )))
            }
        }))
    }

    /// `ranges` (within the entry, clamped) of an entry: sliced from bytes
    /// the manifest holds; read from a native chunk's object at the
    /// manifest's offset; or read from a virtual chunk's object, checked
    /// against the checksum the snapshot recorded. A boxed future, not an
    /// `async fn`: the store's reads lead back here (a snapshot is a store
    /// too), and a named type ends the cycle.
    fn read<'a>(&'a self, entry: &'a Entry, ranges: &'a [Range<u64>]) -> BoxFuture<'a, Result<Vec<Bytes>, StoreError>> {
        async move {
            match entry {
                Entry::Bytes(bytes) => Ok(ranges
                    .iter()
                    .map(|r| bytes.slice(r.start as usize..r.end as usize))
                    .collect()),
                Entry::Native(chunk) => {
                    let key = format!("{CHUNKS_FILE_PATH}/{}", chunk.id);
                    let absolute: Vec<Range<u64>> = ranges
                        .iter()
                        .map(|r| chunk.offset + r.start..chunk.offset + r.end)
                        .collect();
                    let parts = self
                        .objects
                        .get_ranges(&key, &absolute, None)
                        .await?
                        .ok_or_else(|| unavailable(format!("the repository has no chunk object '{key}'")))?;
                    if parts.iter().zip(ranges).any(|(p, r)| p.len() as u64 != r.end - r.start) {
                        return Err(unavailable(format!(
                            "chunk object '{key}' is shorter than its manifest says"
                        )));
                    }
                    Ok(parts)
                }
                Entry::Virtual {
                    url,
                    container,
                    span,
                    checksum,
                } => {
                    let reads = ranges.iter().map(|r| async move {
                        let read = self
                            .containers
                            .get(
                                url,
                                Some(span.clone()),
                                ByteRange::Bounded(r.clone()),
                                container.as_deref(),
                            )
                            .await?;
                        check_checksum(url, checksum.as_ref(), &read.info)?;
                        Ok::<_, StoreError>(read.data)
                    });
                    futures::future::try_join_all(reads).await
                }
            }
        }
        .boxed()
    }
}

#[async_trait::async_trait]
impl KeySource for IcechunkSnapshot {
    /// Read `range` of `key`; `None` when there is no such node or chunk.
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        // A snapshot never changes: reads conditional on another version fail.
        check_version(key, if_match, Some(&self.id))?;
        let Some(entry) = self.entry(key).await? else {
            return Ok(None);
        };
        let size = entry.size();
        let range = range.within(size);
        let data = self.read(&entry, std::slice::from_ref(&range)).await?.remove(0);
        Ok(Some(ReadResult {
            data,
            range,
            info: self.info(size),
        }))
    }

    /// Several ranges of `key`, one `Bytes` each; `None` when missing.
    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        check_version(key, if_match, Some(&self.id))?;
        let Some(entry) = self.entry(key).await? else {
            return Ok(None);
        };
        let size = entry.size();
        let clamped: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| ByteRange::Bounded(r.clone()).within(size))
            .collect();
        self.read(&entry, &clamped).await.map(Some)
    }

    /// Metadata of `key`, without reading a chunk's bytes (a virtual one's
    /// URL is only checked against the allow-list).
    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let Some(entry) = self.entry(key).await? else {
            return Ok(None);
        };
        if let Entry::Virtual { url, container, .. } = &entry {
            self.containers.check(url, container.as_deref())?;
        }
        Ok(Some(self.info(entry.size())))
    }
    /// Write `data` at `key` in a writable session (a node's `zarr.json` or
    /// a chunk, as the crate's store takes them). The session is this
    /// request's alone: another writer's changes are found when it commits
    /// (the crate's conflict detection), so only `Expect::Absent` is checked.
    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        self.check_writable(key)?;
        if expect == Expect::Absent && self.store.exists(key).await.map_err(unavailable)? {
            return Err(StoreError::Changed(key.to_string()));
        }
        self.store
            .set(key, data.to_bytes())
            .await
            .map_err(|e| refused(key, e))?;
        Ok(Some(self.id.clone()))
    }

    /// Remove `key` in a writable session (a node's `zarr.json` removes the
    /// node and everything under it).
    async fn delete(&self, key: &str, _expect: Expect) -> Result<(), StoreError> {
        self.check_writable(key)?;
        self.store.delete(key).await.map_err(|e| refused(key, e))
    }

    /// The children of `prefix`: (directories, objects), each sorted.
    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        // Only nodes are listed (Icechunk has no implicit groups): for a
        // prefix inside an array the crate would walk all its chunks.
        let is_node = match node_path(prefix) {
            Some(path) => self.session.read().await.get_node(&path).await.is_ok(),
            None => false,
        };
        if !is_node {
            return Ok((Vec::new(), Vec::new()));
        }
        let items: Vec<ListDirItem> = self
            .store
            .list_dir_items(prefix)
            .await
            .map_err(unavailable)?
            .try_collect()
            .await
            .map_err(unavailable)?;
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for item in items {
            match item {
                ListDirItem::Prefix(p) => dirs.push(p),
                ListDirItem::Key(k) => files.push(k),
            }
        }
        dirs.sort();
        files.sort();
        Ok((dirs, files))
    }
}

/// A key of a snapshot, resolved by the crate.
enum Entry {
    /// A node's `zarr.json`, or an inline chunk: bytes the manifest holds.
    Bytes(Bytes),
    /// A chunk in the repository's own chunk objects.
    Native(ChunkRef),
    /// A chunk in another object, read only under the allow-list.
    Virtual {
        url: String,
        /// The repository's container the URL falls under, for messages.
        container: Option<String>,
        span: Range<u64>,
        checksum: Option<Checksum>,
    },
}

impl Entry {
    fn size(&self) -> u64 {
        match self {
            Entry::Bytes(bytes) => bytes.len() as u64,
            Entry::Native(chunk) => chunk.length,
            Entry::Virtual { span, .. } => span.end - span.start,
        }
    }
}

/// A virtual chunk's object must still be what the snapshot recorded: the
/// same ETag (quotes aside), or not modified after the recorded time.
fn check_checksum(url: &str, checksum: Option<&Checksum>, object: &ObjectInfo) -> Result<(), StoreError> {
    let changed = match checksum {
        None => false,
        Some(Checksum::ETag(etag)) => {
            object.etag.as_deref().map(|e| e.trim_matches('"')) != Some(etag.0.trim_matches('"'))
        }
        Some(Checksum::LastModified(seconds)) => {
            let recorded = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(seconds.0));
            object.last_modified > recorded
        }
    };
    if changed {
        return Err(StoreError::Unavailable(format!(
            "the object of a virtual chunk, '{url}', changed after the snapshot recorded it"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_metadata_and_chunks() {
        let chunk = |k: &str| match parse_key(k) {
            Some(Key::Chunk(p, c)) => Some((p.to_string(), c.0)),
            _ => None,
        };
        assert!(matches!(parse_key("zarr.json"), Some(Key::Metadata(p)) if p.to_string() == "/"));
        assert!(matches!(parse_key("a/b/zarr.json"), Some(Key::Metadata(p)) if p.to_string() == "/a/b"));
        assert_eq!(chunk("a/b/c/0/12"), Some(("/a/b".into(), vec![0, 12])));
        assert_eq!(chunk("c/3"), Some(("/".into(), vec![3])));
        assert_eq!(chunk("c"), Some(("/".into(), vec![])));
        assert_eq!(chunk("x/c"), Some(("/x".into(), vec![])));
        assert_eq!(chunk("abc/c/1"), Some(("/abc".into(), vec![1])));
        assert_eq!(chunk("c/b/c/1"), Some(("/c/b".into(), vec![1])));
        for bad in ["a/b", "a/c/x", "a/c/-1", "a/0.0"] {
            assert!(parse_key(bad).is_none(), "{bad}");
        }
    }
}
