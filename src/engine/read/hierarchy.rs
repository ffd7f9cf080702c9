//! Datasets and their node hierarchy: opening nodes and listing children.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#hierarchy>.
//! A node at path `a/b` has its metadata at key `a/b/zarr.json`. A directory
//! without `zarr.json` that has nodes below it is an implicit group.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;

use crate::engine::error::{Error, Result};
use crate::engine::format::metadata::NodeMetadata;
use crate::engine::format::metadata_v2;
use crate::engine::query::node::Node;
use crate::engine::read::resources::Resources;
use crate::storage::{join, validate_key, ByteRange, Store, StoreError, Version};

/// A child entry of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// Last path segment.
    pub name: String,
    /// Path without the leading `/`.
    pub path: String,
    /// `"array"` or `"group"`.
    pub node_type: &'static str,
}

/// A named Zarr hierarchy root in a store.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Name in URLs: the configured name, with `@ref` when a request
    /// named a version of a repository.
    pub name: Arc<str>,
    /// What cache keys and ETags carry: the name, with `@SNAPSHOT` for a
    /// version of a repository, so every ref naming one snapshot shares
    /// them.
    pub scope: Arc<str>,
    /// Human description.
    pub description: Option<String>,
    pub(crate) store: Store,
    /// The process's limits, pools and caches, shared by all datasets.
    pub(crate) resources: Arc<Resources>,
}

impl Dataset {
    /// A dataset over `store` using the process's shared `resources`.
    pub fn new(name: &str, description: Option<String>, store: Store, resources: Arc<Resources>) -> Self {
        Self {
            name: name.into(),
            scope: name.into(),
            description,
            store,
            resources,
        }
    }

    /// The dataset's store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// This dataset at `version` (`@ref` of a URL) of its Icechunk
    /// repository; with none, at `branch.main` for a repository and as it
    /// is otherwise. A malformed ref, or a ref of a dataset that is not a
    /// repository, is an invalid request; an unknown one, not found.
    pub async fn at(&self, version: Option<&str>) -> Result<Dataset> {
        let parsed = match version {
            None if !self.store.is_versioned() => return Ok(self.clone()),
            None => Version::Branch("main".into()),
            Some(_) if !self.store.is_versioned() => {
                return Err(Error::InvalidRequest(format!(
                    "dataset '{}' is not an Icechunk repository: it has no refs ('@ref')",
                    self.name
                )))
            }
            Some(text) => Version::parse(text).map_err(Error::InvalidRequest)?,
        };
        self.at_version(&parsed, version).await
    }

    /// Transaction `id` of this dataset's repository as a read of
    /// `@transaction.ID` sees it; an id the service never made, not found.
    pub async fn transaction_view(&self, id: &str) -> Result<Dataset> {
        let version = Version::Transaction(id.to_string());
        self.at_version(&version, Some(&version.to_string())).await
    }

    /// This dataset at `parsed`, named with `version` (its `@ref`).
    async fn at_version(&self, parsed: &Version, version: Option<&str>) -> Result<Dataset> {
        let store = self.store.at(parsed).await.map_err(|e| match e {
            StoreError::UnknownVersion(m) => Error::NotFound(format!("dataset '{}': {m}", self.name)),
            e => Error::Store(e),
        })?;
        let snapshot = store.snapshot_id().unwrap_or_default();
        Ok(Dataset {
            name: version.map_or(self.name.clone(), |v| format!("{}@{v}", self.name).into()),
            scope: format!("{}@{snapshot}", self.name).into(),
            store,
            ..self.clone()
        })
    }

    /// The process's limits, pools and caches this dataset reads with.
    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// Normalise a node path from a URL (`/a/b`, `a/b/`, `""`) and validate it.
    pub(crate) fn node_path(path: &str) -> Result<String> {
        let trimmed = path.trim_matches('/');
        validate_key(trimmed).map_err(|e| Error::InvalidRequest(format!("invalid node path: {e}")))?;
        Ok(trimmed.to_string())
    }

    /// The node at `path` (normalised), from the metadata cache or the store.
    pub async fn node(&self, path: &str) -> Result<Arc<Node>> {
        let path = Self::node_path(path)?;
        let key = (self.scope.clone(), path.clone());
        if let Some(node) = self.resources.caches.nodes.get(&key).await {
            self.resources.caches.node_stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(node);
        }
        self.resources.caches.node_stats.misses.fetch_add(1, Ordering::Relaxed);
        let node = Arc::new(self.load_node(&path).await?);
        self.resources.caches.nodes.insert(key, node.clone()).await;
        Ok(node)
    }

    /// A node is what its own metadata says: `zarr.json` first, else
    /// Zarr v2's `.zarray` or `.zgroup`, else an implicit (v3) group when
    /// nodes lie below it.
    pub(crate) async fn load_node(&self, path: &str) -> Result<Node> {
        let node = |metadata, etag| Node::new(path, metadata, etag);
        let meta_key = join(path, "zarr.json");
        if let Some(read) = self.store.get(&meta_key, ByteRange::All, None).await? {
            let metadata = NodeMetadata::parse(&read.data, &meta_key)?;
            return Ok(node(Some(metadata), read.info.etag));
        }
        for (name, is_array) in [(".zarray", true), (".zgroup", false)] {
            let key = join(path, name);
            let Some(read) = self.store.get(&key, ByteRange::All, None).await? else {
                continue;
            };
            let attrs = self.store.get(&join(path, ".zattrs"), ByteRange::All, None).await?;
            let attrs_data = attrs.as_ref().map(|a| &a.data[..]);
            let metadata = if is_array {
                metadata_v2::array_node(&read.data, attrs_data, &key)?
            } else {
                metadata_v2::group_node(&read.data, attrs_data, &key)?
            };
            // Either document changing changes the node's version.
            let attrs_etag = attrs.and_then(|a| a.info.etag).unwrap_or_default();
            let etag = read.info.etag.map(|e| format!("{e}+{attrs_etag}"));
            return Ok(node(Some(metadata), etag));
        }
        if self.has_descendant_node(path).await? {
            return Ok(node(None, None));
        }
        Err(Error::NotFound(format!("no node '/{path}' in dataset '{}'", self.name)))
    }

    /// Whether any `zarr.json` lies below `path` (an implicit group). A
    /// store that answered the metadata reads but cannot list (a plain HTTP
    /// server) has no implicit groups.
    async fn has_descendant_node(&self, path: &str) -> Result<bool> {
        let Ok((dirs, _)) = self.store.list_dir(path).await else {
            return Ok(false);
        };
        // Breadth-first over directories, bounded so a huge chunk tree cannot stall a request.
        let mut queue: std::collections::VecDeque<String> = dirs.into_iter().map(|d| join(path, &d)).collect();
        let mut visited = 0;
        while let Some(dir) = queue.pop_front() {
            visited += 1;
            if visited > 1000 {
                return Ok(false);
            }
            let (dirs, files) = self.store.list_dir(&dir).await?;
            if files.iter().any(|f| f == "zarr.json") {
                return Ok(true);
            }
            queue.extend(dirs.into_iter().map(|d| join(&dir, &d)));
        }
        Ok(false)
    }

    /// The children of the group at `path`, sorted by name. The store's
    /// listing says which names to look at; where it cannot list (a plain
    /// HTTP server) or lists nothing, the root's consolidated metadata
    /// (v2 `.zmetadata`, v3 `consolidated_metadata`) does. Either way each
    /// child is what its own metadata says, so stale consolidated
    /// metadata cannot add or change a node.
    pub async fn children(&self, path: &str) -> Result<Vec<Child>> {
        let dirs = match self.store.list_dir(path).await {
            Ok((dirs, _)) if !dirs.is_empty() => dirs,
            listed => match self.consolidated_children(path).await {
                Some(names) => names,
                None => listed?.0,
            },
        };
        let lookups = dirs
            .into_iter()
            .filter(|d| validate_key(d).is_ok())
            .map(|name| async move {
                let child_path = join(path, &name);
                match self.node(&child_path).await {
                    Ok(node) => Ok(Some(Child {
                        name,
                        path: child_path,
                        node_type: node.node_type(),
                    })),
                    // Not a Zarr v3 node (no metadata below it, or unparseable): not a child.
                    Err(Error::NotFound(_) | Error::Corrupt { .. } | Error::Unsupported(_)) => Ok(None),
                    Err(e) => Err(e),
                }
            });
        let results: Vec<Result<Option<Child>>> = futures::stream::iter(lookups).buffered(16).collect().await;
        let mut children: Vec<Child> = results
            .into_iter()
            .filter_map(Result::transpose)
            .collect::<Result<_>>()?;
        children.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        Ok(children)
    }

    /// The names directly under `path` that the root's consolidated
    /// metadata mentions, if it has any (`None` when it has none or cannot
    /// be read: the caller's listing stands).
    async fn consolidated_children(&self, path: &str) -> Option<Vec<String>> {
        let keys = self.consolidated_keys().await?;
        Some(under(&keys, path).0)
    }

    /// The metadata keys the root's consolidated metadata names (v2
    /// `.zmetadata` with itself; v3 `consolidated_metadata` as `zarr.json`
    /// keys).
    async fn consolidated_keys(&self) -> Option<Vec<String>> {
        let root = self.node("").await.ok()?;
        if let Some(meta) = root.metadata.as_ref().filter(|m| m.zarr_format() == 3) {
            let nodes = meta.raw().pointer("/consolidated_metadata/metadata")?.as_object()?;
            let mut keys: Vec<String> = nodes.keys().map(|k| join(k, "zarr.json")).collect();
            keys.push("zarr.json".into());
            return Some(keys);
        }
        let read = self.store.get(".zmetadata", ByteRange::All, None).await.ok()??;
        let doc: serde_json::Value = serde_json::from_slice(&read.data).ok()?;
        let mut keys: Vec<String> = doc.get("metadata")?.as_object()?.keys().cloned().collect();
        keys.push(".zmetadata".into());
        Some(keys)
    }

    /// The sub-prefixes and keys of the store directly under `prefix`;
    /// where the store cannot list (a plain HTTP server), those the root's
    /// consolidated metadata names.
    pub async fn list_keys(&self, prefix: &str) -> Result<(Vec<String>, Vec<String>)> {
        match self.store.list_dir(prefix).await {
            Ok(listing) => Ok(listing),
            Err(e) => match self.consolidated_keys().await {
                Some(keys) => Ok(under(&keys, prefix)),
                None => Err(e.into()),
            },
        }
    }
}

/// The sub-prefixes and keys directly under `prefix` among `keys`, sorted.
fn under(keys: &[String], prefix: &str) -> (Vec<String>, Vec<String>) {
    let start = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    let (mut prefixes, mut names) = (Vec::new(), Vec::new());
    for rest in keys.iter().filter_map(|k| k.strip_prefix(&start)) {
        match rest.split_once('/') {
            Some((dir, _)) if !dir.is_empty() => prefixes.push(dir.to_string()),
            Some(_) => {}
            None => names.push(rest.to_string()),
        }
    }
    for list in [&mut prefixes, &mut names] {
        list.sort();
        list.dedup();
    }
    (prefixes, names)
}
