//! The engine's caches, shared by all datasets (keys carry the dataset name).
//!
//! - node metadata: parsed `zarr.json` with its codec chain, for a TTL, so
//!   changed metadata is seen after at most that long;
//! - shard indexes: sized in bytes, remembering the shard's ETag; reads that
//!   use a cached index are conditional on that ETag;
//! - decoded inner chunks of small reads (tiles), keyed by the shard's
//!   ETag. A read that fetches nothing (its chunks cached or empty) first
//!   asks the store for the shard's current ETag (a HEAD; a stat on local
//!   disks), so a rewritten shard's chunks are never served; a read that
//!   fetches any range is conditional on that ETag anyway.
//!
//! Both shard caches trust the store's ETag to change when an object does
//! (for local files: inode, modification time in microseconds and size, as
//! object_store reports them); they have no TTL.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;

use crate::engine::format::codec::array_to_bytes::sharding::ShardIndex;
use crate::engine::query::node::Node;

/// Cache sizes and lifetimes.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// How long parsed metadata is trusted.
    pub metadata_ttl: Duration,
    /// Bytes of shard indexes kept.
    pub shard_index_bytes: u64,
    /// Bytes of decoded inner chunks kept (0 disables the cache).
    pub decoded_chunk_bytes: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            metadata_ttl: Duration::from_secs(5),
            shard_index_bytes: 64 << 20,
            decoded_chunk_bytes: 128 << 20,
        }
    }
}

/// A decoded shard index with the version of the shard it came from.
#[derive(Debug)]
pub(crate) struct CachedIndex {
    /// The index.
    pub(crate) index: ShardIndex,
    /// The shard's ETag when the index was read.
    pub(crate) etag: Option<String>,
}

/// (dataset, key)
pub(crate) type CacheKey = (Arc<str>, String);

/// (dataset, shard key, inner chunk index, shard ETag)
pub(crate) type ChunkKey = (Arc<str>, String, usize, String);

/// Hit and miss counters of one cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub(crate) hits: std::sync::atomic::AtomicU64,
    /// Lookups that went to the store.
    pub(crate) misses: std::sync::atomic::AtomicU64,
}

/// The caches.
#[derive(Debug, Clone)]
pub struct Caches {
    pub(crate) nodes: Cache<CacheKey, Arc<Node>>,
    pub(crate) shard_indexes: Cache<CacheKey, Arc<CachedIndex>>,
    pub(crate) decoded_chunks: Cache<ChunkKey, bytes::Bytes>,
    /// Each geo variable's default colour range (by dataset, variable and
    /// selection), kept as long as metadata.
    pub(crate) colour_ranges: Cache<String, Option<(f64, f64)>>,
    pub(crate) node_stats: Arc<CacheStats>,
    pub(crate) index_stats: Arc<CacheStats>,
    pub(crate) chunk_stats: Arc<CacheStats>,
}

impl Caches {
    /// Empty caches of the given sizes.
    pub fn new(options: &CacheOptions) -> Self {
        Self {
            nodes: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(options.metadata_ttl)
                .build(),
            shard_indexes: Cache::builder()
                .max_capacity(options.shard_index_bytes)
                .weigher(|k: &CacheKey, v: &Arc<CachedIndex>| {
                    (k.1.len() + v.index.size_bytes() + 64).try_into().unwrap_or(u32::MAX)
                })
                .build(),
            decoded_chunks: Cache::builder()
                .max_capacity(options.decoded_chunk_bytes)
                .weigher(|k: &ChunkKey, v: &bytes::Bytes| {
                    (k.1.len() + k.3.len() + v.len() + 64).try_into().unwrap_or(u32::MAX)
                })
                .build(),
            colour_ranges: Cache::builder()
                .max_capacity(10_000)
                .time_to_live(options.metadata_ttl)
                .build(),
            node_stats: Arc::default(),
            index_stats: Arc::default(),
            chunk_stats: Arc::default(),
        }
    }

    /// Applies the caches' pending inserts and evictions, so that the counts
    /// [`Caches::report`] gives next are exact, not up to a housekeeping
    /// round behind (moka updates them lazily).
    pub async fn settle(&self) {
        self.nodes.run_pending_tasks().await;
        self.shard_indexes.run_pending_tasks().await;
        self.decoded_chunks.run_pending_tasks().await;
    }

    /// (name, entries, weighted size, stats) of each cache, for `/metrics`.
    pub(crate) fn report(&self) -> Vec<(&'static str, u64, u64, &CacheStats)> {
        vec![
            (
                "metadata",
                self.nodes.entry_count(),
                self.nodes.weighted_size(),
                &self.node_stats,
            ),
            (
                "shard_index",
                self.shard_indexes.entry_count(),
                self.shard_indexes.weighted_size(),
                &self.index_stats,
            ),
            (
                "decoded_chunk",
                self.decoded_chunks.entry_count(),
                self.decoded_chunks.weighted_size(),
                &self.chunk_stats,
            ),
        ]
    }
}
