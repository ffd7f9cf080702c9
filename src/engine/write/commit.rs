//! Writes through an Icechunk repository (api.md 4.3): a dataset on a
//! branch reads and writes one writable session of the crate's, and the
//! request's changes become one commit, rebased onto the branch when it
//! moved meanwhile.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::error::{Error, Result};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{StoreError, TransactionInfo, TransactionTimes};

/// Tells the sessions of this process apart in cache keys.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(0);

/// What a commit made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// The new snapshot's id.
    pub snapshot: String,
    /// The branch now at it.
    pub branch: String,
}

impl Dataset {
    /// This repository's `branch` at its tip now, to write: its reads see
    /// its own writes, nobody else sees them until [`Dataset::commit`].
    pub async fn on_branch(&self, branch: &str) -> Result<Dataset> {
        let store = self.store.on_branch(branch).await.map_err(|e| self.not_found(e))?;
        Ok(self.session(format!("branch.{branch}"), store))
    }

    /// Transaction `id` of this repository, to write: its reads see the
    /// transaction's writes and its own, nobody else sees them until
    /// [`Dataset::commit_transaction`]; [`Dataset::save_transaction`] keeps
    /// them (until then this request holds the transaction).
    pub async fn in_transaction(&self, id: &str, times: TransactionTimes) -> Result<Dataset> {
        let store = self
            .store
            .in_transaction(id, times)
            .await
            .map_err(|e| self.not_found(e))?;
        Ok(self.session(format!("transaction.{id}"), store))
    }

    /// A dataset writing through `store`, a session of its own: cached
    /// nodes and chunks of a session are its own.
    fn session(&self, version: String, store: crate::storage::Store) -> Dataset {
        let n = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        Dataset {
            name: format!("{}@{version}", self.name).into(),
            scope: format!("{}@session.{}.{n}", self.name, std::process::id()).into(),
            store,
            ..self.clone()
        }
    }

    /// An unknown ref or transaction of this dataset is a 404 naming it.
    fn not_found(&self, e: StoreError) -> Error {
        match e {
            StoreError::UnknownVersion(m) => Error::NotFound(format!("dataset '{}': {m}", self.name)),
            e => Error::Store(e),
        }
    }

    /// The transaction a dataset made by [`Dataset::in_transaction`] writes in.
    pub fn transaction(&self) -> Option<&str> {
        self.store.transaction()
    }

    /// Keep what was written to a dataset made by [`Dataset::in_transaction`].
    pub async fn save_transaction(&self, times: TransactionTimes) -> Result<TransactionInfo> {
        Ok(self.store.save_transaction(times).await?)
    }

    /// A new transaction of this repository on `branch` at its tip now.
    pub async fn begin_transaction(&self, branch: &str, times: TransactionTimes) -> Result<TransactionInfo> {
        self.store
            .begin_transaction(branch, times)
            .await
            .map_err(|e| self.not_found(e))
    }

    /// Commit transaction `id` with `message` and `author`, rebased as
    /// [`Dataset::commit`] is; a conflict leaves the transaction open.
    pub async fn commit_transaction(
        &self,
        id: &str,
        message: &str,
        author: &str,
        attempts: u16,
        times: TransactionTimes,
    ) -> Result<Commit> {
        let properties = BTreeMap::from([("author".to_string(), serde_json::Value::from(author))]);
        let (snapshot, branch) = self
            .store
            .commit_transaction(id, message, properties, attempts, times)
            .await
            .map_err(|e| self.not_found(e))?;
        Ok(Commit { snapshot, branch })
    }

    /// Transaction `id` of this repository now.
    pub async fn transaction_info(&self, id: &str) -> Result<TransactionInfo> {
        self.store.transaction_info(id).await.map_err(|e| self.not_found(e))
    }

    /// Abort transaction `id`: nothing of it is ever committed.
    pub async fn abort_transaction(&self, id: &str, times: TransactionTimes) -> Result<()> {
        self.store
            .abort_transaction(id, times)
            .await
            .map_err(|e| self.not_found(e))
    }

    /// The branch a dataset made by [`Dataset::on_branch`] writes to.
    pub fn branch(&self) -> Option<&str> {
        self.store.branch()
    }

    /// Commit what was written to a dataset made by [`Dataset::on_branch`],
    /// with `message` and `author` (in the commit's metadata), rebased when
    /// the branch moved (up to `attempts` times): a conflict is
    /// [`Error::Store`] of [`StoreError::Conflict`], and nothing is committed.
    pub async fn commit(&self, message: &str, author: &str, attempts: u16) -> Result<Commit> {
        let branch = self
            .branch()
            .ok_or_else(|| Error::Internal("a commit of a dataset not on a branch".into()))?
            .to_string();
        let properties = BTreeMap::from([("author".to_string(), serde_json::Value::from(author))]);
        let snapshot = self.store.commit(message, properties, attempts).await?;
        self.forget_nodes().await;
        Ok(Commit { snapshot, branch })
    }
}
