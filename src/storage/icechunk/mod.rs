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

mod snapshot;
mod storage;
mod transaction;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::{StreamExt, TryStreamExt};
use icechunk::conflicts::detector::ConflictDetector;
use icechunk::conflicts::Conflict;
use icechunk::format::snapshot::SnapshotProperties;
use icechunk::format::SnapshotId;
use icechunk::repository::VersionInfo;
use icechunk::Repository;
use tokio::sync::{OnceCell, RwLock};
use url::Url;

pub(crate) use self::snapshot::IcechunkSnapshot;
pub(crate) use self::storage::check_options;
use self::storage::storage_for;
pub use self::transaction::{TransactionInfo, TransactionTimes};
use super::containers::Containers;
use super::source::{KeySource, Listing};
use super::{ByteRange, ObjectInfo, ReadResult, Store, StoreError, StoreOptions};

/// A version of a repository, as a URL names it after `@`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Version {
    /// `branch.NAME`: the branch's tip, which moves.
    Branch(String),
    /// `tag.NAME`
    Tag(String),
    /// A snapshot id (20 Crockford base-32 characters).
    Snapshot(String),
    /// `transaction.ID`: what a transaction's writes made, uncommitted.
    Transaction(String),
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
        if let Some(id) = text.strip_prefix("transaction.") {
            return named("transaction", id).map(Version::Transaction);
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
        matches!(self, Version::Tag(_) | Version::Snapshot(_))
    }

    fn info(&self) -> Result<VersionInfo, StoreError> {
        Ok(match self {
            Version::Branch(b) => VersionInfo::BranchTipRef(b.clone()),
            Version::Tag(t) => VersionInfo::TagRef(t.clone()),
            Version::Snapshot(s) => VersionInfo::SnapshotId(
                SnapshotId::try_from(s.as_str()).map_err(|e| StoreError::BadVersion(e.to_string()))?,
            ),
            Version::Transaction(_) => {
                return Err(StoreError::BadVersion(
                    "a transaction has no snapshot until it is committed".into(),
                ))
            }
        })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Branch(b) => write!(f, "branch.{b}"),
            Version::Tag(t) => write!(f, "tag.{t}"),
            Version::Snapshot(s) => f.write_str(s),
            Version::Transaction(id) => write!(f, "transaction.{id}"),
        }
    }
}

/// A branch or a tag, as a change of refs names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A branch: moves with each commit.
    Branch,
    /// A tag: never moves.
    Tag,
}

impl RefKind {
    fn noun(self) -> &'static str {
        match self {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        }
    }

    fn version(self, name: &str) -> Version {
        match self {
            RefKind::Branch => Version::Branch(name.to_string()),
            RefKind::Tag => Version::Tag(name.to_string()),
        }
    }
}

/// One snapshot of a repository's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Its id.
    pub id: String,
    /// The snapshot it was made on (`None` for the first).
    pub parent: Option<String>,
    /// Its message.
    pub message: String,
    /// When it was written.
    pub written_at: SystemTime,
    /// The `author` its metadata names, when it does.
    pub author: Option<String>,
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
    /// Commits of this process take turns: the crate's local storage has
    /// no compare-and-swap, and on object stores turns spare the rebase
    /// retries of writers in one process (other processes are told apart
    /// by the crate's conditional writes and rebased onto).
    commit_turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for IcechunkRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcechunkRepository")
            .field("url", &super::open::redact(&self.url))
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

/// What a change of a ref met: the name taken, the ref missing, the branch
/// moved, a rule of the crate's; or the store's error.
fn ref_failed(kind: RefKind, name: &str, error: icechunk::repository::RepositoryError) -> StoreError {
    use icechunk::format::IcechunkFormatErrorKind as F;
    use icechunk::refs::RefErrorKind as R;
    use icechunk::repository::RepositoryErrorKind as K;
    let what = format!("{} '{name}'", kind.noun());
    match &error.kind {
        K::FormatError(F::BranchAlreadyExists { .. } | F::TagAlreadyExists { .. } | F::TagPreviouslyDeleted { .. })
        | K::Ref(R::TagAlreadyExists(_))
        | K::Tag(_) => StoreError::Conflict(format!("{what} exists (a tag's name is never reused); nothing changed")),
        K::Conflict { .. } | K::Ref(R::Conflict { .. }) => StoreError::Changed(what),
        K::CannotDeleteMain => StoreError::BadVersion("branch 'main' cannot be deleted".into()),
        _ if is_malformed(&error) => StoreError::BadVersion(format!("malformed {what}: {error}")),
        _ if is_unknown(&error) => StoreError::UnknownVersion(format!("no {what} in this repository")),
        _ => unavailable(error),
    }
}

/// Why no writable session of `branch` opened.
fn branch_failed(branch: &str, e: icechunk::repository::RepositoryError) -> StoreError {
    if is_malformed(&e) {
        StoreError::BadVersion(format!("malformed branch name '{branch}': {e}"))
    } else if is_unknown(&e) {
        StoreError::UnknownVersion(format!("no branch '{branch}' in this repository"))
    } else {
        unavailable(e)
    }
}

/// Whether a repository error means "not a valid ref name".
fn is_malformed(error: &icechunk::repository::RepositoryError) -> bool {
    use icechunk::refs::RefErrorKind;
    use icechunk::repository::RepositoryErrorKind as K;
    matches!(&error.kind, K::Ref(RefErrorKind::InvalidRefName(_)))
}

/// A commit that did not land: conflicts with what others committed are
/// [`StoreError::Conflict`], listed; anything else the store's.
fn commit_failed(e: icechunk::session::SessionError) -> StoreError {
    use icechunk::session::SessionErrorKind as K;
    match e.kind {
        K::RebaseFailed { conflicts, .. } => StoreError::Conflict(format!(
            "the branch moved and the change conflicts with what was committed meanwhile: {}; nothing was committed",
            conflicts.iter().map(describe_conflict).collect::<Vec<_>>().join("; ")
        )),
        K::Conflict { .. } => StoreError::Conflict(
            "the branch kept moving while this change was rebased onto it; nothing was committed".into(),
        ),
        kind => unavailable(kind),
    }
}

/// One conflict, naming its node (and chunks).
fn describe_conflict(conflict: &Conflict) -> String {
    match conflict {
        Conflict::ChunkDoubleUpdate {
            path,
            chunk_coordinates,
            ..
        } => {
            let mut chunks: Vec<&Vec<u32>> = chunk_coordinates.iter().map(|c| &c.0).collect();
            chunks.sort();
            format!("chunks {chunks:?} of '{path}' were written by another commit")
        }
        Conflict::NewNodeConflictsWithExistingNode(path) => format!("node '{path}' was created by another commit"),
        Conflict::NewNodeInInvalidGroup(path) => format!("the group of new node '{path}' changed in another commit"),
        Conflict::ZarrMetadataDoubleUpdate(path) => format!("the metadata of '{path}' was changed by another commit"),
        Conflict::ZarrMetadataUpdateOfDeletedArray(path) | Conflict::ZarrMetadataUpdateOfDeletedGroup(path) => {
            format!("'{path}' was deleted by another commit")
        }
        Conflict::ChunksUpdatedInDeletedArray { path, .. } => format!("array '{path}' was deleted by another commit"),
        Conflict::ChunksUpdatedInUpdatedArray { path, .. } => {
            format!("the metadata of array '{path}' was changed by another commit")
        }
        Conflict::DeleteOfUpdatedArray { path, .. } | Conflict::DeleteOfUpdatedGroup { path, .. } => {
            format!("'{path}' was changed by another commit")
        }
        Conflict::MoveOperationCannotBeRebased => "a move by another commit cannot be rebased over".into(),
    }
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
            commit_turn: tokio::sync::Mutex::new(()),
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
            Version::Transaction(_) => return Err(version.info().unwrap_err()),
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
            Ok(Arc::new(self.wrap(id.to_string(), None, session, written).await))
        };
        self.snapshots
            .try_get_with(id.to_string(), open)
            .await
            .map_err(|e: Arc<StoreError>| (*e).clone())
    }

    /// A writable session on `branch` at its tip now: what one write (or
    /// one transaction) reads and changes before it commits.
    pub(crate) async fn writable(&self, branch: &str) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let repository = self.repository().await?;
        let session = repository
            .writable_session(branch)
            .await
            .map_err(|e| branch_failed(branch, e))?;
        let id = session.snapshot_id().to_string();
        let branch = Some(branch.to_string());
        Ok(Arc::new(self.wrap(id, branch, session, SystemTime::now()).await))
    }

    /// `session` as a store of keys, named `id` (the ETag of its objects);
    /// writable when it has a `branch`.
    async fn wrap(
        &self,
        id: String,
        branch: Option<String>,
        session: icechunk::session::Session,
        written: SystemTime,
    ) -> IcechunkSnapshot {
        let session = Arc::new(RwLock::new(session));
        let store = icechunk::Store::from_session(session.clone()).await;
        IcechunkSnapshot {
            id,
            branch,
            store,
            session,
            written,
            containers: self.containers.clone(),
            objects: self.objects.clone(),
            held: None,
        }
    }

    /// Commit what the writable session `changes` holds to its branch with
    /// `message` and `properties`, rebased onto the branch's tip when it
    /// moved meanwhile (the crate's conflict detection, up to `attempts`
    /// times); the new snapshot's id. A conflict is [`StoreError::Conflict`]
    /// naming the chunks and nodes, and nothing is committed.
    pub(crate) async fn commit(
        &self,
        changes: &IcechunkSnapshot,
        message: &str,
        properties: SnapshotProperties,
        attempts: u16,
    ) -> Result<String, StoreError> {
        let Some(branch) = &changes.branch else {
            return Err(StoreError::Unavailable("a snapshot has nothing to commit".into()));
        };
        let _turn = self.commit_turn.lock().await;
        let committed = changes
            .session
            .write()
            .await
            .commit(message)
            .properties(properties)
            .allow_empty(true)
            .rebase(&ConflictDetector, attempts.max(1))
            .execute()
            .await;
        let id = committed.map_err(commit_failed)?.to_string();
        self.tips.insert(Version::Branch(branch.clone()), id.clone()).await;
        Ok(id)
    }

    /// The snapshots `version` descends from, itself first, at most `limit`.
    pub(crate) async fn history(&self, version: &Version, limit: usize) -> Result<Vec<Commit>, StoreError> {
        let id = self.resolve(version).await?;
        let repository = self.repository().await?;
        let at = Version::Snapshot(id).info()?;
        let ancestry = repository.ancestry(&at).await.map_err(unavailable)?;
        let infos: Vec<_> = ancestry.take(limit).try_collect().await.map_err(unavailable)?;
        Ok(infos
            .into_iter()
            .map(|info| Commit {
                id: info.id.to_string(),
                parent: info.parent_id.map(|p| p.to_string()),
                message: info.message,
                written_at: SystemTime::from(info.flushed_at),
                author: info.metadata.get("author").and_then(|a| a.as_str()).map(str::to_string),
            })
            .collect())
    }

    /// Make branch or tag `name` at `snapshot`: [`StoreError::Conflict`]
    /// when the name exists (a tag's name, even once deleted: tags never
    /// move), [`StoreError::BadVersion`] for a malformed name or an unknown
    /// snapshot.
    pub(crate) async fn create_ref(&self, kind: RefKind, name: &str, snapshot: &str) -> Result<(), StoreError> {
        let repository = self.repository().await?;
        let id = self.known_snapshot(snapshot).await?;
        let made = match kind {
            RefKind::Branch => repository.create_branch(name, &id).await,
            RefKind::Tag => repository.create_tag(name, &id).await,
        };
        made.map_err(|e| ref_failed(kind, name, e))?;
        self.tips.invalidate(&kind.version(name)).await;
        Ok(())
    }

    /// Point branch `name` at `snapshot`; with a `condition`, only while
    /// it holds for the snapshot the branch is at ([`StoreError::Changed`]
    /// otherwise, also when the branch moves between the check and the
    /// reset).
    pub(crate) async fn reset_branch(
        &self,
        name: &str,
        snapshot: &str,
        condition: Option<&(dyn Fn(&str) -> bool + Sync)>,
    ) -> Result<(), StoreError> {
        let repository = self.repository().await?;
        let id = self.known_snapshot(snapshot).await?;
        // The branch must exist: resetting never creates one.
        let current = repository
            .lookup_branch(name)
            .await
            .map_err(|e| ref_failed(RefKind::Branch, name, e))?;
        let from = match condition {
            None => None,
            Some(holds) if holds(&current.to_string()) => Some(&current),
            Some(_) => return Err(StoreError::Changed(format!("branch '{name}'"))),
        };
        let reset = repository.reset_branch(name, &id, from).await;
        self.tips.invalidate(&RefKind::Branch.version(name)).await;
        reset.map_err(|e| ref_failed(RefKind::Branch, name, e))
    }

    /// Remove branch or tag `name` (the crate's rules: never `main`).
    pub(crate) async fn delete_ref(&self, kind: RefKind, name: &str) -> Result<(), StoreError> {
        let repository = self.repository().await?;
        let deleted = match kind {
            RefKind::Branch => repository.delete_branch(name).await,
            RefKind::Tag => repository.delete_tag(name).await,
        };
        self.tips.invalidate(&kind.version(name)).await;
        deleted.map_err(|e| ref_failed(kind, name, e))
    }

    /// The id of `snapshot`, which the repository must have.
    async fn known_snapshot(&self, snapshot: &str) -> Result<SnapshotId, StoreError> {
        let unknown = || StoreError::BadVersion(format!("this repository has no snapshot '{snapshot}'"));
        let id = SnapshotId::try_from(snapshot).map_err(|_| unknown())?;
        match self.resolve(&Version::Snapshot(snapshot.to_string())).await {
            Ok(_) => Ok(id),
            Err(StoreError::UnknownVersion(_) | StoreError::BadVersion(_)) => Err(unknown()),
            Err(e) => Err(e),
        }
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

/// A repository's `main` at its tip now: what reads not pinned to a
/// version (readiness) read.
#[derive(Debug)]
pub(crate) struct MainTip(pub(crate) Arc<IcechunkRepository>);

impl MainTip {
    async fn snapshot(&self) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let id = self.0.resolve(&Version::Branch("main".into())).await?;
        self.0.snapshot(&id).await
    }
}

#[async_trait::async_trait]
impl KeySource for MainTip {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        self.snapshot().await?.get(key, range, if_match).await
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[std::ops::Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<bytes::Bytes>>, StoreError> {
        self.snapshot().await?.get_ranges(key, ranges, if_match).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        self.snapshot().await?.head(key).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.snapshot().await?.list_dir(prefix).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_name_themselves() {
        for text in [
            "branch.main",
            "tag.v1.0",
            "branch.dev-2",
            "1CECHNKREP0F1RSTCMT0",
            "transaction.0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(Version::parse(text).unwrap().to_string(), text);
        }
        assert!(Version::parse("tag.v1").unwrap().is_immutable());
        assert!(!Version::parse("branch.main").unwrap().is_immutable());
        assert!(!Version::parse("transaction.x").unwrap().is_immutable());
        for bad in [
            "",
            "main",
            "branch.",
            "tag.",
            "tag.a/b",
            "transaction.",
            "ABC",
            "1CECHNKREP0F1RSTCMT0X",
            "1CECHNKREP0F1RSTCMTU",
        ] {
            assert!(Version::parse(bad).is_err(), "{bad:?}");
        }
    }
}
