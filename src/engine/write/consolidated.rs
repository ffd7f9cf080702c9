//! Keeping consolidated metadata true after node changes (api.md 4.2).
//!
//! A store may carry every node's metadata in one place at its root: Zarr
//! v2 `.zmetadata` (`{"metadata": {"a/.zarray": {...}, "a/.zattrs": {...}},
//! "zarr_consolidated_format": 1}`), Zarr v3 `consolidated_metadata` in the
//! root `zarr.json` (`{"kind": "inline", "must_understand": false,
//! "metadata": {"a": {...}}}`). Readers that trust it (xarray opens with
//! it by default) would see the old shape or hierarchy after an append, a
//! resize, a new node or a deletion; so each of those brings the entries
//! of the nodes it changed up to date from their own documents, with the
//! same conditional put as every metadata change. A store without
//! consolidated metadata gets none.

use serde_json::{json, Map, Value};

use crate::engine::error::{Error, Result};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{join, ByteRange};

/// The v2 documents a node may have.
const V2_DOCUMENTS: [&str; 3] = [".zarray", ".zgroup", ".zattrs"];

/// What changed: nodes whose documents are read again, or a subtree gone.
pub(super) enum Change<'a> {
    /// These nodes' documents (missing ones drop their entries).
    Nodes(&'a [String]),
    /// The node at this path and everything under it were deleted.
    Removed(&'a str),
}

impl Dataset {
    /// Update the root's consolidated metadata, if it has any, for `change`.
    pub(super) async fn reconsolidate(&self, change: Change<'_>, retries: usize) -> Result<()> {
        // Which form, from the root's metadata as this process has it (no
        // request for a v3 root; a v2 store is asked for `.zmetadata`).
        let root = self.node("").await.ok().and_then(|n| n.metadata.clone());
        let v3 = root.as_ref().is_some_and(|m| m.zarr_format() == 3);
        let v3_consolidated = root
            .as_ref()
            .is_some_and(|m| v3 && m.raw().get("consolidated_metadata").is_some_and(Value::is_object));
        if !v3 && self.store.head(".zmetadata").await?.is_some() {
            let entries = self.v2_entries(&change).await?;
            // Keys are documents (`a/b/.zarray`): their node is the part before the name.
            let node_of = |key: &str| key.rsplit_once('/').map_or("", |(p, _)| p).to_string();
            self.update_document(".zmetadata", retries, |doc| {
                apply(entries_of(doc, "metadata")?, &change, &entries, node_of)
            })
            .await?;
        }
        if v3_consolidated {
            let entries = self.v3_entries(&change).await?;
            self.update_document("zarr.json", retries, |doc| {
                let holder = doc
                    .get_mut("consolidated_metadata")
                    .filter(|c| c.is_object())
                    .ok_or_else(|| Error::Conflict("the root's consolidated_metadata went away".into()))?;
                apply(entries_of(holder, "metadata")?, &change, &entries, str::to_string)
            })
            .await?;
        }
        Ok(())
    }

    /// `.zmetadata` entries (`path/.zarray` ...) of the changed nodes.
    async fn v2_entries(&self, change: &Change<'_>) -> Result<Vec<(String, Option<Value>)>> {
        let Change::Nodes(paths) = change else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for path in *paths {
            for name in V2_DOCUMENTS {
                let key = join(path, name);
                out.push((key.clone(), self.document(&key).await?));
            }
        }
        Ok(out)
    }

    /// `consolidated_metadata` entries (node paths) of the changed nodes;
    /// the root is not an entry of itself.
    async fn v3_entries(&self, change: &Change<'_>) -> Result<Vec<(String, Option<Value>)>> {
        let Change::Nodes(paths) = change else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for path in paths.iter().filter(|p| !p.is_empty()) {
            let mut doc = self.document(&join(path, "zarr.json")).await?;
            if let Some(Value::Object(o)) = &mut doc {
                o.remove("consolidated_metadata");
            }
            out.push((path.clone(), doc));
        }
        Ok(out)
    }

    /// The JSON document at `key`, if there is one.
    async fn document(&self, key: &str) -> Result<Option<Value>> {
        match self.store.get(key, ByteRange::All, None).await? {
            None => Ok(None),
            Some(read) => serde_json::from_slice(&read.data)
                .map(Some)
                .map_err(|e| Error::corrupt(key, e.to_string())),
        }
    }
}

/// Drop the entries of a removed subtree (`node_of` gives an entry's node
/// path), then set or drop `entries`.
fn apply(
    metadata: &mut Map<String, Value>,
    change: &Change<'_>,
    entries: &[(String, Option<Value>)],
    node_of: impl Fn(&str) -> String,
) -> Result<()> {
    if let Change::Removed(path) = change {
        metadata.retain(|key, _| !in_subtree(&node_of(key), path));
    }
    for (key, value) in entries {
        match value {
            Some(v) => metadata.insert(key.clone(), v.clone()),
            None => metadata.remove(key),
        };
    }
    Ok(())
}

/// The object `doc[field]`, made one if missing.
fn entries_of<'d>(doc: &'d mut Value, field: &str) -> Result<&'d mut Map<String, Value>> {
    let obj = doc
        .as_object_mut()
        .ok_or_else(|| Error::Conflict("consolidated metadata that is not a JSON object".into()))?;
    obj.entry(field)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| Error::Conflict(format!("consolidated metadata whose {field} is not an object")))
}

/// Whether node path `key` is `path` or under it.
fn in_subtree(key: &str, path: &str) -> bool {
    key == path || key.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtrees_are_whole_path_segments() {
        assert!(in_subtree("a", "a"));
        assert!(in_subtree("a/b", "a"));
        assert!(!in_subtree("ab", "a"));
        assert!(!in_subtree("b/a", "a"));
    }
}
