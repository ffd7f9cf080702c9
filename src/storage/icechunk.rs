//! Icechunk repositories, read with the `icechunk` crate.
//!
//! A repository (`icechunk+file://`, `+s3://`, `+gs://`, `+az://`,
//! `+https://`) is opened once, on first use. A [`Version`] (a branch, a tag
//! or a snapshot id) resolves to a snapshot id; a branch's or tag's snapshot
//! is remembered for the dataset's `ref_ttl`, so a new commit is seen within
//! that time. Each snapshot is read through one read-only session, which
//! looks like a store of Zarr v3 keys: `zarr.json` per node (the node's
//! stored document) and chunk keys. Native and inline chunks come from the
//! crate; virtual chunks are read through [`Containers`] (the allow-list),
//! never by the crate. Every object of a snapshot has the snapshot id as its
//! ETag: a snapshot never changes.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use icechunk::format::manifest::{Checksum, ChunkPayload, ChunkRef};
use icechunk::format::{ChunkIndices, Path as IcPath, SnapshotId, CHUNKS_FILE_PATH};
use icechunk::repository::VersionInfo;
use icechunk::session::{Session, SessionError, SessionErrorKind};
use icechunk::storage::{S3Credentials, S3Options, S3StaticCredentials};
use icechunk::store::ListDirItem;
use icechunk::{Repository, Storage};
use tokio::sync::{OnceCell, RwLock};
use url::Url;

use super::containers::Containers;
use super::{check_version, ByteRange, ObjectInfo, ReadResult, Store, StoreError, StoreOptions};

/// A version of a repository, as a URL names it after `@`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Version {
    /// `branch.NAME`: the branch's tip, which moves.
    Branch(String),
    /// `tag.NAME`
    Tag(String),
    /// A snapshot id (20 Crockford base-32 characters).
    Snapshot(String),
}

impl Version {
    /// Parse `branch.NAME`, `tag.NAME` or a snapshot id.
    pub fn parse(text: &str) -> Result<Self, String> {
        let named = |kind: &str, name: &str| {
            if name.is_empty() || name.contains('/') {
                Err(format!(
                    "malformed ref '{text}': a {kind} name must be non-empty and without '/'"
                ))
            } else {
                Ok(name.to_string())
            }
        };
        if let Some(name) = text.strip_prefix("branch.") {
            return named("branch", name).map(Version::Branch);
        }
        if let Some(name) = text.strip_prefix("tag.") {
            return named("tag", name).map(Version::Tag);
        }
        match SnapshotId::try_from(text) {
            Ok(_) if text.len() == 20 => Ok(Version::Snapshot(text.to_string())),
            _ => Err(format!(
                "malformed ref '{text}': expected branch.NAME, tag.NAME or a snapshot id (20 characters of Crockford base 32)"
            )),
        }
    }

    /// Whether what this names never changes (a tag or a snapshot).
    pub fn is_immutable(&self) -> bool {
        !matches!(self, Version::Branch(_))
    }

    fn info(&self) -> Result<VersionInfo, StoreError> {
        Ok(match self {
            Version::Branch(b) => VersionInfo::BranchTipRef(b.clone()),
            Version::Tag(t) => VersionInfo::TagRef(t.clone()),
            Version::Snapshot(s) => VersionInfo::SnapshotId(
                SnapshotId::try_from(s.as_str()).map_err(|e| StoreError::BadVersion(e.to_string()))?,
            ),
        })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Branch(b) => write!(f, "branch.{b}"),
            Version::Tag(t) => write!(f, "tag.{t}"),
            Version::Snapshot(s) => f.write_str(s),
        }
    }
}

/// The branches and tags of a repository, each with its snapshot id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refs {
    /// (name, snapshot id), sorted by name.
    pub branches: Vec<(String, String)>,
    /// (name, snapshot id), sorted by name.
    pub tags: Vec<(String, String)>,
}

/// One Icechunk repository of a dataset.
pub(crate) struct IcechunkRepository {
    /// The dataset URL without `icechunk+`.
    url: Url,
    options: StoreOptions,
    repository: OnceCell<Repository>,
    /// Branch and tag names to snapshot ids, for `ref_ttl`.
    tips: moka::future::Cache<Version, String>,
    /// Open sessions by snapshot id.
    snapshots: moka::future::Cache<String, Arc<IcechunkSnapshot>>,
    containers: Arc<Containers>,
    /// The repository's own objects, read through our store (see [`IcechunkSnapshot`]).
    objects: Store,
}

impl std::fmt::Debug for IcechunkRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkRepository")
            .field("url", &super::open::redact(&self.url))
            .finish_non_exhaustive()
    }
}

/// One snapshot of a repository, read through a read-only session.
pub(crate) struct IcechunkSnapshot {
    id: String,
    store: icechunk::Store,
    session: Arc<RwLock<Session>>,
    written: SystemTime,
    containers: Arc<Containers>,
    /// The repository's objects: native chunks are read from here, at the
    /// path and range the crate's manifest gives, through the store layer's
    /// own reads (the crate streams a local file in 8 KiB pieces).
    objects: Store,
}

impl std::fmt::Debug for IcechunkSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkSnapshot")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Whether a repository error means "no such ref or snapshot".
fn is_unknown(error: &icechunk::repository::RepositoryError) -> bool {
    use icechunk::format::IcechunkFormatErrorKind as F;
    use icechunk::refs::RefErrorKind;
    use icechunk::repository::RepositoryErrorKind as K;
    matches!(
        &error.kind,
        K::Ref(RefErrorKind::RefNotFound(_))
            | K::StorageError(icechunk::storage::StorageErrorKind::ObjectNotFound)
            | K::SnapshotNotFound { .. }
            | K::InvalidSnapshotId(_)
            | K::FormatError(F::SnapshotIdNotFound { .. } | F::BranchNotFound { .. } | F::TagNotFound { .. })
    )
}

/// Whether a repository error means "not a valid ref name".
fn is_malformed(error: &icechunk::repository::RepositoryError) -> bool {
    use icechunk::refs::RefErrorKind;
    use icechunk::repository::RepositoryErrorKind as K;
    matches!(&error.kind, K::Ref(RefErrorKind::InvalidRefName(_)))
}

fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("icechunk: {e}"))
}

impl IcechunkRepository {
    /// The repository at `url` (the dataset URL without `icechunk+`); nothing
    /// is contacted until the first request.
    pub(crate) fn new(url: Url, options: &StoreOptions, containers: Arc<Containers>, objects: Store) -> Self {
        Self {
            url,
            options: options.clone(),
            repository: OnceCell::new(),
            tips: moka::future::Cache::builder()
                .max_capacity(1_000)
                .time_to_live(options.ref_ttl.max(Duration::from_millis(1)))
                .build(),
            snapshots: moka::future::Cache::builder().max_capacity(64).build(),
            containers,
            objects,
        }
    }

    async fn repository(&self) -> Result<&Repository, StoreError> {
        self.repository
            .get_or_try_init(|| async {
                let storage = storage_for(&self.url, &self.options).await?;
                Repository::open(storage).execute().await.map_err(|e| {
                    unavailable(format!(
                        "cannot open the repository at {}: {e}",
                        super::open::redact(&self.url)
                    ))
                })
            })
            .await
    }

    /// The snapshot id `version` names now.
    pub(crate) async fn resolve(&self, version: &Version) -> Result<String, StoreError> {
        if let Some(id) = self.tips.get(version).await {
            return Ok(id);
        }
        let repository = self.repository().await?;
        let resolved = match version {
            Version::Branch(b) => repository.lookup_branch(b).await,
            Version::Tag(t) => repository.lookup_tag(t).await,
            Version::Snapshot(s) => {
                let id = SnapshotId::try_from(s.as_str()).map_err(|e| StoreError::BadVersion(e.to_string()))?;
                repository.lookup_snapshot(&id).await.map(|info| info.id)
            }
        };
        let id = match resolved {
            Ok(id) => id.to_string(),
            Err(e) if is_malformed(&e) => {
                return Err(StoreError::BadVersion(format!("malformed ref '{version}': {e}")))
            }
            Err(e) if is_unknown(&e) => {
                return Err(StoreError::UnknownVersion(format!(
                    "no ref '{version}' in this repository"
                )))
            }
            Err(e) => return Err(unavailable(e)),
        };
        self.tips.insert(version.clone(), id.clone()).await;
        Ok(id)
    }

    /// A read-only view of snapshot `id` (resolved by [`Self::resolve`]).
    pub(crate) async fn snapshot(&self, id: &str) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let open = async {
            let repository = self.repository().await?;
            let version = Version::Snapshot(id.to_string()).info()?;
            let session = repository.readonly_session(&version).await.map_err(|e| {
                if is_unknown(&e) {
                    StoreError::UnknownVersion(format!("no snapshot '{id}' in this repository"))
                } else {
                    unavailable(e)
                }
            })?;
            let snapshot_id = SnapshotId::try_from(id).map_err(|e| StoreError::BadVersion(e.to_string()))?;
            let written = repository
                .lookup_snapshot(&snapshot_id)
                .await
                .map(|info| SystemTime::from(info.flushed_at))
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let session = Arc::new(RwLock::new(session));
            let store = icechunk::Store::from_session(session.clone()).await;
            Ok(Arc::new(IcechunkSnapshot {
                id: id.to_string(),
                store,
                session,
                written,
                containers: self.containers.clone(),
                objects: self.objects.clone(),
            }))
        };
        self.snapshots
            .try_get_with(id.to_string(), open)
            .await
            .map_err(|e: Arc<StoreError>| (*e).clone())
    }

    /// Every branch and tag with its snapshot id.
    pub(crate) async fn refs(&self) -> Result<Refs, StoreError> {
        let repository = self.repository().await?;
        let mut refs = Refs::default();
        for name in repository.list_branches().await.map_err(unavailable)? {
            let id = repository.lookup_branch(&name).await.map_err(unavailable)?;
            refs.branches.push((name, id.to_string()));
        }
        for name in repository.list_tags().await.map_err(unavailable)? {
            let id = repository.lookup_tag(&name).await.map_err(unavailable)?;
            refs.tags.push((name, id.to_string()));
        }
        Ok(refs)
    }
}

/// The crate's storage for a repository URL, from the dataset's options
/// (and, as for plain stores, the environment).
async fn storage_for(url: &Url, options: &StoreOptions) -> Result<Arc<dyn Storage + Send + Sync>, StoreError> {
    let bad = |e: String| StoreError::Unavailable(format!("icechunk repository {}: {e}", super::open::redact(url)));
    let prefix = url.path().trim_matches('/').to_string();
    let prefix = (!prefix.is_empty()).then_some(prefix);
    let bucket = || {
        url.host_str()
            .map(str::to_string)
            .ok_or_else(|| bad("no bucket in the URL".into()))
    };
    let opts = &options.backend;
    let option = |names: &[&str], env: &[&str]| {
        names
            .iter()
            .find_map(|n| opts.get(*n).cloned())
            .or_else(|| env.iter().find_map(|v| std::env::var(v).ok()))
    };
    let truthy = |v: Option<String>| v.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    let storage = match url.scheme() {
        "file" => {
            let path = url.to_file_path().map_err(|_| bad("not a file path".into()))?;
            icechunk::new_local_filesystem_storage(&path)
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "s3" | "s3a" => {
            let mut config = S3Options::default();
            config.region = option(&["region", "aws_region"], &["AWS_REGION", "AWS_DEFAULT_REGION"]);
            config.endpoint_url = option(
                &["endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url"],
                &["AWS_ENDPOINT", "AWS_ENDPOINT_URL"],
            );
            config.anonymous = truthy(option(
                &["skip_signature", "aws_skip_signature"],
                &["AWS_SKIP_SIGNATURE"],
            ));
            config.allow_http = truthy(option(&["allow_http", "aws_allow_http"], &["AWS_ALLOW_HTTP"]));
            let key = option(&["access_key_id", "aws_access_key_id"], &[]);
            let secret = option(&["secret_access_key", "aws_secret_access_key"], &[]);
            let credentials = match (key, secret) {
                (Some(access_key_id), Some(secret_access_key)) => S3Credentials::Static(S3StaticCredentials {
                    access_key_id,
                    secret_access_key,
                    session_token: option(&["token", "aws_session_token"], &[]),
                    expires_after: None,
                }),
                _ if config.anonymous => S3Credentials::Anonymous,
                _ => S3Credentials::FromEnv,
            };
            icechunk::new_s3_object_store_storage(config, bucket()?, prefix, Some(credentials), vec![], vec![])
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "gs" => {
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_gcs_storage(bucket()?, prefix, None, Some(config), vec![], vec![])
                .map_err(|e| bad(e.to_string()))?
        }
        "az" | "azure" => {
            let account = option(
                &["account_name", "azure_storage_account_name"],
                &["AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT"],
            )
            .ok_or_else(|| bad("no account_name option".into()))?;
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_azure_blob_storage(account, bucket()?, prefix, None, Some(config))
                .await
                .map_err(|e| bad(e.to_string()))?
        }
        "http" | "https" => {
            let config: std::collections::HashMap<String, String> = opts.clone().into_iter().collect();
            icechunk::storage::new_http_storage(url.as_str(), Some(config), None).map_err(|e| bad(e.to_string()))?
        }
        other => return Err(bad(format!("unsupported scheme '{other}'"))),
    };
    Ok(storage)
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

fn session_error(e: SessionError) -> Option<StoreError> {
    match e.kind {
        SessionErrorKind::NodeNotFound { .. } | SessionErrorKind::NotAnArray { .. } => None,
        kind => Some(unavailable(kind)),
    }
}

impl IcechunkSnapshot {
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

    /// Read `range` of `key`; `None` when there is no such node or chunk.
    pub(crate) async fn get(
        &self,
        key: &str,
        range: ByteRange,
        if_match: Option<&str>,
    ) -> Result<Option<ReadResult>, StoreError> {
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
    pub(crate) async fn get_ranges(
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

    /// Metadata of `key`, without reading a chunk's bytes (a virtual one's
    /// URL is only checked against the allow-list).
    pub(crate) async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let Some(entry) = self.entry(key).await? else {
            return Ok(None);
        };
        if let Entry::Virtual { url, container, .. } = &entry {
            self.containers.check(url, container.as_deref())?;
        }
        Ok(Some(self.info(entry.size())))
    }
    /// The children of `prefix`: (directories, objects), each sorted.
    pub(crate) async fn list_dir(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>), StoreError> {
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

/// Unused options of a dataset would be silently ignored by the crate's
/// builders; name them instead.
pub(crate) fn check_options(scheme: &str, options: &BTreeMap<String, String>) -> Result<(), String> {
    let known: &[&str] = match scheme {
        "s3" | "s3a" => &[
            "region",
            "aws_region",
            "endpoint",
            "aws_endpoint",
            "endpoint_url",
            "aws_endpoint_url",
            "skip_signature",
            "aws_skip_signature",
            "allow_http",
            "aws_allow_http",
            "access_key_id",
            "aws_access_key_id",
            "secret_access_key",
            "aws_secret_access_key",
            "token",
            "aws_session_token",
        ],
        _ => return Ok(()),
    };
    match options.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "invalid store option '{k}' for an Icechunk repository on {scheme}"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_name_themselves() {
        for text in ["branch.main", "tag.v1.0", "branch.dev-2", "1CECHNKREP0F1RSTCMT0"] {
            assert_eq!(Version::parse(text).unwrap().to_string(), text);
        }
        assert!(Version::parse("tag.v1").unwrap().is_immutable());
        assert!(!Version::parse("branch.main").unwrap().is_immutable());
        for bad in [
            "",
            "main",
            "branch.",
            "tag.",
            "tag.a/b",
            "ABC",
            "1CECHNKREP0F1RSTCMT0X",
            "1CECHNKREP0F1RSTCMTU",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?}");
        }
    }

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
