//! The engine's caches, shared by all datasets (keys carry the dataset name).
//!
//! - node metadata: parsed `zarr.json` with its codec chain, for a TTL, so
//!   changed metadata is seen after at most that long;
//! - shard indexes: sized in bytes, remembering the shard's ETag; reads that
//!   use a cached index are conditional on that ETag;
//! - decoded chunks and inner chunks, keyed by the object's ETag, of
//!   small reads (tiles) and of hot small answers (a series at a point
//!   asked for again: [`Keep`]). A read that fetches nothing (its chunks
//!   cached or empty) first asks the store for the shard's current ETag
//!   (a HEAD; a stat on local disks), so a rewritten shard's chunks are
//!   never served; a read that fetches any range is conditional on that
//!   ETag anyway.
//!
//! Both shard caches trust the store's ETag to change when an object does
//! (for local files: inode, modification time in microseconds and size, as
//! object_store reports them); they have no TTL.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;

use crate::engine::format::codec::array_to_bytes::sharding::ShardIndex;
use crate::engine::format::codec::ChunkRepr;
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

/// Reads that decode at most this many bytes of chunks keep them all in
/// the decoded-chunk cache (a tile, a few points).
pub(crate) const CACHEABLE_READ_BYTES: u64 = 4 << 20;

/// Reads answering at most this many bytes that decode more than
/// [`CACHEABLE_READ_BYTES`] (a point's series through many chunks, an EDR
/// position, GetFeatureInfo) keep only the chunks they missed before.
pub(crate) const SMALL_ANSWER_BYTES: u64 = 1 << 20;

/// Chunks (by dataset, key and inner index) whose misses by small answers
/// are counted, for [`Keep::Hot`].
const SEEN_CHUNKS: u64 = 1 << 16;

/// Which of its decoded chunks a read keeps in the decoded-chunk cache.
///
/// A scan (a wide region, a big answer) keeps none, so it never evicts
/// what small reads reuse. A small read (a tile) keeps all. A small answer
/// that decodes much (a series) offers the chunks it keeps missing
/// ([`Caches::offer`]), so a position asked for once costs the cache
/// nothing, and one asked for again stays decoded; whether it then
/// displaces what is there is moka's TinyLFU admission: by how often each
/// was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Keep nothing.
    Never,
    /// Keep every chunk.
    All,
    /// Offer the chunks missed before ([`Caches::offer`]).
    Hot,
}

impl Keep {
    /// The rule for a read that decodes `chunks` chunks like `repr` into an
    /// answer of `answer` bytes (`None`: a read in several slabs, or the
    /// cache off). Chunks of variable-length elements are never kept (their
    /// decoded size is not known up front).
    pub(crate) fn rule(answer: Option<u64>, chunks: u64, repr: &ChunkRepr) -> Keep {
        let Some(answer) = answer.filter(|_| !repr.data_type.is_variable()) else {
            return Keep::Never;
        };
        if chunks.saturating_mul(repr.size_bytes() as u64) <= CACHEABLE_READ_BYTES {
            Keep::All
        } else if answer <= SMALL_ANSWER_BYTES {
            Keep::Hot
        } else {
            Keep::Never
        }
    }
}

/// The hash [`Caches::offer`] remembers a chunk by.
fn chunk_hash(scope: &str, key: &str, inner: usize) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one((scope, key, inner))
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
    /// How often small answers missed each chunk, by hash ([`Keep::Hot`]).
    seen: moka::sync::Cache<u64, u32>,
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
            // Least recently seen out: every new chunk is remembered.
            seen: moka::sync::Cache::builder()
                .max_capacity(SEEN_CHUNKS)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
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

    /// Whether a small answer that missed chunk `inner` of `key`
    /// (`WHOLE_CHUNK` for an unsharded one) should offer it to the cache
    /// once decoded: at its 2nd, 4th and 8th miss, then every 8th. The
    /// first miss keeps nothing (a position asked once costs the cache
    /// nothing); the cache may refuse an offer (TinyLFU: the chunk was
    /// asked for less often than what it would evict), and each refused
    /// offer costs a copy of the chunk, so a chunk that keeps missing is
    /// offered at most once in 8 misses (a copy of it against 8 decodes).
    pub(crate) fn offer(&self, scope: &str, key: &str, inner: usize) -> bool {
        let hash = chunk_hash(scope, key, inner);
        let missed = self.seen.get(&hash).unwrap_or(0).saturating_add(1);
        self.seen.insert(hash, missed);
        matches!(missed, 2 | 4) || missed.is_multiple_of(8)
    }

    /// Whether a small answer missed this chunk before (then it may be in
    /// the cache: worth the version check an unsharded chunk needs).
    pub(crate) fn missed_before(&self, scope: &str, key: &str, inner: usize) -> bool {
        self.seen.contains_key(&chunk_hash(scope, key, inner))
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
