//! Slab assembly: the chunks of one slab, or its shards in pieces of about
//! one decoding batch, fetched concurrently; their chunks decoded in
//! batches on the decoding threads as soon as they arrive, and each batch
//! copied into the slab as soon as it is decoded. So a slab never holds all
//! of its decoded chunks at once, nor more encoded bytes than the pieces in
//! flight (a few MiB, however large its shards).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::OwnedSemaphorePermit;

use super::fetch::{Item, Source, Versions};
use super::shard::{self, Piece};
use super::sink::{sink_chunk, BlockSink};
use crate::buffer_pool::{self, BufferPool};
use crate::engine::error::{Error, Result};
use crate::engine::format::codec::CodecChain;
use crate::engine::format::copy::{copy_blocks_to, Destination};
use crate::engine::format::values::{number_width, to_big_endian};
use crate::engine::format::vlen::{Gather, FILL_HANDLE};
use crate::engine::query::plan::{Placement, ReadPlan, Unit};
use crate::engine::read::cache::{ChunkKey, Keep};
use crate::engine::read::decode_pool::Priority;
use crate::engine::read::hierarchy::Dataset;

/// A chunk is decoded only up to the last element a read needs when that
/// spares at least this many bytes: a zstd block (the unit a stream stops
/// at) decodes to up to 128 KiB, so sparing less may save no work at all.
const PREFIX_SPARES_AT_LEAST: usize = 128 << 10;

/// A decoded item ready to copy.
struct Decoded {
    data: Option<Bytes>,
    placement: Placement,
    cache_as: Option<ChunkKey>,
    /// The decoded unit's shape when units differ (else the plan's).
    shape: Option<Vec<u64>>,
}

impl Dataset {
    /// Read slab `slab` of `plan`: its C-order bytes and the versions used.
    /// With `pinned`, every key must still have that version. Its chunks
    /// decode after those of slabs with a lower `ticket`
    /// ([`crate::engine::Resources::ticket`], taken when the slab starts).
    /// With a `sink`, each decoded chunk's part goes to it on the decoding
    /// thread instead, and the bytes returned are empty (no slab is held).
    pub(crate) async fn read_slab(
        &self,
        plan: &ReadPlan,
        slab: usize,
        pinned: Option<&Versions>,
        ticket: Priority,
        sink: Option<&Arc<dyn BlockSink>>,
    ) -> Result<(Bytes, Versions)> {
        let meta = plan.meta();
        let resources = &self.resources;
        let shape = plan.slab_shape(slab);
        let slab_start = plan.slab_dim.map(|d| (d, plan.slabs[slab].start));
        let slab_bytes = shape.iter().product::<u64>() as usize * meta.data_type.size();
        let size = if sink.is_some() { 0 } else { slab_bytes };
        let mut held = resources.hold_slab_bytes(size).await?;
        // A whole decoded unit is the result as it is; else copy into a buffer.
        let mut whole: Option<Bytes> = None;
        let mut out = if plan.whole_unit || sink.is_some() {
            Vec::new()
        } else {
            resources.buffers.take(size)
        };
        let mut versions = Versions::new();
        // Variable-length elements are placed as handles, resolved at the end.
        let mut variable = meta.data_type.is_variable().then(Gather::default);
        // Fixed-size elements are copied into the slab by the decoding threads.
        // Big-endian numbers are swapped by the decoding threads as they
        // copy them into the slab (not under CF decoding, which reads them).
        let swap = match plan.big_endian && plan.cf.is_none() {
            true => number_width(meta.data_type),
            false => None,
        };
        let target = match sink {
            Some(sink) => Target::Sink(sink.clone()),
            None if !plan.whole_unit && variable.is_none() && size > 0 => Target::Slab(Arc::new(SharedSlab::new(
                std::mem::take(&mut out),
                shape.clone(),
                slab_start,
                held.take(),
                swap.unwrap_or(0),
            ))),
            None => Target::Caller,
        };
        let swapped = swap.is_some() && matches!(target, Target::Slab(_));
        // A read in one slab, with the cache on, may keep chunks decoded.
        let cache_on = resources.caches.decoded_chunks.policy().max_capacity() > Some(0);
        let answer = (plan.slab_count() == 1 && cache_on).then_some(slab_bytes as u64);
        let jobs = jobs(plan, slab, resources.read.batch_bytes, answer);
        let inline = jobs.len() <= 1;
        let mut fetches = futures::stream::iter(jobs)
            .map(|job| {
                let key = self.chunk_key(plan, job.coords());
                let pin = pinned.map(|p| p.get(&key).cloned().flatten());
                async move {
                    match (&job, meta.codecs_at(job.coords()).partial_sharding()) {
                        (Job::Piece(piece), Some(codec)) => self.fetch_shard(plan, codec, key, piece, pin).await,
                        (Job::Chunk(unit, keep), _) => self.fetch_chunk(plan, key, unit, pin, *keep).await,
                        (Job::Piece(_), None) => unreachable!("pieces are of shards"),
                    }
                }
            })
            .buffer_unordered(resources.read.concurrency);
        let mut decoding = FuturesUnordered::new();
        let mut fetching = true;
        loop {
            tokio::select! {
                biased;
                Some(done) = decoding.next(), if !decoding.is_empty() => {
                    let done: Result<Vec<Decoded>> = done;
                    for mut item in done? {
                        if !matches!(target, Target::Caller) {
                            // Already taken by the sink or copied into the
                            // slab; only the cache is left to fill.
                        } else {
                        if let Some((d, start)) = slab_start {
                            item.placement.shift(d, start);
                        }
                        match &item.data {
                            Some(data) if plan.whole_unit => whole = Some(data.clone()),
                            data => {
                                if out.len() != size {
                                    out = resources.buffers.take(size);
                                }
                                let src_shape = item.shape.as_deref().unwrap_or(&plan.read_shape);
                                if let Some(gather) = variable.as_mut() {
                                    let elements = src_shape.iter().product::<u64>() as usize;
                                    let handles = data.clone().map(|d| gather.add(d, elements)).transpose()?;
                                    item.placement.copy(handles.as_deref(), src_shape, &mut out, &shape, &FILL_HANDLE);
                                } else {
                                    let src = data.as_deref();
                                    item.placement.copy(src, src_shape, &mut out, &shape, &meta.fill_value);
                                }
                            }
                        }
                        }
                        if let (Some(key), Some(data)) = (item.cache_as, item.data) {
                            // A copy: decoded bytes may be a slice of a larger
                            // read buffer, which the cache must not keep alive.
                            let data = Bytes::copy_from_slice(&data);
                            resources.caches.decoded_chunks.insert(key, data).await;
                        }
                    }
                }
                next = fetches.next(), if fetching && decoding.len() < resources.read.concurrency => match next {
                    None => fetching = false,
                    Some(fetched) => {
                        let fetched = fetched?;
                        let per_batch = (resources.read.batch_bytes / fetched.codecs.decoded_repr().size_bytes().max(1)).max(1);
                        let mut items = fetched.items.into_iter().peekable();
                        while items.peek().is_some() {
                            let batch: Vec<Item> = items.by_ref().take(per_batch).collect();
                            let encoded = batch.iter().filter(|i| matches!(i.source, Source::Encoded(_))).count();
                            resources.chunks_decoded.fetch_add(encoded as u64, Ordering::Relaxed);
                            let key = fetched.key.clone();
                            let job = self.decode_items(fetched.codecs.clone(), batch, inline, ticket, target.clone(), plan);
                            decoding.push(async move { job.await.map_err(|e| e.at_key(&key)) });
                        }
                        versions.insert(fetched.key, fetched.version);
                    }
                },
                else => break,
            }
        }
        if sink.is_some() {
            return Ok((Bytes::new(), versions));
        }
        if let Target::Slab(slab) = target {
            // Every decoding job has ended (each was awaited), so this is the last reference.
            (out, held) = Arc::try_unwrap(slab)
                .map_err(|_| Error::Internal("a slab is still shared after its reads".into()))?
                .into_inner();
        }
        let data = match (whole, variable) {
            (Some(data), _) => data,
            (None, Some(gather)) => gather.resolve(&out, &meta.fill_value),
            (None, None) => BufferPool::into_bytes(&resources.buffers, out),
        };
        let data = match &plan.cf {
            Some(cf) => cf.decode(meta.data_type, &data)?,
            None => data,
        };
        // Big-endian numbers not swapped on their way into the slab (a
        // whole decoded unit, a CF decoding): swapped in a copy.
        let data = match plan.big_endian && !swapped && !plan.data_type().is_variable() {
            true => {
                let mut copy = data.to_vec();
                to_big_endian(plan.data_type(), &mut copy);
                Bytes::from(copy)
            }
            false => data,
        };
        let data = match held {
            Some(permit) => buffer_pool::holding(data, permit),
            None => data,
        };
        Ok((data, versions))
    }

    /// Decode `items` (on the decoding threads at `priority`, unless
    /// `inline`) and hand each to `target`: those handed to a sink or
    /// copied into the slab keep their bytes only when they are to be cached.
    async fn decode_items(
        &self,
        codecs: Arc<CodecChain>,
        items: Vec<Item>,
        inline: bool,
        priority: Priority,
        target: Target,
        plan: &ReadPlan,
    ) -> Result<Vec<Decoded>> {
        // The decoded unit's shape: the chain's (chunks of a rectilinear
        // grid differ; inner chunks of shards and regular chunks do not).
        let (read_shape, fill) = (codecs.decoded_repr().shape.clone(), plan.meta().fill_value.clone());
        let varies = plan.read_shape.is_empty();
        let work = move || match &target {
            Target::Slab(slab) => slab.decode_all_into(&codecs, items, &read_shape, &fill),
            Target::Caller => items
                .into_iter()
                .map(|item| {
                    let mut item = decode_item(&codecs, item)?;
                    item.shape = varies.then(|| read_shape.clone());
                    Ok(item)
                })
                .collect(),
            Target::Sink(sink) => items
                .into_iter()
                .map(|item| {
                    let mut item = decode_item(&codecs, item)?;
                    sink_chunk(sink.as_ref(), item.data.as_deref(), &read_shape, &item.placement, &fill)?;
                    if item.cache_as.is_none() {
                        item.data = None;
                    }
                    Ok(item)
                })
                .collect(),
        };
        if inline {
            return work();
        }
        self.resources
            .decoders
            .run(priority, work)
            .await
            .unwrap_or_else(|panic| Err(Error::Internal(format!("a decoder panicked: {panic}"))))
    }
}

/// Where decoded chunks go.
#[derive(Clone)]
enum Target {
    /// Back to the caller, which copies them.
    Caller,
    /// To a block sink, on the decoding thread.
    Sink(Arc<dyn BlockSink>),
    /// Into the slab, on the decoding thread.
    Slab(Arc<SharedSlab>),
}

/// Decoded chunks of at most this many bytes are decoded into buffers of
/// the decoding thread's own, reused for the next batch.
const SCRATCH_MAX_BYTES: usize = 4 << 20;

thread_local! {
    /// This thread's buffers for chunks decoded only to be copied, one per
    /// chunk of a batch (a batch decodes to about `batch_bytes`, or to one
    /// chunk of at most [`SCRATCH_MAX_BYTES`]).
    static SCRATCH: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A slab's buffer that the decoding threads write at once, each the
/// elements of its chunks: every output element lies in exactly one
/// chunk's placement, so no two writes touch the same bytes.
struct SharedSlab {
    buffer: Vec<u8>,
    destination: Destination,
    shape: Vec<u64>,
    /// The slab's place in the whole result: (dimension, first position).
    start: Option<(usize, u64)>,
    /// The buffer's share of the slab budget, given back with the buffer:
    /// when a read is dropped, a decoding job may still be writing here.
    budget: Option<OwnedSemaphorePermit>,
}

// SAFETY: the buffer is written only through `destination`, by
// placements of distinct chunks, which write disjoint elements; it is read
// only after the last reference is given back (`into_inner`).
unsafe impl Send for SharedSlab {}
// SAFETY: as above.
unsafe impl Sync for SharedSlab {}

impl SharedSlab {
    fn new(
        mut buffer: Vec<u8>,
        shape: Vec<u64>,
        start: Option<(usize, u64)>,
        budget: Option<OwnedSemaphorePermit>,
        swap: usize,
    ) -> Self {
        let destination = Destination::of(&mut buffer).big_endian(swap);
        Self {
            buffer,
            destination,
            shape,
            start,
            budget,
        }
    }

    /// Decode `items` and copy their parts into the slab; their bytes are
    /// kept only when they are to be cached. Chunks decoded only to be
    /// copied are decoded into this thread's scratch buffers first, then
    /// copied together, a row of each in turn ([`copy_blocks_to`]).
    fn decode_all_into(
        &self,
        codecs: &CodecChain,
        mut items: Vec<Item>,
        read_shape: &[u64],
        fill: &[u8],
    ) -> Result<Vec<Decoded>> {
        if let Some((d, start)) = self.start {
            items.iter_mut().for_each(|item| item.placement.shift(d, start));
        }
        let whole = codecs.decoded_repr().size_bytes();
        let (mut together, alone): (Vec<Item>, Vec<Item>) = items.into_iter().partition(|item| {
            matches!(item.source, Source::Encoded(_))
                && matches!(item.placement, Placement::Blocks(_))
                && item.cache_as.is_none()
                && whole <= SCRATCH_MAX_BYTES
                && worth_a_prefix(codecs, &item.placement).is_none()
        });
        let mut decoded = Vec::with_capacity(together.len() + alone.len());
        for item in alone {
            decoded.push(self.decode_into(codecs, item, read_shape, fill)?);
        }
        if together.is_empty() {
            return Ok(decoded);
        }
        SCRATCH.with_borrow_mut(|scratch| -> Result<()> {
            if scratch.len() < together.len() {
                scratch.resize_with(together.len(), Vec::new);
            }
            let mut held = Vec::with_capacity(together.len());
            for (item, buffer) in together.iter_mut().zip(scratch.iter_mut()) {
                let Source::Encoded(bytes) = std::mem::replace(&mut item.source, Source::Fill) else {
                    unreachable!("only encoded chunks are decoded together")
                };
                held.push(codecs.decode_to_scratch(bytes, buffer)?);
            }
            let mut blocks = Vec::new();
            for ((item, held), buffer) in together.iter().zip(&held).zip(scratch.iter()) {
                let data: &[u8] = held.as_deref().unwrap_or(buffer);
                if let Placement::Blocks(placed) = &item.placement {
                    blocks.extend(placed.iter().map(|block| (Some(data), block)));
                }
            }
            // SAFETY: the buffer outlives `self`'s references, and these
            // chunks' elements are written by no one else.
            unsafe { copy_blocks_to(&blocks, read_shape, self.destination, &self.shape, fill) };
            Ok(())
        })?;
        decoded.extend(together.into_iter().map(|item| Decoded {
            data: None,
            placement: item.placement,
            cache_as: None,
            shape: None,
        }));
        Ok(decoded)
    }

    /// Decode `item` (placed in the whole result) and copy its part into
    /// the slab; its bytes are kept only when it is to be cached.
    fn decode_into(&self, codecs: &CodecChain, item: Item, read_shape: &[u64], fill: &[u8]) -> Result<Decoded> {
        let mut decoded = decode_item(codecs, item)?;
        // SAFETY: the buffer outlives `self`'s references, and this
        // chunk's elements are written by no one else.
        unsafe {
            decoded
                .placement
                .copy_to(decoded.data.as_deref(), read_shape, self.destination, &self.shape, fill)
        };
        if decoded.cache_as.is_none() {
            decoded.data = None;
        }
        Ok(decoded)
    }

    /// The buffer and its share of the slab budget.
    fn into_inner(self) -> (Vec<u8>, Option<OwnedSemaphorePermit>) {
        (self.buffer, self.budget)
    }
}

/// What one fetch of a slab reads: a chunk, or a piece of a shard.
enum Job {
    /// An unsharded chunk, and whether to keep it decoded.
    Chunk(Unit, Keep),
    Piece(Piece),
}

impl Job {
    fn coords(&self) -> &[u64] {
        match self {
            Job::Chunk(unit, _) => &unit.coords,
            Job::Piece(piece) => &piece.coords,
        }
    }
}

/// The fetches of slab `slab`: its chunks, or its shards in pieces of
/// about one decoding batch (`batch_bytes` decoded). With `answer` (the
/// bytes of a read in one slab, the cache on), the read keeps chunks or
/// inner chunks in the decoded-chunk cache by [`Keep::rule`].
fn jobs(plan: &ReadPlan, slab: usize, batch_bytes: usize, answer: Option<u64>) -> Vec<Job> {
    let units = plan.units(slab);
    let codecs = &plan.meta().codecs;
    match codecs.partial_sharding() {
        None => {
            // As shard::pieces keeps inner chunks.
            let keep = Keep::rule(answer, units.len() as u64, codecs.decoded_repr());
            units.into_iter().map(|unit| Job::Chunk(unit, keep)).collect()
        }
        Some(codec) => {
            let inner_bytes = codec.inner_codecs().decoded_repr().size_bytes().max(1);
            let per_piece = (batch_bytes / inner_bytes).max(1);
            let meta = plan.meta();
            let per_shard = |coords: &[u64]| {
                let shard = meta.codecs_at(coords).partial_sharding().unwrap_or(codec);
                shard.chunks_per_shard().iter().product::<u64>() as usize
            };
            shard::pieces(codec, per_shard, units, per_piece, answer)
                .into_iter()
                .map(Job::Piece)
                .collect()
        }
    }
}

/// Decode one item. A chunk kept in the cache must be whole; else decode
/// no further than the last element the copy reads, when that spares
/// enough to pay for stopping early.
fn decode_item(codecs: &CodecChain, item: Item) -> Result<Decoded> {
    let data = match item.source {
        Source::Fill => None,
        Source::Decoded(bytes) => Some(bytes),
        Source::Encoded(bytes) => match worth_a_prefix(codecs, &item.placement) {
            Some(prefix) if item.cache_as.is_none() => Some(codecs.decode_prefix(bytes, prefix)?),
            _ => Some(codecs.decode(bytes)?),
        },
    };
    Ok(Decoded {
        data,
        placement: item.placement,
        cache_as: item.cache_as,
        shape: None,
    })
}

/// The bytes of a chunk to decode when the copy of `placement` reads no
/// further and stopping there spares enough to pay (see [`PREFIX_SPARES_AT_LEAST`]).
fn worth_a_prefix(codecs: &CodecChain, placement: &Placement) -> Option<usize> {
    let repr = codecs.decoded_repr();
    let prefix = placement.prefix_elements(&repr.shape) as usize * repr.data_type.size();
    (repr.size_bytes().saturating_sub(prefix) >= PREFIX_SPARES_AT_LEAST).then_some(prefix)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::engine::query::plan::ReadOptions;
    use crate::engine::{ResourceOptions, Resources, Selection};
    use crate::storage::{Store, StoreOptions};

    /// Array `name`: uint8 (1024, 1024 * wide) in two shards side by side,
    /// each of 2 x `wide` raw inner chunks (512, 512) of 256 KiB.
    fn write_sharded(dir: &std::path::Path, name: &str, wide: u64) {
        let meta = json!({
            "zarr_format": 3, "node_type": "array", "shape": [1024, 1024 * wide], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1024, 512 * wide]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [512, 512],
                "codecs": [{"name": "bytes"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}],
        });
        std::fs::create_dir_all(dir.join(format!("{name}/c/0"))).unwrap();
        std::fs::write(dir.join(format!("{name}/zarr.json")), meta.to_string()).unwrap();
        let (inner, count) = (512 * 512, 2 * wide);
        for shard in 0..2 {
            let mut data: Vec<u8> = (0..count)
                .flat_map(|i| vec![(shard * count + i) as u8; inner])
                .collect();
            let mut index: Vec<u8> = (0..count)
                .flat_map(|i| [(i * inner as u64).to_le_bytes(), (inner as u64).to_le_bytes()].concat())
                .collect();
            index.extend(crc32c::crc32c(&index).to_le_bytes());
            data.extend(index);
            std::fs::write(dir.join(format!("{name}/c/0/{shard}")), data).unwrap();
        }
    }

    /// A uint8 array (1024, 2048) in two shards (1024, 1024) of four raw
    /// inner chunks (512, 512) each: a 2 MiB slab read in two pieces.
    fn write_array(dir: &std::path::Path) {
        write_sharded(dir, "a", 2);
    }

    /// The versions of a shard whose index is cached are confirmed (a
    /// rewritten shard has its new version at once), and a read pinned to
    /// the old version fails rather than mixing the two.
    #[tokio::test]
    async fn versions_confirm_a_cached_index_and_a_stale_pin_fails() {
        let dir = tempfile::tempdir().unwrap();
        write_array(dir.path());
        let resources = Arc::new(Resources::new(&ResourceOptions::default()));
        let store = Store::open(dir.path().to_str().unwrap(), &StoreOptions::default()).unwrap();
        let dataset = Dataset::new("t", None, store, resources.clone());
        let plan = dataset
            .plan_read("a", &Selection::parse("0:1,0:1").unwrap())
            .await
            .unwrap();
        let pinned = |versions: Versions| {
            let (dataset, plan, ticket) = (&dataset, &plan, resources.ticket());
            async move { dataset.read_slab(plan, 0, Some(&versions), ticket, None).await }
        };
        let versions = dataset.read_versions(&plan).await.unwrap();
        assert_eq!(pinned(versions.clone()).await.unwrap().0.to_vec(), [0]);

        // The shard's version changes (a later modification time).
        let shard = std::fs::File::options()
            .write(true)
            .open(dir.path().join("a/c/0/0"))
            .unwrap();
        let modified = shard.metadata().unwrap().modified().unwrap();
        shard.set_modified(modified + Duration::from_secs(1)).unwrap();
        let current = dataset.read_versions(&plan).await.unwrap();
        assert_ne!(current, versions, "the cached index's version was confirmed");
        let failed = pinned(versions).await;
        assert!(matches!(failed, Err(Error::Store(_))), "{failed:?}");
        assert_eq!(pinned(current).await.unwrap().0.to_vec(), [0]);
    }

    /// Dataset "t" of `dir`, with a 64 MiB decoded-chunk cache.
    fn cached_dataset(dir: &std::path::Path) -> (Dataset, Arc<Resources>) {
        let resources = Arc::new(Resources::new(&ResourceOptions {
            caches: crate::engine::CacheOptions {
                decoded_chunk_bytes: 64 << 20,
                ..Default::default()
            },
            ..ResourceOptions::default()
        }));
        let store = Store::open(dir.to_str().unwrap(), &StoreOptions::default()).unwrap();
        (Dataset::new("t", None, store, resources.clone()), resources)
    }

    /// Reads that decode at most 4 MiB of inner chunks keep them in the
    /// decoded-chunk cache; larger ones (a wide region, points spread over
    /// many chunks) leave it alone.
    #[tokio::test]
    async fn only_small_reads_fill_the_decoded_chunk_cache() {
        let dir = tempfile::tempdir().unwrap();
        // 32 inner chunks, 8 MiB.
        write_sharded(dir.path(), "b", 8);
        let (dataset, resources) = cached_dataset(dir.path());
        let cached = || async {
            let chunks = &resources.caches().decoded_chunks;
            chunks.run_pending_tasks().await;
            chunks.entry_count()
        };
        let dataset = &dataset;
        let read = |selection: Selection| async move {
            let plan = dataset.plan_read("b", &selection).await.unwrap();
            assert_eq!(plan.slab_count(), 1);
            dataset.read_all(&plan).await.unwrap().0
        };
        // Points in `n` inner chunks, one each: row 600, then row 0.
        let row = |i| if i < 16 { 1 } else { 0 };
        let spread = |n: u8| Selection::points((0..n).map(|i| vec![600 * row(i), (i % 16) as i64 * 512]).collect());
        // The value of inner chunk (row(i), i % 8) of shard i % 16 / 8.
        let value = |i: u8| (i % 16 / 8) * 16 + row(i) as u8 * 8 + i % 8;
        // Nine inner chunks (2.25 MiB): kept.
        assert_eq!(read(spread(9)).await.to_vec(), (0..9).map(value).collect::<Vec<_>>());
        assert_eq!(cached().await, 9);
        // 17 inner chunks (4.25 MiB): too many to keep.
        assert_eq!(read(spread(17)).await.to_vec(), (0..17).map(value).collect::<Vec<_>>());
        assert_eq!(cached().await, 9);
        // A region of 2 x 9 inner chunks (4.5 MiB): too many to keep.
        let region = read(Selection::parse("0:513,0:4097").unwrap()).await;
        assert_eq!(region[512 * 4097 + 4096], 24);
        assert_eq!(cached().await, 9);
    }

    /// A small answer that decodes much (points in 17 inner chunks, 4.25
    /// MiB) keeps nothing the first time, keeps its chunks the second time
    /// (asked for before), and is answered from the cache the third; a
    /// scan (an answer over 1 MiB) never keeps what it decodes.
    #[tokio::test]
    async fn small_answers_keep_the_chunks_asked_for_again() {
        let dir = tempfile::tempdir().unwrap();
        write_sharded(dir.path(), "b", 8);
        let (dataset, resources) = cached_dataset(dir.path());
        let (dataset, resources) = (&dataset, &resources);
        let cached = || async move {
            let chunks = &resources.caches().decoded_chunks;
            chunks.run_pending_tasks().await;
            chunks.entry_count()
        };
        let decoded = || resources.chunks_decoded.load(Ordering::Relaxed);
        let read = |selection: Selection| async move {
            let plan = dataset.plan_read("b", &selection).await.unwrap();
            dataset.read_all(&plan).await.unwrap().0
        };
        // One point in each of 17 inner chunks: rows 0 and 600, across.
        let points = Selection::points((0..17i64).map(|i| vec![600 * (i / 16), (i % 16) * 512]).collect());
        let expected: Vec<u8> = (0..17u8).map(|i| (i % 16 / 8) * 16 + (i / 16) * 8 + i % 8).collect();
        assert_eq!(read(points.clone()).await.to_vec(), expected);
        assert_eq!((cached().await, decoded()), (0, 17), "kept at the first asking");
        assert_eq!(read(points.clone()).await.to_vec(), expected);
        assert_eq!((cached().await, decoded()), (17, 34), "not kept at the second asking");
        assert_eq!(read(points.clone()).await.to_vec(), expected);
        assert_eq!(decoded(), 34, "the third asking decoded again");

        // A scan through the same chunks twice keeps nothing more, and
        // what the points kept stays.
        let region = Selection::parse("0:513,0:4097").unwrap();
        for _ in 0..2 {
            assert_eq!(read(region.clone()).await[512 * 4097 + 4096], 24);
        }
        assert_eq!(cached().await, 17);
    }

    /// The same for unsharded chunks: points in 5 chunks of 1 MiB are kept
    /// at the second asking (after a version check), served from the cache
    /// at the third.
    #[tokio::test]
    async fn small_answers_keep_unsharded_chunks_asked_for_again() {
        let dir = tempfile::tempdir().unwrap();
        let meta = json!({
            "zarr_format": 3, "node_type": "array", "shape": [1024, 5 * 1024], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1024, 1024]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes"}],
        });
        std::fs::create_dir_all(dir.path().join("u/c/0")).unwrap();
        std::fs::write(dir.path().join("u/zarr.json"), meta.to_string()).unwrap();
        for c in 0..5u8 {
            std::fs::write(dir.path().join(format!("u/c/0/{c}")), vec![c + 1; 1 << 20]).unwrap();
        }
        let (dataset, resources) = cached_dataset(dir.path());
        let points = Selection::points((0..5i64).map(|c| vec![7, c * 1024 + 3]).collect());
        let mut decoded = Vec::new();
        for _ in 0..3 {
            let plan = dataset.plan_read("u", &points).await.unwrap();
            assert_eq!(dataset.read_all(&plan).await.unwrap().0.to_vec(), [1, 2, 3, 4, 5]);
            decoded.push(resources.chunks_decoded.load(Ordering::Relaxed));
        }
        assert_eq!(decoded, [5, 10, 10], "chunks decoded after each asking");
    }

    /// Small reads of an unsharded array keep its chunks decoded too: the
    /// second read of a chunk is a hit, and a chunk rewritten since (a new
    /// version) is read again, never served stale.
    #[tokio::test]
    async fn small_reads_of_unsharded_chunks_are_cached_by_version() {
        let dir = tempfile::tempdir().unwrap();
        let meta = json!({
            "zarr_format": 3, "node_type": "array", "shape": [4, 4], "data_type": "uint8",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 9,
            "codecs": [{"name": "bytes"}],
        });
        std::fs::create_dir_all(dir.path().join("u/c/0")).unwrap();
        std::fs::write(dir.path().join("u/zarr.json"), meta.to_string()).unwrap();
        let chunk = dir.path().join("u/c/0/0");
        std::fs::write(&chunk, [1u8; 8]).unwrap();
        let resources = Arc::new(Resources::new(&ResourceOptions {
            caches: crate::engine::CacheOptions {
                decoded_chunk_bytes: 1 << 20,
                ..Default::default()
            },
            ..ResourceOptions::default()
        }));
        let store = Store::open(dir.path().to_str().unwrap(), &StoreOptions::default()).unwrap();
        let dataset = Dataset::new("t", None, store, resources.clone());
        let read = || async {
            let plan = dataset
                .plan_read("u", &Selection::parse("1:3,0").unwrap())
                .await
                .unwrap();
            dataset.read_all(&plan).await.unwrap().0.to_vec()
        };
        let stats = || {
            let s = &resources.caches().chunk_stats;
            (s.hits.load(Ordering::Relaxed), s.misses.load(Ordering::Relaxed))
        };
        // Row 1 from chunk (0, 0), row 2 from the missing chunk (1, 0).
        assert_eq!(read().await, [1, 9]);
        assert_eq!(stats(), (0, 1));
        assert_eq!(read().await, [1, 9]);
        assert_eq!(stats(), (1, 1));
        // Rewritten, with a later modification time: read again.
        std::fs::write(&chunk, [2u8; 8]).unwrap();
        let file = std::fs::File::options().write(true).open(&chunk).unwrap();
        let modified = file.metadata().unwrap().modified().unwrap();
        file.set_modified(modified + Duration::from_secs(1)).unwrap();
        assert_eq!(read().await, [2, 9]);
        assert_eq!(stats(), (1, 2));
    }

    /// A read dropped while its chunks wait for the decoding thread keeps
    /// its slab's share of the budget until the last job lets go of the
    /// slab: the bytes are still allocated until then.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_read_holds_its_budget_while_jobs_hold_its_slab() {
        let dir = tempfile::tempdir().unwrap();
        write_array(dir.path());
        let resources = Arc::new(Resources::new(&ResourceOptions {
            // One decoding job per inner chunk.
            read: ReadOptions {
                batch_bytes: 256 << 10,
                ..ReadOptions::default()
            },
            slab_budget_bytes: 4 << 20,
            slab_budget_wait: Duration::from_millis(50),
            decode_threads: 1,
            ..ResourceOptions::default()
        }));
        let store = Store::open(dir.path().to_str().unwrap(), &StoreOptions::default()).unwrap();
        let dataset = Arc::new(Dataset::new("t", None, store, resources.clone()));

        // Keep the only decoding thread busy.
        let (started, is_started) = std::sync::mpsc::channel();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let pool = resources.clone();
        let blocker = tokio::spawn(async move {
            pool.decoders
                .run(pool.ticket(), move || {
                    started.send(()).unwrap();
                    wait.recv().unwrap();
                })
                .await
        });
        is_started.recv_timeout(Duration::from_secs(5)).unwrap();

        let plan = dataset.plan_read("a", &Selection::parse("...").unwrap()).await.unwrap();
        let reader = dataset.clone();
        let read = tokio::spawn(async move { reader.read_all(&plan).await.map(|_| ()) });
        for _ in 0..500 {
            if resources.chunks_decoded() == 8 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(resources.chunks_decoded(), 8, "all eight jobs queued");
        read.abort();
        assert!(read.await.unwrap_err().is_cancelled());

        let held = resources.hold_slab_bytes(3 << 20).await;
        assert!(matches!(held, Err(Error::Overloaded(_))), "{held:?}");

        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        // The queued jobs are dropped as the thread reaches them.
        let mut held = resources.hold_slab_bytes(3 << 20).await;
        for _ in 0..100 {
            if held.is_ok() {
                break;
            }
            held = resources.hold_slab_bytes(3 << 20).await;
        }
        assert!(matches!(held, Ok(Some(_))), "{held:?}");
    }
}
