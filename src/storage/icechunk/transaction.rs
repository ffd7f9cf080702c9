//! Transactions of a repository (api.md 4.3): one writable session of the
//! crate's that many requests, through any replica, add to until it is
//! committed, aborted or expires.
//!
//! A transaction is one object of the repository's store,
//! `zarr-serve/transactions/ID`, beside the crate's own prefixes (which the
//! crate never lists): its branch, base snapshot, state, expiry, and the
//! session as the crate serialises it (`Session::as_bytes`); the chunks its
//! writes made are already objects of the crate's, referenced by nothing
//! else until the commit (the crate's garbage collection removes those of
//! aborted transactions). The serialised session holds the repository's
//! storage, with the credentials of the dataset's options, twice: both are
//! removed before it is stored and the live storage put back when it is
//! read, so no secret lands in the repository.
//!
//! A request that changes a transaction first takes its lease (a
//! conditional put naming a token and an expiry), works on the session,
//! then stores the session and drops the lease in one conditional put:
//! requests on one transaction take turns across processes, and one that
//! fails changes nothing (its lease is dropped, or expires when the
//! process died). A commit carries the transaction's id in its metadata: a
//! commit whose process died before recording it is found on the branch,
//! never made twice.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use icechunk::format::snapshot::SnapshotProperties;
use icechunk::session::Session;
use icechunk::Repository;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::super::{ByteRange, Expect, Store, StoreError};
use super::{unavailable, IcechunkRepository, IcechunkSnapshot, Version};

/// Where transactions are kept in a repository's store.
const PREFIX: &str = "zarr-serve/transactions";
/// The layout of a stored transaction.
const FORMAT: u32 = 1;
/// How long a commit's ancestry is searched for a transaction's commit.
const SEARCHED_COMMITS: usize = 10_000;

/// How long a transaction lives after its last write, and how long one
/// request may hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionTimes {
    /// From the last write to expiry (`transaction_ttl_secs`).
    pub ttl: Duration,
    /// Longest hold of one request (after which another may take over).
    pub lease: Duration,
    /// Longest wait of a request for another's hold to end (then 409).
    pub wait: Duration,
}

/// A transaction as its answers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionInfo {
    /// Its id.
    pub id: String,
    /// The branch its commit goes to.
    pub branch: String,
    /// The snapshot it started from.
    pub base_snapshot: String,
    /// When it expires unless written again.
    pub expires_at: SystemTime,
    /// How many writes it holds.
    pub writes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum State {
    Open,
    Committed { snapshot: String },
    Aborted,
}

/// Who works on a transaction, until when.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lease {
    token: String,
    until_ms: u64,
    /// Taken to commit: when it expired, the commit may have landed.
    commit: bool,
}

/// A transaction as it is stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    format: u32,
    id: String,
    branch: String,
    base_snapshot: String,
    expires_ms: u64,
    written_ms: u64,
    writes: u64,
    state: State,
    lease: Option<Lease>,
    /// The session, its storage slots emptied ([`stored_session`]).
    session: ByteBuf,
}

impl Record {
    fn info(&self) -> TransactionInfo {
        TransactionInfo {
            id: self.id.clone(),
            branch: self.branch.clone(),
            base_snapshot: self.base_snapshot.clone(),
            expires_at: UNIX_EPOCH + Duration::from_millis(self.expires_ms),
            writes: self.writes,
        }
    }

    fn leased_at(&self, now: u64) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| l.until_ms > now)
    }

    /// [`StoreError::Gone`] unless the transaction takes requests.
    fn usable(&self, now: u64) -> Result<(), StoreError> {
        let id = &self.id;
        match &self.state {
            State::Committed { snapshot } => Err(StoreError::Gone(format!(
                "transaction '{id}' was committed (snapshot {snapshot})"
            ))),
            State::Aborted => Err(StoreError::Gone(format!("transaction '{id}' was aborted"))),
            State::Open if self.expires_ms <= now && self.leased_at(now).is_none() => Err(StoreError::Gone(format!(
                "transaction '{id}' expired at {} (transaction_ttl_secs after its last write)",
                humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(self.expires_ms))
            ))),
            State::Open => Ok(()),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The key of transaction `id`; an id the service never made is unknown.
fn key_of(id: &str) -> Result<String, StoreError> {
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(format!("{PREFIX}/{id}"))
    } else {
        Err(unknown(id))
    }
}

fn unknown(id: &str) -> StoreError {
    StoreError::UnknownVersion(format!("no transaction '{id}' in this repository"))
}

async fn load(objects: &Store, key: &str, id: &str) -> Result<(Record, String), StoreError> {
    let read = objects
        .get(key, ByteRange::All, None)
        .await?
        .ok_or_else(|| unknown(id))?;
    let etag = read
        .info
        .etag
        .ok_or_else(|| unavailable("the repository's store reports no ETags; transactions need them"))?;
    let record: Record =
        rmp_serde::from_slice(&read.data).map_err(|e| unavailable(format!("transaction '{id}' is unreadable: {e}")))?;
    if record.format != FORMAT || record.id != id {
        return Err(unavailable(format!("transaction '{id}' is not one this version reads")));
    }
    Ok((record, etag))
}

/// Store `record` if the object is as `expect` says; its new ETag.
async fn put_record(objects: &Store, key: &str, record: &Record, expect: Expect) -> Result<String, StoreError> {
    let bytes = rmp_serde::to_vec_named(record).map_err(unavailable)?;
    if let Some(etag) = objects.put(key, bytes::Bytes::from(bytes), expect).await? {
        return Ok(etag);
    }
    objects
        .head(key)
        .await?
        .and_then(|info| info.etag)
        .ok_or_else(|| unavailable("the repository's store reports no ETags; transactions need them"))
}

/// The serialised form of the repository's storage, as sessions hold it.
fn storage_value(repository: &Repository) -> Result<rmpv::Value, StoreError> {
    let bytes = rmp_serde::to_vec(repository.storage()).map_err(unavailable)?;
    rmpv::decode::read_value(&mut bytes.as_slice()).map_err(unavailable)
}

/// The two places a serialised session holds its storage: the session's
/// own and its asset manager's (fields 2 and 3.0 of the crate's 2.x layout).
fn storage_slots(session: &mut rmpv::Value) -> Option<(&mut rmpv::Value, &mut rmpv::Value)> {
    let rmpv::Value::Array(fields) = session else {
        return None;
    };
    let at = fields.len().min(3);
    let (head, tail) = fields.split_at_mut(at);
    let rmpv::Value::Array(manager) = tail.first_mut()? else {
        return None;
    };
    Some((head.get_mut(2)?, manager.first_mut()?))
}

/// `value` with the entries of every map in one order: a storage's
/// options are a hash map, serialised in the order of each copy's hasher
/// (a session restored from the record holds another copy than the
/// repository's).
fn canonical(value: rmpv::Value) -> rmpv::Value {
    match value {
        rmpv::Value::Map(entries) => {
            let mut entries: Vec<_> = entries.into_iter().map(|(k, v)| (canonical(k), canonical(v))).collect();
            entries.sort_by_cached_key(|(k, _)| k.to_string());
            rmpv::Value::Map(entries)
        }
        rmpv::Value::Array(items) => rmpv::Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

fn encode(value: &rmpv::Value) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value).map_err(unavailable)?;
    Ok(out)
}

/// `session` as the crate serialises it, without its storage (checked to
/// be where the layout says: anything else refuses to store it).
fn stored_session(repository: &Repository, session: &Session) -> Result<Vec<u8>, StoreError> {
    let bytes = session.as_bytes().map_err(unavailable)?;
    let mut value = rmpv::decode::read_value(&mut bytes.as_slice()).map_err(unavailable)?;
    let storage = canonical(storage_value(repository)?);
    match storage_slots(&mut value) {
        Some((own, manager)) if canonical(own.clone()) == storage && canonical(manager.clone()) == storage => {
            *own = rmpv::Value::Nil;
            *manager = rmpv::Value::Nil;
        }
        _ => {
            return Err(unavailable(
                "this version of the icechunk crate lays sessions out otherwise; transactions are not kept",
            ))
        }
    }
    encode(&value)
}

/// The session [`stored_session`] stored, with the repository's storage.
fn restored_session(repository: &Repository, stored: &[u8]) -> Result<Session, StoreError> {
    let corrupt = |why: String| unavailable(format!("a stored transaction's session is unreadable: {why}"));
    let mut value = rmpv::decode::read_value(&mut &stored[..]).map_err(|e| corrupt(e.to_string()))?;
    let storage = storage_value(repository)?;
    match storage_slots(&mut value) {
        Some((own, manager)) if own.is_nil() && manager.is_nil() => {
            *own = storage.clone();
            *manager = storage;
        }
        _ => return Err(corrupt("no storage slots".into())),
    }
    Session::from_bytes(&encode(&value)?).map_err(|e| corrupt(e.to_string()))
}

/// A transaction's lease, held by one request: [`IcechunkRepository::save`]
/// stores its session and drops the lease; otherwise dropping this drops
/// the lease and leaves the transaction as it was.
pub(crate) struct Held {
    objects: Store,
    key: String,
    /// The record as leased and its ETag; taken when stored.
    taken: std::sync::Mutex<Option<(Record, String)>>,
}

impl Held {
    fn take(&self) -> Option<(Record, String)> {
        self.taken.lock().expect("not poisoned").take()
    }

    /// The record as leased.
    fn record(&self) -> Result<Record, StoreError> {
        let taken = self.taken.lock().expect("not poisoned");
        taken
            .as_ref()
            .map(|(record, _)| record.clone())
            .ok_or_else(|| unavailable("a transaction's lease without its record"))
    }

    fn put_back(&self, record: Record, etag: String) {
        *self.taken.lock().expect("not poisoned") = Some((record, etag));
    }

    /// The transaction's id.
    pub(crate) fn id(&self) -> &str {
        self.key.rsplit('/').next().unwrap_or_default()
    }
}

/// What a lease leaves when its request ends without finishing: nothing,
/// but a commit's stays (expired): the commit may have landed, and the
/// next request looks for it on the branch.
fn released(lease: Option<Lease>) -> Option<Lease> {
    lease.filter(|l| l.commit).map(|l| Lease { until_ms: 0, ..l })
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some((mut record, etag)) = self.taken.get_mut().expect("not poisoned").take() else {
            return;
        };
        record.lease = released(record.lease.take());
        let (objects, key) = (self.objects.clone(), std::mem::take(&mut self.key));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = put_record(&objects, &key, &record, Expect::Version(etag)).await {
                    tracing::warn!(transaction = record.id, error = %e, "a transaction's lease was not dropped; it expires");
                }
            });
        }
    }
}

impl IcechunkRepository {
    /// A transaction on `branch` at its tip now.
    pub(crate) async fn begin(&self, branch: &str, times: TransactionTimes) -> Result<TransactionInfo, StoreError> {
        let repository = self.repository().await?;
        let session = repository
            .writable_session(branch)
            .await
            .map_err(|e| super::branch_failed(branch, e))?;
        let now = now_ms();
        let record = Record {
            format: FORMAT,
            id: hex::encode(rand::random::<[u8; 16]>()),
            branch: branch.to_string(),
            base_snapshot: session.snapshot_id().to_string(),
            expires_ms: now.saturating_add(millis(times.ttl)),
            written_ms: now,
            writes: 0,
            state: State::Open,
            lease: None,
            session: ByteBuf::from(stored_session(repository, &session)?),
        };
        put_record(&self.objects, &key_of(&record.id)?, &record, Expect::Absent).await?;
        Ok(record.info())
    }

    /// Take transaction `id`'s lease, waiting while another request holds
    /// it (409 after `times.lease`): the record as leased and its ETag.
    async fn acquire(&self, id: &str, times: TransactionTimes, commit: bool) -> Result<Held, StoreError> {
        let key = key_of(id)?;
        let token = hex::encode(rand::random::<[u8; 8]>());
        let started = Instant::now();
        loop {
            let (mut record, etag) = self.settled(&key, id).await?;
            let now = now_ms();
            if let Err(gone) = record.usable(now) {
                self.forget_session(&key, &record, etag).await;
                return Err(gone);
            }
            if let Some(lease) = record.leased_at(now) {
                if started.elapsed() > times.wait {
                    return Err(StoreError::Conflict(format!(
                        "transaction '{id}' is held by another request until {}; nothing was changed",
                        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(lease.until_ms))
                    )));
                }
                tokio::time::sleep(Duration::from_millis(rand::random_range(20..120))).await;
                continue;
            }
            record.lease = Some(Lease {
                token: token.clone(),
                until_ms: now.saturating_add(millis(times.lease)),
                commit,
            });
            let etag = match put_record(&self.objects, &key, &record, Expect::Version(etag)).await {
                Ok(etag) => etag,
                Err(StoreError::Changed(_)) => continue,
                Err(e) => return Err(e),
            };
            return Ok(Held {
                objects: self.objects.clone(),
                key: key.clone(),
                taken: std::sync::Mutex::new(Some((record, etag))),
            });
        }
    }

    /// Transaction `id` as stored, once a commit whose request ended
    /// before it recorded its outcome (an expired commit lease) is
    /// settled: committed when its commit is on the branch, else open.
    async fn settled(&self, key: &str, id: &str) -> Result<(Record, String), StoreError> {
        let (mut record, etag) = load(&self.objects, key, id).await?;
        let stale_commit = record
            .lease
            .as_ref()
            .is_some_and(|l| l.commit && l.until_ms <= now_ms());
        if !stale_commit || record.state != State::Open {
            return Ok((record, etag));
        }
        if let Some(snapshot) = self.find_commit(&record).await? {
            record.state = State::Committed { snapshot };
            record.session = ByteBuf::new();
        }
        record.lease = None;
        match put_record(&self.objects, key, &record, Expect::Version(etag)).await {
            Ok(etag) => Ok((record, etag)),
            // Someone else settled it (or took it) first: as they left it.
            Err(StoreError::Changed(_)) => load(&self.objects, key, id).await,
            Err(e) => Err(e),
        }
    }

    /// Drop the session of a transaction that takes no more requests
    /// (its chunks are garbage the crate's collection removes); best
    /// effort, the record stays.
    async fn forget_session(&self, key: &str, record: &Record, etag: String) {
        if record.session.is_empty() {
            return;
        }
        let emptied = Record {
            session: ByteBuf::new(),
            ..record.clone()
        };
        let _ = put_record(&self.objects, key, &emptied, Expect::Version(etag)).await;
    }

    /// The snapshot on the transaction's branch whose metadata names it,
    /// searched back to the transaction's base.
    async fn find_commit(&self, record: &Record) -> Result<Option<String>, StoreError> {
        let repository = self.repository().await?;
        let at = Version::Branch(record.branch.clone()).info()?;
        let ancestry = repository.ancestry(&at).await.map_err(unavailable)?;
        let mut ancestry = std::pin::pin!(ancestry.take(SEARCHED_COMMITS));
        while let Some(info) = ancestry.try_next().await.map_err(unavailable)? {
            let id = info.id.to_string();
            if info.metadata.get("transaction").and_then(|t| t.as_str()) == Some(record.id.as_str()) {
                return Ok(Some(id));
            }
            if id == record.base_snapshot {
                break;
            }
        }
        Ok(None)
    }

    /// Store the held transaction in `state`, without its session and lease.
    async fn finish(&self, held: &Held, state: State) -> Result<(), StoreError> {
        let (mut record, etag) = held.take().ok_or_else(|| unavailable("a transaction finished twice"))?;
        record.state = state;
        record.session = ByteBuf::new();
        record.lease = None;
        put_record(&self.objects, &held.key, &record, Expect::Version(etag)).await?;
        Ok(())
    }

    /// Transaction `id`, to write: its session, with its lease held until
    /// [`Self::save`] (or until the store is dropped: nothing changes).
    pub(crate) async fn in_transaction(
        &self,
        id: &str,
        times: TransactionTimes,
    ) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let repository = self.repository().await?;
        let held = self.acquire(id, times, false).await?;
        let record = held.record()?;
        let session = restored_session(repository, &record.session)?;
        let written = UNIX_EPOCH + Duration::from_millis(record.written_ms);
        let mut snapshot = self
            .wrap(record.base_snapshot, Some(record.branch), session, written)
            .await;
        snapshot.held = Some(held);
        Ok(Arc::new(snapshot))
    }

    /// Store what a store made by [`Self::in_transaction`] wrote, and drop
    /// its lease: the transaction then expires `times.ttl` from now.
    pub(crate) async fn save(
        &self,
        changes: &IcechunkSnapshot,
        times: TransactionTimes,
    ) -> Result<TransactionInfo, StoreError> {
        let repository = self.repository().await?;
        let held = changes
            .held
            .as_ref()
            .ok_or_else(|| unavailable("only a transaction's session is saved"))?;
        let (before, etag) = held.take().ok_or_else(|| unavailable("a transaction saved twice"))?;
        let stored = stored_session(repository, &*changes.session.read().await);
        let stored = match stored {
            Ok(stored) => stored,
            Err(e) => {
                held.put_back(before, etag);
                return Err(e);
            }
        };
        let now = now_ms();
        let record = Record {
            session: ByteBuf::from(stored),
            writes: before.writes + 1,
            written_ms: now,
            expires_ms: now.saturating_add(millis(times.ttl)),
            lease: None,
            ..before.clone()
        };
        match put_record(&self.objects, &held.key, &record, Expect::Version(etag.clone())).await {
            Ok(_) => Ok(record.info()),
            Err(StoreError::Changed(_)) => Err(StoreError::Conflict(format!(
                "transaction '{}' was taken over by another request while this write ran (it held it longer than its lease); nothing of this write was kept",
                record.id
            ))),
            Err(e) => {
                held.put_back(before, etag);
                Err(e)
            }
        }
    }

    /// Transaction `id` now.
    pub(crate) async fn transaction_info(&self, id: &str) -> Result<TransactionInfo, StoreError> {
        let (record, _) = self.settled(&key_of(id)?, id).await?;
        record.usable(now_ms())?;
        Ok(record.info())
    }

    /// Transaction `id` as its writes left it, to read.
    pub(crate) async fn transaction_view(&self, id: &str) -> Result<Arc<IcechunkSnapshot>, StoreError> {
        let key = key_of(id)?;
        let (record, _) = self.settled(&key, id).await?;
        record.usable(now_ms())?;
        let name = format!("transaction.{id}.{}", record.writes);
        let open = async {
            let repository = self.repository().await?;
            let session = restored_session(repository, &record.session)?;
            let written = UNIX_EPOCH + Duration::from_millis(record.written_ms);
            Ok(Arc::new(self.wrap(name.clone(), None, session, written).await))
        };
        self.snapshots
            .try_get_with(name.clone(), open)
            .await
            .map_err(|e: Arc<StoreError>| (*e).clone())
    }

    /// Commit transaction `id` to its branch (rebased as a write's commit
    /// is, with `properties` and the transaction's id in its metadata):
    /// the new snapshot and the branch. A conflict leaves it open.
    pub(crate) async fn commit_transaction(
        &self,
        id: &str,
        message: &str,
        mut properties: SnapshotProperties,
        attempts: u16,
        times: TransactionTimes,
    ) -> Result<(String, String), StoreError> {
        let repository = self.repository().await?;
        let held = self.acquire(id, times, true).await?;
        let record = held.record()?;
        let session = restored_session(repository, &record.session)?;
        let branch = record.branch.clone();
        let changes = self
            .wrap(
                record.base_snapshot.clone(),
                Some(branch.clone()),
                session,
                SystemTime::now(),
            )
            .await;
        properties.insert("transaction".into(), id.into());
        let snapshot = match self.commit(&changes, message, properties, attempts).await {
            Ok(snapshot) => snapshot,
            // The commit may have landed before the error (a retried
            // update of the branch that had succeeded, say).
            Err(e) => match self.find_commit(&record).await {
                Ok(Some(snapshot)) => snapshot,
                _ => return Err(e),
            },
        };
        // The commit landed: a failure to record it is found again by the
        // next request (the lease says a commit was under way).
        if let Err(e) = self
            .finish(
                &held,
                State::Committed {
                    snapshot: snapshot.clone(),
                },
            )
            .await
        {
            tracing::warn!(transaction = id, snapshot, error = %e, "a committed transaction was not marked so; the next request finds its commit");
        }
        Ok((snapshot, branch))
    }

    /// Abort transaction `id`: nothing of it is ever committed.
    pub(crate) async fn abort_transaction(&self, id: &str, times: TransactionTimes) -> Result<(), StoreError> {
        let held = self.acquire(id, times, false).await?;
        self.finish(&held, State::Aborted).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stored_session_holds_no_storage_and_restores_whole() {
        let dir = tempfile::tempdir().unwrap();
        let storage = icechunk::new_local_filesystem_storage(dir.path()).await.unwrap();
        let repository = Repository::create(storage).execute().await.unwrap();
        let mut session = repository.writable_session("main").await.unwrap();
        let path = icechunk::format::Path::try_from("/g").unwrap();
        session.add_group(path, bytes::Bytes::from_static(b"{}")).await.unwrap();
        let stored = stored_session(&repository, &session).unwrap();
        // The storage names the repository's directory; the stored session does not.
        let storage = rmp_serde::to_vec(repository.storage()).unwrap();
        let needle = dir.path().to_str().unwrap().as_bytes();
        assert!(storage.windows(needle.len()).any(|w| w == needle));
        assert!(!stored.windows(needle.len()).any(|w| w == needle));
        let restored = restored_session(&repository, &stored).unwrap();
        assert_eq!(restored.as_bytes().unwrap(), session.as_bytes().unwrap());
        assert!(restored.has_uncommitted_changes());
        // A stored session is restored only into its slots.
        assert!(restored_session(&repository, &session.as_bytes().unwrap()).is_err());
        assert!(restored_session(&repository, b"\x93\x01\x02").is_err());
    }

    /// A storage's options (a hash map) serialise in any order: the same
    /// options compare equal whatever their order, other ones do not.
    #[test]
    fn storages_compare_whatever_the_order_of_their_options() {
        use rmpv::Value;
        let options =
            |pairs: &[(&str, &str)]| Value::Map(pairs.iter().map(|&(k, v)| (Value::from(k), Value::from(v))).collect());
        let storage = |opts: Value| {
            Value::Array(vec![
                Value::from("azure"),
                Value::Map(vec![(Value::from("config"), opts)]),
            ])
        };
        let one = storage(options(&[
            ("account_name", "a"),
            ("access_key", "k"),
            ("use_emulator", "true"),
        ]));
        let other = storage(options(&[
            ("use_emulator", "true"),
            ("account_name", "a"),
            ("access_key", "k"),
        ]));
        assert_ne!(one, other, "as serialised");
        assert_eq!(canonical(one.clone()), canonical(other));
        let changed = storage(options(&[
            ("account_name", "a"),
            ("access_key", "K"),
            ("use_emulator", "true"),
        ]));
        assert_ne!(canonical(one), canonical(changed));
    }

    #[test]
    fn a_commit_lease_outlives_its_request() {
        let lease = Lease {
            token: "t".into(),
            until_ms: u64::MAX,
            commit: true,
        };
        assert_eq!(released(Some(lease.clone())).map(|l| l.until_ms), Some(0));
        let write = Lease { commit: false, ..lease };
        assert!(released(Some(write)).is_none());
    }

    /// A transaction whose commit landed while its request died before
    /// recording it: the next request finds the commit (410, committed),
    /// and nothing is committed twice.
    #[tokio::test]
    async fn a_commit_whose_request_died_is_found_not_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let repo_dir = dir.path().join("repo");
        let storage = icechunk::new_local_filesystem_storage(&repo_dir).await.unwrap();
        Repository::create(storage).execute().await.unwrap();
        let url = url::Url::from_directory_path(&repo_dir).unwrap();
        let options = crate::storage::StoreOptions::default();
        let store = Store::open(&format!("icechunk+{url}"), &options).unwrap();
        let repository = store.versions.as_ref().unwrap().repository.clone();
        let times = TransactionTimes {
            ttl: Duration::from_secs(60),
            lease: Duration::from_secs(60),
            wait: Duration::from_secs(1),
        };
        let begun = repository.begin("main", times).await.unwrap();
        let written = repository.in_transaction(&begun.id, times).await.unwrap();
        let group = bytes::Bytes::from_static(br#"{"zarr_format":3,"node_type":"group","attributes":{}}"#);
        use crate::storage::source::KeySource;
        written
            .put("g/zarr.json", group.into(), Expect::Anything)
            .await
            .unwrap();
        repository.save(&written, times).await.unwrap();
        // The commit lands; its request dies before recording it.
        let held = repository.acquire(&begun.id, times, true).await.unwrap();
        let record = held.record().unwrap();
        let session = restored_session(repository.repository().await.unwrap(), &record.session).unwrap();
        let changes = repository
            .wrap(
                record.base_snapshot.clone(),
                Some("main".into()),
                session,
                SystemTime::now(),
            )
            .await;
        let mut properties = SnapshotProperties::default();
        properties.insert("transaction".into(), begun.id.clone().into());
        let landed = repository.commit(&changes, "landed", properties, 1).await.unwrap();
        drop(held);
        tokio::time::sleep(Duration::from_millis(300)).await; // the lease's release
        let again = repository
            .commit_transaction(&begun.id, "again", SnapshotProperties::default(), 1, times)
            .await;
        assert!(
            matches!(again, Err(StoreError::Gone(ref m)) if m.contains(&landed)),
            "{again:?}"
        );
        let history = repository.history(&Version::Branch("main".into()), 10).await.unwrap();
        assert_eq!(history.len(), 2, "{history:?}"); // the repository's start and the one commit
        assert_eq!(history[0].id, landed);
    }

    #[test]
    fn ids_the_service_never_made_are_unknown() {
        assert!(key_of("0123456789abcdef0123456789abcdef").is_ok());
        for bad in [
            "",
            "../x",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde/",
        ] {
            assert!(matches!(key_of(bad), Err(StoreError::UnknownVersion(_))), "{bad}");
        }
    }
}
