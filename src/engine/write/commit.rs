//! Writes through an Icechunk repository (api.md 4.3): a dataset on a
//! branch reads and writes one writable session of the crate's, and the
//! request's changes become one commit, rebased onto the branch when it
//! moved meanwhile.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::error::{Error, Result};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::StoreError;

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
        let store = self.store.on_branch(branch).await.map_err(|e| match e {
            StoreError::UnknownVersion(m) => Error::NotFound(format!("dataset '{}': {m}", self.name)),
            e => Error::Store(e),
        })?;
        // Cached nodes and chunks of a session are its own.
        let n = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        Ok(Dataset {
            name: format!("{}@branch.{branch}", self.name).into(),
            scope: format!("{}@session.{}.{n}", self.name, std::process::id()).into(),
            store,
            ..self.clone()
        })
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
