//! Region reads: planning which chunks a selection touches, fetching only
//! the bytes needed, decoding concurrently and copying each chunk's part
//! into the output once.
//!
//! A read is split into *slabs* along the first dimension with more than
//! one selected position (so each slab is a contiguous part of the C-order
//! output), aligned to read-chunk boundaries so no chunk is decoded twice
//! unless one chunk row alone exceeds the slab size. The HTTP layer streams
//! slab by slab with bounded memory.
//!
//! For a sharded array (sharding as the whole codec chain), each needed
//! shard's index is read with one byte-range request and cached with the
//! shard's ETag; then only the needed inner chunks are read, near-adjacent
//! ranges merged into one request, conditional on that ETag. A cold shard
//! whose inner chunks are all needed is read whole in one request.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::Semaphore;

use super::cache::{CachedIndex, ChunkKey};
use super::codec::array_to_bytes::sharding::{IndexLocation, ShardingCodec};
use super::codec::CodecChain;
use super::copy::{copy_block, source_prefix_elements, Block};
use super::decode_pool::{self, DecodePool, Priority};
use super::error::{Error, Result};
use super::hierarchy::{Dataset, Node};
use super::metadata::ArrayMetadata;
use super::selection::{output_shape, ChunkSpan, DimSelection, Selection};
use crate::buffer_pool;
use crate::storage::{join, ByteRange, StoreError};

/// Tuning of region reads.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Target bytes of one output slab (a slab holds at least one chunk row).
    pub slab_bytes: u64,
    /// Inner-chunk byte ranges closer than this are fetched in one request;
    /// `None`: the store's own preference ([`crate::storage::Store::coalesce_gap`]).
    pub coalesce_gap: Option<u64>,
    /// Chunks or shards fetched and decoded at once per read.
    pub concurrency: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            slab_bytes: 16 << 20,
            coalesce_gap: None,
            concurrency: 8,
        }
    }
}

/// Reads up to this size keep their decoded inner chunks in the decoded-chunk
/// cache; larger reads would only evict what small reads (tiles) reuse.
const CACHEABLE_READ_BYTES: u64 = 4 << 20;

/// Decoded bytes handed to one blocking task, so a shard's inner chunks are
/// decoded on all cores without a task per tiny chunk.
const DECODE_BATCH_BYTES: usize = 1 << 20;

/// A chunk is decoded only up to the last element a read needs when that
/// spares at least this many bytes: a zstd block (the unit a stream stops
/// at) decodes to up to 128 KiB, so sparing less may save no work at all.
/// (In the bench region, by its geometry, a third of the chunks, those on
/// the far edges of the last two dimensions, went through the stream to
/// spare 1-3% of each; the stream was 10% of the server's samples.)
const PREFIX_SPARES_AT_LEAST: usize = 128 << 10;

/// The store versions (ETags) of every key a read used; `None` = absent.
pub type Versions = BTreeMap<String, Option<String>>;

/// A planned region read of one array.
#[derive(Debug, Clone)]
pub struct ReadPlan {
    node: Arc<Node>,
    dims: Vec<DimSelection>,
    /// The dimension slabs are cut along, if any.
    slab_dim: Option<usize>,
    /// Ranges of output positions along `slab_dim`, one per slab.
    slabs: Vec<Range<u64>>,
    /// Shape of the decoded units copied from: inner chunks when read
    /// partially from shards, else chunks.
    read_shape: Vec<u64>,
    /// The selection is exactly one whole read unit (a tile): its decoded
    /// bytes are the result as they are, with no copy.
    whole_unit: bool,
}

impl ReadPlan {
    /// Plan `selection` on the array at `node`.
    pub fn new(node: Arc<Node>, selection: &Selection, options: &ReadOptions) -> Result<Self> {
        let meta = node.array()?;
        let dims = selection.resolve(&meta.shape)?;
        let slab_dim = dims.iter().position(|d| d.len > 1);
        let slabs = match slab_dim {
            None => {
                let single = 0..dims.iter().map(|d| d.len).product::<u64>().min(1);
                vec![single]
            }
            Some(s) => {
                let row_bytes: u64 =
                    dims[s + 1..].iter().map(|d| d.len).product::<u64>() * meta.data_type.size() as u64;
                let unit = meta.codecs.read_chunk_shape()[s];
                let mut slabs: Vec<Range<u64>> = Vec::new();
                for span in dims[s].chunk_spans(unit, 0..dims[s].len) {
                    match slabs.last_mut() {
                        Some(last) if (last.end - last.start + span.count) * row_bytes <= options.slab_bytes => {
                            last.end += span.count
                        }
                        _ => slabs.push(span.out_start..span.out_start + span.count),
                    }
                }
                slabs
            }
        };
        let read_shape = match meta.codecs.partial_sharding() {
            Some(codec) => codec.inner_shape().to_vec(),
            None => meta.chunk_grid.chunk_shape.clone(),
        };
        let whole_unit = slabs.len() == 1
            && dims
                .iter()
                .zip(&read_shape)
                .all(|(d, &n)| d.step == 1 && d.len == n && d.start % n == 0);
        Ok(Self {
            node,
            dims,
            slab_dim,
            slabs,
            read_shape,
            whole_unit,
        })
    }

    fn meta(&self) -> &ArrayMetadata {
        self.node.array().expect("checked at planning")
    }

    /// The resolved selection as text: equal for selections that pick the
    /// same elements in the same layout, however they were written.
    pub fn selection_key(&self) -> String {
        self.dims
            .iter()
            .map(|d| format!("{}:{}:{}:{}", d.start, d.step, d.len, u8::from(d.dropped)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Shape of the result (dropped dimensions removed).
    pub fn output_shape(&self) -> Vec<u64> {
        output_shape(&self.dims)
    }

    /// Bytes of the whole result.
    pub fn output_bytes(&self) -> u64 {
        self.dims.iter().map(|d| d.len).product::<u64>() * self.meta().data_type.size() as u64
    }

    /// The array's metadata.
    pub fn array(&self) -> &ArrayMetadata {
        self.meta()
    }

    /// The node read.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Bytes of the largest slab.
    pub fn max_slab_bytes(&self) -> u64 {
        let size = self.meta().data_type.size() as u64;
        (0..self.slabs.len())
            .map(|i| self.slab_shape(i).iter().product::<u64>() * size)
            .max()
            .unwrap_or(0)
    }

    /// Number of slabs (0 when the result is empty).
    pub fn slab_count(&self) -> usize {
        if self.output_bytes() == 0 {
            0
        } else {
            self.slabs.len()
        }
    }

    /// Per-dimension spans over the read units (shards or chunks) for slab `i`.
    fn unit_spans(&self, slab: usize) -> Vec<Vec<ChunkSpan>> {
        let chunk_shape = &self.meta().chunk_grid.chunk_shape;
        self.dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                let range = if Some(d) == self.slab_dim {
                    self.slabs[slab].clone()
                } else {
                    0..sel.len
                };
                sel.chunk_spans(chunk_shape[d], range)
            })
            .collect()
    }

    /// The shape of slab `i`'s buffer in array rank (dropped dimensions have length 1).
    fn slab_shape(&self, slab: usize) -> Vec<u64> {
        self.dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                if Some(d) == self.slab_dim {
                    self.slabs[slab].end - self.slabs[slab].start
                } else {
                    sel.len
                }
            })
            .collect()
    }
}

/// Where a chunk's bytes come from.
enum Source {
    /// Never written: the fill value.
    Fill,
    /// Encoded bytes, to decode with the unit's codecs.
    Encoded(Bytes),
    /// Already decoded (a decoded-chunk cache hit).
    Decoded(Bytes),
}

/// One chunk (or inner chunk) a slab needs, and where its part goes.
struct Item {
    source: Source,
    block: Block,
    /// Where to keep the decoded chunk, for small reads with the cache on.
    cache_as: Option<ChunkKey>,
}

/// One unit after its I/O: the items to decode with `codecs` and copy.
struct Fetched {
    key: String,
    version: Option<String>,
    codecs: Arc<CodecChain>,
    items: Vec<Item>,
}

/// A decoded item ready to copy.
struct Decoded {
    data: Option<Bytes>,
    block: Block,
    cache_as: Option<ChunkKey>,
}

/// One chunk or shard of the grid and the spans of it that a slab needs.
struct Unit {
    coords: Vec<u64>,
    spans: Vec<ChunkSpan>,
}

/// Slab bytes the whole process holds at once (read, being read, or not
/// yet written to a client): with many large reads at once, memory stays
/// bounded by this rather than by the number of reads times their slabs.
const SLAB_BYTES_HELD: usize = 256 << 20;

/// Slabs smaller than this take no share of the budget, so small reads
/// (tiles) never queue behind large ones.
const SLAB_BUDGET_MIN: usize = 1 << 20;

/// How long a slab waits for its share before the read fails as
/// overloaded (503), so clients that stop reading cannot stall the others
/// for ever.
const SLAB_BUDGET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Reserve `size` bytes (in KiB, at most all of them) of the process's slab
/// budget until the returned permit is dropped with the slab's bytes.
async fn hold_slab_bytes(size: usize) -> Result<Option<tokio::sync::OwnedSemaphorePermit>> {
    static BUDGET: OnceLock<Arc<Semaphore>> = OnceLock::new();
    if size < SLAB_BUDGET_MIN {
        return Ok(None);
    }
    let total = SLAB_BYTES_HELD >> 10;
    let budget = BUDGET.get_or_init(|| Arc::new(Semaphore::new(total))).clone();
    let kib = size.div_ceil(1 << 10).clamp(1, total) as u32;
    match tokio::time::timeout(SLAB_BUDGET_WAIT, budget.acquire_many_owned(kib)).await {
        Ok(permit) => Ok(Some(permit.expect("slab budget is never closed"))),
        Err(_) => Err(Error::Overloaded(
            "memory for decoded data is held by other responses; retry shortly".into(),
        )),
    }
}

/// Decode `items` (on the decoding threads at `priority`, unless `inline`).
async fn decode_items(
    codecs: Arc<CodecChain>,
    items: Vec<Item>,
    inline: bool,
    priority: Priority,
) -> Result<Vec<Decoded>> {
    let work = move || {
        items
            .into_iter()
            .map(|item| {
                let data = match item.source {
                    Source::Fill => None,
                    Source::Decoded(bytes) => Some(bytes),
                    // A chunk kept in the cache must be whole; else decode
                    // no further than the last element the copy reads, when
                    // that spares enough to pay for stopping early.
                    Source::Encoded(bytes) => {
                        let repr = codecs.decoded_repr();
                        let elements = source_prefix_elements(&item.block, &repr.shape);
                        let prefix = elements as usize * repr.data_type.size();
                        if item.cache_as.is_some() || repr.size_bytes().saturating_sub(prefix) < PREFIX_SPARES_AT_LEAST
                        {
                            Some(codecs.decode(bytes)?)
                        } else {
                            Some(codecs.decode_prefix(bytes, prefix)?)
                        }
                    }
                };
                Ok(Decoded {
                    data,
                    block: item.block,
                    cache_as: item.cache_as,
                })
            })
            .collect()
    };
    if inline {
        return work();
    }
    DecodePool::global()
        .run(priority, work)
        .await
        .unwrap_or_else(|| Err(Error::corrupt("", "decoder panicked")))
}

impl Dataset {
    /// Open the array at `path` and plan a read of `selection`.
    pub async fn plan_read(&self, path: &str, selection: &Selection) -> Result<ReadPlan> {
        let node = self.node(path).await?;
        ReadPlan::new(node, selection, &self.read_options)
    }

    /// Read the whole region into memory.
    pub async fn read_all(&self, plan: &ReadPlan) -> Result<(Bytes, Versions)> {
        if plan.slab_count() == 1 {
            return self.read_slab(plan, 0, None, decode_pool::ticket()).await;
        }
        let mut out = Vec::with_capacity(plan.output_bytes() as usize);
        let mut versions = Versions::new();
        for slab in 0..plan.slab_count() {
            let (data, v) = self.read_slab(plan, slab, None, decode_pool::ticket()).await?;
            out.extend_from_slice(&data);
            versions.extend(v);
        }
        Ok((Bytes::from(out), versions))
    }

    /// The versions of every key the read will use, without reading chunk
    /// data (shard indexes are read; unsharded chunks get a HEAD).
    pub async fn read_versions(&self, plan: &ReadPlan) -> Result<Versions> {
        let meta = plan.meta();
        let mut keys = Vec::new();
        for slab in 0..plan.slab_count() {
            for unit in units(&plan.unit_spans(slab)) {
                keys.push(self.chunk_key(plan, &unit.coords));
            }
        }
        keys.sort();
        keys.dedup();
        let sharding = meta.codecs.partial_sharding();
        let versions = futures::stream::iter(keys)
            .map(|key| async move {
                let version = match sharding {
                    Some(codec) => match self.cached_index(&key).await {
                        Some(cached) => cached.etag.clone(),
                        None => self.fetch_index(&key, codec, None).await?.and_then(|c| c.etag.clone()),
                    },
                    None => self.store.head(&key).await?.and_then(|i| i.etag),
                };
                Ok::<_, Error>((key, version))
            })
            .buffer_unordered(self.read_options.concurrency)
            .try_collect()
            .await?;
        Ok(versions)
    }

    fn chunk_key(&self, plan: &ReadPlan, coords: &[u64]) -> String {
        join(&plan.node.path, &plan.meta().chunk_key_encoding.encode(coords))
    }

    /// Read slab `slab` of `plan`: its C-order bytes and the versions used.
    /// With `pinned`, every key must still have that version. Its chunks
    /// decode after those of slabs with a lower `ticket`
    /// ([`decode_pool::ticket`], taken when the slab starts).
    ///
    /// Units (chunks or shards) are fetched concurrently; their chunks are
    /// decoded in batches as soon as they arrive, and each batch is copied
    /// into the slab as soon as it is decoded, so a slab never holds all of
    /// its decoded chunks at once.
    pub async fn read_slab(
        &self,
        plan: &ReadPlan,
        slab: usize,
        pinned: Option<&Versions>,
        ticket: Priority,
    ) -> Result<(Bytes, Versions)> {
        let meta = plan.meta();
        let shape = plan.slab_shape(slab);
        let slab_start = plan.slab_dim.map(|d| (d, plan.slabs[slab].start));
        let size = shape.iter().product::<u64>() as usize * meta.data_type.size();
        let held = hold_slab_bytes(size).await?;
        // A whole decoded unit is the result as it is; else copy into a buffer.
        let mut whole: Option<Bytes> = None;
        let mut out = if plan.whole_unit {
            Vec::new()
        } else {
            buffer_pool::take(size)
        };
        let mut versions = Versions::new();
        let units = units(&plan.unit_spans(slab));
        let inline = units.len() <= 1;
        let mut fetches = futures::stream::iter(units)
            .map(|unit| {
                let key = self.chunk_key(plan, &unit.coords);
                let pin = pinned.map(|p| p.get(&key).cloned().flatten());
                async move {
                    match meta.codecs.partial_sharding() {
                        Some(codec) => self.fetch_shard(plan, codec, key, &unit, pin).await,
                        None => self.fetch_chunk(plan, key, &unit, pin).await,
                    }
                }
            })
            .buffer_unordered(self.read_options.concurrency);
        let mut decoding = FuturesUnordered::new();
        let mut fetching = true;
        loop {
            tokio::select! {
                biased;
                Some(done) = decoding.next(), if !decoding.is_empty() => {
                    let done: Result<Vec<Decoded>> = done;
                    for mut item in done? {
                        if let Some((d, start)) = slab_start {
                            item.block.dst_start[d] -= start;
                        }
                        match &item.data {
                            Some(data) if plan.whole_unit => whole = Some(data.clone()),
                            data => {
                                if out.len() != size {
                                    out = buffer_pool::take(size);
                                }
                                let src = data.as_deref();
                                copy_block(src, &plan.read_shape, &mut out, &shape, &item.block, &meta.fill_value);
                            }
                        }
                        if let (Some(key), Some(data)) = (item.cache_as, item.data) {
                            // A copy: decoded bytes may be a slice of a larger
                            // read buffer, which the cache must not keep alive.
                            let data = Bytes::copy_from_slice(&data);
                            self.caches.decoded_chunks.insert(key, data).await;
                        }
                    }
                }
                next = fetches.next(), if fetching && decoding.len() < self.read_options.concurrency => match next {
                    None => fetching = false,
                    Some(fetched) => {
                        let fetched = fetched?;
                        let per_batch = (DECODE_BATCH_BYTES / fetched.codecs.decoded_repr().size_bytes().max(1)).max(1);
                        let mut items = fetched.items.into_iter().peekable();
                        while items.peek().is_some() {
                            let batch: Vec<Item> = items.by_ref().take(per_batch).collect();
                            let key = fetched.key.clone();
                            let job = decode_items(fetched.codecs.clone(), batch, inline, ticket);
                            decoding.push(async move { job.await.map_err(|e| e.at_key(&key)) });
                        }
                        versions.insert(fetched.key, fetched.version);
                    }
                },
                else => break,
            }
        }
        let data = whole.unwrap_or_else(|| buffer_pool::into_bytes(out));
        let data = match held {
            Some(permit) => buffer_pool::holding(data, permit),
            None => data,
        };
        Ok((data, versions))
    }

    /// An unsharded chunk: read whole.
    async fn fetch_chunk(
        &self,
        plan: &ReadPlan,
        key: String,
        unit: &Unit,
        pin: Option<Option<String>>,
    ) -> Result<Fetched> {
        let meta = plan.meta();
        let read = self
            .store
            .get(&key, ByteRange::All, pin.as_ref().and_then(|p| p.as_deref()))
            .await?;
        check_pin(&key, &pin, read.as_ref().map(|r| &r.info.etag))?;
        let (source, version) = match read {
            Some(read) => (Source::Encoded(read.data), read.info.etag),
            None => (Source::Fill, None),
        };
        let items = vec![Item {
            source,
            block: block_for(&unit.spans, &plan.dims),
            cache_as: None,
        }];
        Ok(Fetched {
            key,
            version,
            codecs: meta.codecs.clone(),
            items,
        })
    }

    /// A shard: the index (cached), then only the needed inner chunks; once
    /// more with a fresh index if the shard changed since it was cached.
    async fn fetch_shard(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: String,
        unit: &Unit,
        pin: Option<Option<String>>,
    ) -> Result<Fetched> {
        let inner_shape = codec.inner_shape();
        // Inner chunks needed, with the blocks of their parts.
        let inner_spans: Vec<Vec<ChunkSpan>> = unit
            .spans
            .iter()
            .zip(&plan.dims)
            .zip(inner_shape)
            .map(|((span, sel), &inner)| {
                let within = DimSelection {
                    start: span.start_in_chunk,
                    step: sel.step,
                    len: span.count,
                    dropped: false,
                };
                within
                    .chunk_spans(inner, 0..span.count)
                    .into_iter()
                    .map(|s| ChunkSpan {
                        out_start: s.out_start + span.out_start,
                        ..s
                    })
                    .collect()
            })
            .collect();
        let needed = units(&inner_spans);
        let all_needed = needed.len() as u64 == codec.chunks_per_shard().iter().product::<u64>();
        for attempt in 0..2 {
            let result = match self.cached_index(&key).await {
                None if all_needed && pin.is_none() => self.fetch_whole_shard(plan, codec, &key, &needed).await,
                cached => {
                    self.fetch_inner_chunks(plan, codec, &key, cached, &needed, pin.clone())
                        .await
                }
            };
            match result {
                // The shard changed since its index was cached: drop it and read again.
                Err(Error::Store(StoreError::Changed(_))) if attempt == 0 && pin.is_none() => {
                    self.caches
                        .shard_indexes
                        .invalidate(&(self.name.clone(), key.clone()))
                        .await;
                }
                other => {
                    let (version, items) = other?;
                    return Ok(Fetched {
                        key,
                        version,
                        codecs: codec.inner_codecs().clone(),
                        items,
                    });
                }
            }
        }
        unreachable!("the second attempt returns")
    }

    async fn cached_index(&self, key: &str) -> Option<Arc<CachedIndex>> {
        let cached = self
            .caches
            .shard_indexes
            .get(&(self.name.clone(), key.to_string()))
            .await;
        let stats = &self.caches.index_stats;
        if cached.is_some() { &stats.hits } else { &stats.misses }.fetch_add(1, Ordering::Relaxed);
        cached
    }

    /// The shard's index with one ranged request (conditional on `pin`),
    /// cached on the way. `None` when the shard does not exist.
    async fn fetch_index(
        &self,
        key: &str,
        codec: &ShardingCodec,
        pin: Option<&str>,
    ) -> Result<Option<Arc<CachedIndex>>> {
        let n = codec.index_size() as u64;
        let range = match codec.index_location() {
            IndexLocation::Start => ByteRange::Bounded(0..n),
            IndexLocation::End => ByteRange::Suffix(n),
        };
        let Some(read) = self.store.get(key, range, pin).await? else {
            return Ok(None);
        };
        let index = codec
            .decode_index(read.data, read.info.size)
            .map_err(|e| e.at_key(key))?;
        Ok(Some(
            self.remember_index(key, index, read.info.etag, read.info.size).await,
        ))
    }

    async fn remember_index(
        &self,
        key: &str,
        index: super::codec::array_to_bytes::sharding::ShardIndex,
        etag: Option<String>,
        shard_size: u64,
    ) -> Arc<CachedIndex> {
        let cached = Arc::new(CachedIndex {
            index,
            etag,
            shard_size,
        });
        self.caches
            .shard_indexes
            .insert((self.name.clone(), key.to_string()), cached.clone())
            .await;
        cached
    }

    /// One request for the whole shard; its index is cached on the way.
    async fn fetch_whole_shard(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: &str,
        needed: &[Unit],
    ) -> Result<(Option<String>, Vec<Item>)> {
        let Some(read) = self.store.get(key, ByteRange::All, None).await? else {
            return Ok((None, needed.iter().map(|u| fill_item(plan, u)).collect()));
        };
        let size = read.info.size;
        if size < codec.index_size() as u64 {
            let reason = format!(
                "shard of {size} bytes is too short for its {}-byte index",
                codec.index_size()
            );
            return Err(Error::corrupt(key, reason));
        }
        let range = codec.index_range(size);
        let index = codec
            .decode_index(read.data.slice(range.start as usize..range.end as usize), size)
            .map_err(|e| e.at_key(key))?;
        let cached = self.remember_index(key, index, read.info.etag.clone(), size).await;
        let items = needed
            .iter()
            .map(|u| {
                let source = match cached.index.chunk_range(codec.linear_index(&u.coords)) {
                    Some(r) => Source::Encoded(read.data.slice(r.start as usize..r.end as usize)),
                    None => Source::Fill,
                };
                Item {
                    source,
                    block: block_for(&u.spans, &plan.dims),
                    cache_as: None,
                }
            })
            .collect();
        Ok((read.info.etag, items))
    }

    /// The needed inner chunks by byte ranges, conditional on the index's ETag.
    async fn fetch_inner_chunks(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: &str,
        cached: Option<Arc<CachedIndex>>,
        needed: &[Unit],
        pin: Option<Option<String>>,
    ) -> Result<(Option<String>, Vec<Item>)> {
        let index = match (cached, &pin) {
            (Some(c), None) => Some(c),
            (Some(c), Some(p)) if c.etag == *p => Some(c),
            (_, Some(None)) => None,
            _ => {
                self.fetch_index(key, codec, pin.as_ref().and_then(|p| p.as_deref()))
                    .await?
            }
        };
        let Some(index) = index else {
            check_pin(key, &pin, None)?;
            return Ok((None, needed.iter().map(|u| fill_item(plan, u)).collect()));
        };
        check_pin(key, &pin, Some(&index.etag))?;
        // Small reads of an unchanged shard may find inner chunks already decoded.
        let cacheable = self.caches.decoded_chunks.policy().max_capacity().unwrap_or(0) > 0
            && plan.slab_count() == 1
            && plan.output_bytes() <= CACHEABLE_READ_BYTES
            && index.etag.is_some();
        let mut items = Vec::with_capacity(needed.len());
        let mut ranges = Vec::new();
        for u in needed {
            let linear = codec.linear_index(&u.coords);
            let cache_as = cacheable.then(|| {
                (
                    self.name.clone(),
                    key.to_string(),
                    linear,
                    index.etag.clone().unwrap_or_default(),
                )
            });
            let hit = match &cache_as {
                Some(k) => self.caches.decoded_chunks.get(k).await,
                None => None,
            };
            if cacheable {
                let stats = &self.caches.chunk_stats;
                if hit.is_some() { &stats.hits } else { &stats.misses }.fetch_add(1, Ordering::Relaxed);
            }
            let source = match (hit, index.index.chunk_range(linear)) {
                (Some(data), _) => Source::Decoded(data),
                (None, Some(range)) => {
                    ranges.push((items.len(), range));
                    Source::Fill // replaced by the fetched bytes below
                }
                (None, None) => Source::Fill,
            };
            let cache_as = if matches!(source, Source::Decoded(_)) {
                None
            } else {
                cache_as
            };
            items.push(Item {
                source,
                block: block_for(&u.spans, &plan.dims),
                cache_as,
            });
        }
        let merged = coalesce(
            ranges.iter().map(|(_, r)| r.clone()).collect(),
            self.read_options
                .coalesce_gap
                .unwrap_or_else(|| self.store.coalesce_gap()),
        );
        if !merged.is_empty() {
            let fetched = self
                .store
                .get_ranges(key, &merged, index.etag.as_deref())
                .await?
                .ok_or_else(|| Error::Store(StoreError::Changed(key.to_string())))?;
            if fetched
                .iter()
                .zip(&merged)
                .any(|(f, m)| f.len() as u64 != m.end - m.start)
            {
                return Err(Error::corrupt(key, "shard is shorter than its index says"));
            }
            for (i, r) in ranges {
                let m = merged
                    .iter()
                    .position(|m| m.start <= r.start && r.end <= m.end)
                    .expect("covered");
                let base = merged[m].start;
                items[i].source = Source::Encoded(fetched[m].slice((r.start - base) as usize..(r.end - base) as usize));
            }
        }
        Ok((index.etag.clone(), items))
    }
}

fn fill_item(plan: &ReadPlan, unit: &Unit) -> Item {
    Item {
        source: Source::Fill,
        block: block_for(&unit.spans, &plan.dims),
        cache_as: None,
    }
}

/// A read pinned to a version must find exactly that version.
fn check_pin(key: &str, pin: &Option<Option<String>>, found: Option<&Option<String>>) -> Result<()> {
    match pin {
        Some(expected) if found.cloned().flatten() != *expected => {
            Err(Error::Store(StoreError::Changed(key.to_string())))
        }
        _ => Ok(()),
    }
}

/// The cartesian product of per-dimension spans, as units with grid coordinates.
fn units(spans: &[Vec<ChunkSpan>]) -> Vec<Unit> {
    let mut out = vec![Unit {
        coords: vec![],
        spans: vec![],
    }];
    for dim in spans {
        out = out
            .into_iter()
            .flat_map(|u| {
                dim.iter().map(move |s| {
                    let mut coords = u.coords.clone();
                    coords.push(s.chunk);
                    let mut spans = u.spans.clone();
                    spans.push(*s);
                    Unit { coords, spans }
                })
            })
            .collect();
    }
    out
}

fn block_for(spans: &[ChunkSpan], dims: &[DimSelection]) -> Block {
    Block {
        src_start: spans.iter().map(|s| s.start_in_chunk).collect(),
        src_step: dims.iter().map(|d| d.step).collect(),
        dst_start: spans.iter().map(|s| s.out_start).collect(),
        count: spans.iter().map(|s| s.count).collect(),
    }
}

/// Sort ranges and merge those closer than `gap`.
fn coalesce(mut ranges: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_near_ranges() {
        let merged = coalesce(vec![10..20, 0..5, 30..40, 100..110, 18..25], 4);
        assert_eq!(merged, vec![0..5, 10..25, 30..40, 100..110]);
        assert_eq!(coalesce(vec![0..5, 7..9], 2), vec![0..9]);
        assert!(coalesce(vec![], 5).is_empty());
    }
}
