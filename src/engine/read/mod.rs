//! Region reads: fetching only the bytes a [`ReadPlan`] needs, decoding
//! them on the decoding threads and copying each chunk's part into the
//! output once.
//!
//! - [`fetch`]: where a chunk's bytes come from (a whole unsharded chunk,
//!   the fill value, or the decoded-chunk cache) and the versions pinned;
//! - [`shard`]: the sharding codec's partial decoder: the shard index
//!   (one ranged read, validated, cached with the shard's ETag) and the
//!   needed inner chunks' byte ranges;
//! - [`slab`]: slab assembly: decode batches and copy into the output;
//! - [`stream`]: a multi-slab read as a stream of slabs, within the slab
//!   budget;
//! - [`sink`]: a read whose decoded blocks go to a consumer (a reduction)
//!   instead of slabs.
//! - `cache`, `decode_pool` and `resources`: every limit, pool and cache
//!   of the process, built once from config;
//! - `hierarchy`: datasets, opening nodes, listing children;
//! - `coordinate`: the coordinates of a node's dimensions, read once, and
//!   labels resolved to positions.

mod fetch;
mod shard;
mod sink;
mod slab;
mod stream;

pub(crate) mod cache;
pub(crate) mod cell_parts;
pub(crate) mod coordinate;
pub(crate) mod decode_pool;
pub(crate) mod geo;
pub(crate) mod hierarchy;
pub(crate) mod resources;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

pub use fetch::Versions;
pub(crate) use sink::BlockSink;

use crate::engine::error::{Error, Result};
use crate::engine::format::values::is_real;
use crate::engine::query::cf::MaskAndScale;
use crate::engine::query::labels::LabelQuery;
use crate::engine::query::node::Node;
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::Selection;
use crate::engine::read::hierarchy::Dataset;
use crate::storage::join;

/// What a region read asks: positions, labels, and CF decoding.
#[derive(Debug, Clone, Default)]
pub struct ReadQuery {
    /// Positions (`select`, or points).
    pub selection: Selection,
    /// Labels (`sel`, points by label) and their matching method.
    pub labels: LabelQuery,
    /// `decode=cf`.
    pub decode_cf: bool,
}

impl Dataset {
    /// Open the array at `path` and plan `query`: labels resolved to
    /// positions first, so the plan only knows positions.
    pub async fn plan_query(&self, path: &str, query: &ReadQuery) -> Result<ReadPlan> {
        let node = self.node(path).await?;
        let selection = self
            .resolve_labels(&node, query.selection.clone(), &query.labels)
            .await?;
        let plan = ReadPlan::new(node.clone(), &selection, &self.resources.read)?;
        let meta = plan.meta();
        if !query.decode_cf || !is_real(meta.data_type) {
            return Ok(plan);
        }
        let source = node.metadata.as_ref().expect("an array has metadata");
        let v2_fill = source
            .raw()
            .get("fill_value")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        let cf = MaskAndScale::new(meta, source.attributes(), source.zarr_format(), &v2_fill)?;
        Ok(plan.with_cf(cf))
    }

    /// Open the array at `path` and plan a read of `selection`.
    pub async fn plan_read(&self, path: &str, selection: &Selection) -> Result<ReadPlan> {
        let node = self.node(path).await?;
        ReadPlan::new(node, selection, &self.resources.read)
    }

    /// Plan a read of `selection` on `node`, a node opened earlier (so the
    /// read matches what was said of the node).
    pub fn plan_node(&self, node: std::sync::Arc<Node>, selection: &Selection) -> Result<ReadPlan> {
        ReadPlan::new(node, selection, &self.resources.read)
    }

    /// Read the whole region into memory.
    pub async fn read_all(&self, plan: &ReadPlan) -> Result<(Bytes, Versions)> {
        self.read_pinned(plan, None).await
    }

    /// Read the whole region into memory; with `pinned` (from
    /// [`Dataset::read_versions`]), every key must still have that version
    /// (else [`crate::storage::StoreError::Changed`]).
    pub async fn read_pinned(&self, plan: &ReadPlan, pinned: Option<&Versions>) -> Result<(Bytes, Versions)> {
        if plan.slab_count() == 1 {
            return self.read_slab(plan, 0, pinned, self.resources.ticket(), None).await;
        }
        let mut out = Vec::with_capacity(plan.output_bytes() as usize);
        let mut versions = Versions::new();
        for slab in 0..plan.slab_count() {
            let (data, v) = self
                .read_slab(plan, slab, pinned, self.resources.ticket(), None)
                .await?;
            out.extend_from_slice(&data);
            versions.extend(v);
        }
        Ok((Bytes::from(out), versions))
    }

    /// The versions of every key the read will use, without reading chunk
    /// data (shard indexes are read; unsharded chunks get a HEAD).
    pub async fn read_versions(&self, plan: &ReadPlan) -> Result<Versions> {
        self.read_versions_of(&[plan]).await
    }

    /// [`Dataset::read_versions`] of several reads, each key asked once.
    pub async fn read_versions_of(&self, plans: &[&ReadPlan]) -> Result<Versions> {
        let mut keys = Vec::new();
        for (i, plan) in plans.iter().enumerate() {
            for slab in 0..plan.slab_count() {
                for unit in plan.units(slab) {
                    keys.push((self.chunk_key(plan, &unit.coords), unit.coords, i));
                }
            }
        }
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys.dedup_by(|a, b| a.0 == b.0);
        let versions = futures::stream::iter(keys)
            .map(|(key, coords, i)| async move {
                let version = match plans[i].meta().codecs_at(&coords).partial_sharding() {
                    Some(codec) => self.shard_version(&key, codec).await?,
                    None => self.store.head(&key).await?.and_then(|i| i.etag),
                };
                Ok::<_, Error>((key, version))
            })
            .buffer_unordered(self.resources.read.concurrency)
            .try_collect()
            .await?;
        Ok(versions)
    }

    /// The store key of the chunk (or shard) at grid `coords`.
    fn chunk_key(&self, plan: &ReadPlan, coords: &[u64]) -> String {
        join(&plan.node.path, &plan.meta().chunk_key_encoding.encode(coords))
    }
}
