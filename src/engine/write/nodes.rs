//! Node writes (api.md 4.2): create an array or group from its metadata
//! document (missing parents become groups), change its attributes and
//! shape (a merge patch, RFC 7396), delete it with everything under it.
//! Every metadata put is conditional on the version read (create-only for
//! a new node), so concurrent changes are never lost.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::consolidated::Change;
use super::{RegionBody, RegionWrite, Repeated, WriteOptions};
use crate::engine::error::{Error, Result};
use crate::engine::format::metadata::NodeMetadata;
use crate::engine::format::metadata_v2;
use crate::engine::query::node::Node;
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::Selection;
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{join, ByteRange, Expect, StoreError};

/// The metadata documents a node may have, v3 first.
const DOCUMENTS: [&str; 3] = ["zarr.json", ".zarray", ".zgroup"];

/// The parent of a node path (`""` for the root's children).
fn parent(path: &str) -> Option<&str> {
    match path {
        "" => None,
        p => Some(p.rsplit_once('/').map_or("", |(parent, _)| parent)),
    }
}

/// A metadata document as stored: pretty JSON with a final newline.
fn document_bytes(doc: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec_pretty(doc).expect("a JSON value serializes");
    bytes.extend_from_slice(b"\n");
    Bytes::from(bytes)
}

/// What a metadata document that cannot be read back is: 400, or 501 for
/// what is valid Zarr this service does not read.
fn unreadable(e: Error) -> Error {
    match e {
        Error::Corrupt { reason, .. } => Error::InvalidRequest(format!(
            "metadata the service could not read back: {reason}; nothing was written"
        )),
        other => other,
    }
}

impl Dataset {
    /// Drop this process's cached nodes of the dataset (and what hangs on
    /// them), so the next read sees the store as it is.
    pub async fn forget_nodes(&self) {
        let caches = &self.resources.caches;
        let scope = self.scope.clone();
        let stale: Vec<_> = caches
            .nodes
            .iter()
            .filter(|(k, _)| k.0 == scope)
            .map(|(k, _)| k)
            .collect();
        for key in stale {
            caches.nodes.invalidate(&*key).await;
        }
        caches.colour_ranges.invalidate_all();
    }

    /// The node at `path` as the store has it now (read from the store,
    /// never from the cache, which a concurrent read may fill with what it
    /// read earlier).
    pub async fn fresh_node(&self, path: &str) -> Result<Arc<Node>> {
        self.forget_nodes().await;
        let path = Dataset::node_path(path)?;
        Ok(Arc::new(self.load_node(&path).await?))
    }

    /// Create the node at `path` from `document` (a Zarr v3 `zarr.json`, or
    /// a v2 `.zarray` or `.zgroup`): 409 when a node is there; missing
    /// parents are created as groups of the same format.
    pub async fn create_node(&self, path: &str, document: &[u8]) -> Result<Arc<Node>> {
        let path = Dataset::node_path(path)?;
        let doc: Value = serde_json::from_slice(document)
            .map_err(|e| Error::InvalidRequest(format!("the node document is not valid JSON: {e}")))?;
        let obj = doc
            .as_object()
            .ok_or_else(|| Error::InvalidRequest("the node document is not a JSON object".into()))?;
        let name = match obj.get("zarr_format").and_then(Value::as_u64) {
            Some(3) => "zarr.json",
            Some(2) if obj.contains_key("dtype") || obj.contains_key("shape") => ".zarray",
            Some(2) => ".zgroup",
            _ => {
                return Err(Error::InvalidRequest(
                    "the node document has no zarr_format 3 (zarr.json) or 2 (.zarray, .zgroup)".into(),
                ))
            }
        };
        let key = join(&path, name);
        let bytes = document_bytes(&doc);
        check_readable(&bytes, &key, name)?;
        if self.has_node_document(&path).await? {
            return Err(Error::Conflict(format!(
                "a node exists at '/{path}'; nothing was written"
            )));
        }
        let v2 = name != "zarr.json";
        self.create_parents(&path, v2).await?;
        match self.store.put(&key, bytes, Expect::Absent).await {
            Err(StoreError::Changed(_)) => {
                return Err(Error::Conflict(format!("a node was created at '/{path}' meanwhile")))
            }
            other => other?,
        };
        let mut changed: Vec<String> = vec![path.clone()];
        let mut at = parent(&path);
        while let Some(p) = at {
            changed.push(p.to_string());
            at = parent(p);
        }
        self.reconsolidate(Change::Nodes(&changed), WriteOptions::default().retries)
            .await?;
        self.forget_nodes().await;
        self.node(&path).await
    }

    /// Whether `path` has a metadata document of either format.
    async fn has_node_document(&self, path: &str) -> Result<bool> {
        for name in DOCUMENTS {
            if self.store.head(&join(path, name)).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Create every missing ancestor of `path` as a group; 409 when one
    /// is an array.
    async fn create_parents(&self, path: &str, v2: bool) -> Result<()> {
        let mut ancestors = Vec::new();
        let mut at = parent(path);
        while let Some(p) = at {
            ancestors.push(p.to_string());
            at = parent(p);
        }
        for ancestor in ancestors.iter().rev() {
            for name in [".zarray", "zarr.json"] {
                if let Some(read) = self.store.get(&join(ancestor, name), ByteRange::All, None).await? {
                    // The node's own type (a root's consolidated metadata names arrays too).
                    let is_array = name == ".zarray"
                        || serde_json::from_slice::<Value>(&read.data)
                            .is_ok_and(|doc| doc.get("node_type").and_then(Value::as_str) == Some("array"));
                    if is_array {
                        return Err(Error::Conflict(format!(
                            "'/{ancestor}' is an array: no node can be created under it"
                        )));
                    }
                }
            }
            if self.has_node_document(ancestor).await? {
                continue;
            }
            let (name, doc) = match v2 {
                true => (".zgroup", json!({"zarr_format": 2})),
                false => (
                    "zarr.json",
                    json!({"zarr_format": 3, "node_type": "group", "attributes": {}}),
                ),
            };
            match self
                .store
                .put(&join(ancestor, name), document_bytes(&doc), Expect::Absent)
                .await
            {
                Ok(_) | Err(StoreError::Changed(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Apply a merge patch (RFC 7396) of `attributes` and `shape` to the
    /// node at `path`. Shrinking writes the fill value over what falls
    /// outside first (so it reads as fill if the array grows again), then
    /// puts the metadata; every put is conditional on the version read.
    pub async fn patch_node(&self, path: &str, patch: &Value, options: &WriteOptions) -> Result<Arc<Node>> {
        let path = Dataset::node_path(path)?;
        let fields = patch
            .as_object()
            .ok_or_else(|| Error::InvalidRequest("a merge patch of a node is a JSON object".into()))?;
        if let Some(other) = fields.keys().find(|k| !["attributes", "shape"].contains(&k.as_str())) {
            return Err(Error::InvalidRequest(format!(
                "a node patch changes 'attributes' and 'shape' only, not '{other}'"
            )));
        }
        let node = self.fresh_node(&path).await?;
        let Some(meta) = &node.metadata else {
            return Err(Error::InvalidRequest(format!(
                "'/{path}' is an implicit group: it has no metadata to patch (create it first)"
            )));
        };
        let v2 = meta.zarr_format() == 2;
        if let Some(shape) = fields.get("shape") {
            self.resize(&node, shape, v2, options).await?;
        }
        if let Some(attributes) = fields.get("attributes") {
            let key = join(&path, if v2 { ".zattrs" } else { "zarr.json" });
            self.update_document(&key, options.retries, |doc| {
                let target = match v2 {
                    true => doc,
                    false => doc
                        .as_object_mut()
                        .ok_or_else(|| Error::corrupt(&key, "not a JSON object"))?
                        .entry("attributes")
                        .or_insert_with(|| json!({})),
                };
                merge_patch(target, attributes);
                if !target.is_object() {
                    return Err(Error::InvalidRequest("attributes must stay a JSON object".into()));
                }
                Ok(())
            })
            .await?;
        }
        self.reconsolidate(Change::Nodes(std::slice::from_ref(&path)), options.retries)
            .await?;
        self.fresh_node(&path).await
    }

    /// Give the array `node` the shape `shape`.
    async fn resize(&self, node: &Arc<Node>, shape: &Value, v2: bool, options: &WriteOptions) -> Result<()> {
        let meta = node
            .array()
            .map_err(|_| Error::InvalidRequest("a group has no shape".into()))?;
        let new: Vec<u64> = shape
            .as_array()
            .and_then(|items| items.iter().map(Value::as_u64).collect())
            .filter(|s: &Vec<u64>| s.len() == meta.shape.len())
            .ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "shape {shape} is not a list of {} non-negative integers",
                    meta.shape.len()
                ))
            })?;
        if !meta.chunk_grid.is_regular() && new != meta.shape {
            return Err(Error::Unsupported(
                "resizing an array with a rectilinear chunk grid".into(),
            ));
        }
        // What falls outside becomes the fill value first, dimension by
        // dimension (only the part not already cleared).
        let mut kept = meta.shape.clone();
        for d in 0..kept.len() {
            if new[d] >= kept[d] {
                continue;
            }
            let ranges: Vec<(u64, u64, u64)> = kept
                .iter()
                .enumerate()
                .map(|(e, &n)| if e == d { (new[d], n, 1) } else { (0, n, 1) })
                .collect();
            let plan = ReadPlan::new(node.clone(), &Selection::of_strided(&ranges), &self.resources.read)?;
            let write = RegionWrite::of(&plan)?;
            let fill: Arc<dyn RegionBody> = Arc::new(Repeated::new(meta.fill_value.clone(), write.row_bytes()));
            self.write_region(&write, fill, options).await?;
            kept[d] = new[d];
        }
        let key = join(&node.path, if v2 { ".zarray" } else { "zarr.json" });
        self.update_document(&key, options.retries, |doc| {
            doc["shape"] = json!(new);
            Ok(())
        })
        .await
    }

    /// Read `key` (a JSON document; `{}` when missing), change it with
    /// `change`, and put it back conditional on the version read, again
    /// from the read when another writer changed it.
    pub(super) async fn update_document(
        &self,
        key: &str,
        retries: usize,
        change: impl Fn(&mut Value) -> Result<()>,
    ) -> Result<()> {
        for _ in 0..=retries {
            let read = self.store.get(key, ByteRange::All, None).await?;
            let (mut doc, expect) = match &read {
                Some(r) => (
                    serde_json::from_slice(&r.data).map_err(|e| Error::corrupt(key, e.to_string()))?,
                    Expect::of(Some(r.info.etag.as_deref())),
                ),
                None => (Value::Object(Map::new()), Expect::Absent),
            };
            change(&mut doc)?;
            let bytes = document_bytes(&doc);
            let name = key.rsplit('/').next().unwrap_or(key);
            if DOCUMENTS.contains(&name) {
                check_readable(&bytes, key, name)?;
            }
            match self.store.put(key, bytes, expect).await {
                Ok(_) => return Ok(()),
                Err(StoreError::Changed(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Conflict(format!("'{key}' kept changing ({retries} retries)")))
    }

    /// Delete the node at `path` and every key under it (its metadata
    /// first, so it is gone before its chunks are). The root: 400.
    pub async fn delete_node(&self, path: &str) -> Result<u64> {
        let path = Dataset::node_path(path)?;
        if path.is_empty() {
            return Err(Error::InvalidRequest("the root node cannot be deleted".into()));
        }
        self.fresh_node(&path).await?;
        let mut keys = Vec::new();
        let mut dirs = vec![path.clone()];
        while let Some(dir) = dirs.pop() {
            let (subdirs, files) = self.store.list_dir(&dir).await?;
            keys.extend(files.iter().map(|f| join(&dir, f)));
            dirs.extend(subdirs.iter().map(|d| join(&dir, d)));
        }
        // Metadata first (the node's own, then the rest), then the chunks.
        keys.sort_by_key(|k| {
            let name = k.rsplit('/').next().unwrap_or("");
            (
                k != &join(&path, name) || !DOCUMENTS.contains(&name),
                !DOCUMENTS.contains(&name),
            )
        });
        for key in &keys {
            self.store.delete(key, Expect::Anything).await?;
        }
        self.reconsolidate(Change::Removed(&path), WriteOptions::default().retries)
            .await?;
        self.forget_nodes().await;
        Ok(keys.len() as u64)
    }
}

/// Check that a metadata document reads back: 400 or 501 otherwise.
fn check_readable(bytes: &[u8], key: &str, name: &str) -> Result<()> {
    let meta = match name {
        "zarr.json" => NodeMetadata::parse(bytes, key),
        ".zarray" => metadata_v2::array_node(bytes, None, key),
        _ => metadata_v2::group_node(bytes, None, key),
    }
    .map_err(unreadable)?;
    if let NodeMetadata::Array { parsed: Err(e), .. } = meta {
        return Err(unreadable(e));
    }
    Ok(())
}

/// RFC 7396: `patch` merged into `target` (null removes a member).
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let object = target.as_object_mut().expect("an object");
    for (name, value) in fields {
        if value.is_null() {
            object.remove(name);
        } else {
            merge_patch(object.entry(name).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patches_as_rfc_7396_says() {
        // RFC 7396, appendix A (a selection).
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (mut target, patch, expected) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, expected, "{patch}");
        }
        assert_eq!(parent("a/b/c"), Some("a/b"));
        assert_eq!(parent("a"), Some(""));
        assert_eq!(parent(""), None);
    }
}
