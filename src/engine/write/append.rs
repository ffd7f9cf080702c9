//! Appends (api.md 4.2): the array grows along one dimension by a
//! conditional put of its metadata (so concurrent appenders each get
//! their own range), then the body is written into the new range.

use std::sync::Arc;

use serde_json::Value;

use super::consolidated::Change;
use super::{RegionBody, RegionWrite, WriteOptions, WriteOutcome};
use crate::engine::error::{Error, Result};
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::Selection;
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{join, ByteRange, Expect, StoreError};

/// What an append did.
#[derive(Debug, Clone)]
pub struct Appended {
    /// Where along the dimension the body went.
    pub offset: u64,
    /// The array's shape once grown (later appends may grow it further).
    pub shape: Vec<u64>,
    /// The write of the body.
    pub outcome: WriteOutcome,
}

impl Dataset {
    /// Grow the array at `path` by `count` positions along `dim` and write
    /// `body` (the new positions' elements) there.
    pub async fn append(
        &self,
        path: &str,
        dim: usize,
        count: u64,
        body: Arc<dyn RegionBody>,
        options: &WriteOptions,
    ) -> Result<Appended> {
        let path = Dataset::node_path(path)?;
        let node = self.node(&path).await?;
        let meta = node.array()?;
        if dim >= meta.shape.len() {
            return Err(Error::InvalidRequest(format!(
                "append: the array has {} dimensions, no dimension {dim}",
                meta.shape.len()
            )));
        }
        if !meta.chunk_grid.is_regular() {
            return Err(Error::Unsupported(
                "appending to an array with a rectilinear chunk grid".into(),
            ));
        }
        // What cannot be written is refused before the array grows.
        meta.codecs.check_writable()?;
        if meta.codecs.checks_values() {
            let mut shape = meta.shape.clone();
            shape[dim] = count;
            let row_bytes = shape[1..].iter().product::<u64>() as usize * meta.data_type.size();
            super::check_values(&meta.codecs, shape[0], row_bytes, &body, options).await?;
        }
        let zarr_format = node.metadata.as_ref().map_or(3, |m| m.zarr_format());
        let key = join(&path, if zarr_format == 2 { ".zarray" } else { "zarr.json" });
        let (offset, shape) = self.grow(&key, dim, count, options.retries).await?;
        self.reconsolidate(Change::Nodes(std::slice::from_ref(&path)), options.retries)
            .await?;
        self.forget_nodes().await;
        // Read again from the store, never from the cache: a request that
        // read the metadata before it grew may have cached it since.
        let node = self.fresh_node(&path).await?;
        let ranges: Vec<(u64, u64, u64)> = node
            .array()?
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| match d == dim {
                true => (offset, offset + count, 1),
                false => (0, n, 1),
            })
            .collect();
        let plan = ReadPlan::new(node, &Selection::of_strided(&ranges), &self.resources.read)?;
        let write = RegionWrite::of(&plan)?;
        let outcome = self.write_region(&write, body, options).await?;
        Ok(Appended { offset, shape, outcome })
    }

    /// Add `count` to the metadata's `shape[dim]` by a put conditional on
    /// the version read, read again when another writer changed it; the
    /// old length and the new shape.
    async fn grow(&self, key: &str, dim: usize, count: u64, retries: usize) -> Result<(u64, Vec<u64>)> {
        for _ in 0..=retries {
            let read = self
                .store
                .get(key, ByteRange::All, None)
                .await?
                .ok_or_else(|| Error::NotFound(format!("'{key}' is gone")))?;
            let mut doc: Value = serde_json::from_slice(&read.data).map_err(|e| Error::corrupt(key, e.to_string()))?;
            let shape = doc
                .get_mut("shape")
                .and_then(Value::as_array_mut)
                .ok_or_else(|| Error::corrupt(key, "no shape"))?;
            let offset = shape
                .get(dim)
                .and_then(Value::as_u64)
                .ok_or_else(|| Error::corrupt(key, "shape is not a list of integers"))?;
            shape[dim] = Value::from(offset + count);
            let grown: Vec<u64> = shape.iter().filter_map(Value::as_u64).collect();
            let mut bytes = serde_json::to_vec_pretty(&doc).map_err(|e| Error::Internal(e.to_string()))?;
            bytes.extend_from_slice(b"\n");
            let expect = Expect::of(Some(read.info.etag.as_deref()));
            match self.store.put(key, bytes, expect).await {
                Ok(_) => return Ok((offset, grown)),
                Err(StoreError::Changed(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Conflict(format!(
            "'{key}' kept changing under this append ({retries} retries); nothing was appended"
        )))
    }
}
