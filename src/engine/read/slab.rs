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

use super::fetch::{Item, Source, Versions};
use super::shard::{self, Piece};
use super::sink::{sink_chunk, BlockSink};
use crate::buffer_pool::{self, BufferPool};
use crate::engine::cache::ChunkKey;
use crate::engine::codec::CodecChain;
use crate::engine::decode_pool::Priority;
use crate::engine::error::{Error, Result};
use crate::engine::hierarchy::Dataset;
use crate::engine::plan::{Placement, ReadPlan, Unit};
use crate::engine::vlen::{Gather, FILL_HANDLE};

/// A chunk is decoded only up to the last element a read needs when that
/// spares at least this many bytes: a zstd block (the unit a stream stops
/// at) decodes to up to 128 KiB, so sparing less may save no work at all.
const PREFIX_SPARES_AT_LEAST: usize = 128 << 10;

/// A decoded item ready to copy.
struct Decoded {
    data: Option<Bytes>,
    placement: Placement,
    cache_as: Option<ChunkKey>,
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
        let size = match sink {
            Some(_) => 0,
            None => shape.iter().product::<u64>() as usize * meta.data_type.size(),
        };
        let held = resources.hold_slab_bytes(size).await?;
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
        let chunk_elements = plan.read_shape.iter().product::<u64>() as usize;
        let jobs = jobs(plan, slab, resources.read.batch_bytes);
        let inline = jobs.len() <= 1;
        let mut fetches = futures::stream::iter(jobs)
            .map(|job| {
                let key = self.chunk_key(plan, job.coords());
                let pin = pinned.map(|p| p.get(&key).cloned().flatten());
                async move {
                    match (&job, meta.codecs.partial_sharding()) {
                        (Job::Piece(piece), Some(codec)) => self.fetch_shard(plan, codec, key, piece, pin).await,
                        (Job::Chunk(unit), _) => self.fetch_chunk(plan, key, unit, pin).await,
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
                        if sink.is_some() {
                            // Already taken by the sink; only the cache is left to fill.
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
                                if let Some(gather) = variable.as_mut() {
                                    let handles = data.clone().map(|d| gather.add(d, chunk_elements)).transpose()?;
                                    item.placement.copy(handles.as_deref(), &plan.read_shape, &mut out, &shape, &FILL_HANDLE);
                                } else {
                                    let src = data.as_deref();
                                    item.placement.copy(src, &plan.read_shape, &mut out, &shape, &meta.fill_value);
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
                            let job = self.decode_items(fetched.codecs.clone(), batch, inline, ticket, sink.cloned(), plan);
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
        let data = match (whole, variable) {
            (Some(data), _) => data,
            (None, Some(gather)) => gather.resolve(&out, &meta.fill_value),
            (None, None) => BufferPool::into_bytes(&resources.buffers, out),
        };
        let data = match &plan.cf {
            Some(cf) => cf.decode(meta.data_type, &data)?,
            None => data,
        };
        let data = match held {
            Some(permit) => buffer_pool::holding(data, permit),
            None => data,
        };
        Ok((data, versions))
    }

    /// Decode `items` (on the decoding threads at `priority`, unless
    /// `inline`), and hand each to `sink` if there is one (then only those
    /// to cache keep their bytes).
    async fn decode_items(
        &self,
        codecs: Arc<CodecChain>,
        items: Vec<Item>,
        inline: bool,
        priority: Priority,
        sink: Option<Arc<dyn BlockSink>>,
        plan: &ReadPlan,
    ) -> Result<Vec<Decoded>> {
        let (read_shape, fill) = (plan.read_shape.clone(), plan.meta().fill_value.clone());
        let work = move || {
            let mut decoded = Vec::with_capacity(items.len());
            for item in items {
                let mut item = decode_item(&codecs, item)?;
                if let Some(sink) = &sink {
                    sink_chunk(sink.as_ref(), item.data.as_deref(), &read_shape, &item.placement, &fill)?;
                    if item.cache_as.is_none() {
                        item.data = None;
                    }
                }
                decoded.push(item);
            }
            Ok(decoded)
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

/// What one fetch of a slab reads: a chunk, or a piece of a shard.
enum Job {
    Chunk(Unit),
    Piece(Piece),
}

impl Job {
    fn coords(&self) -> &[u64] {
        match self {
            Job::Chunk(unit) => &unit.coords,
            Job::Piece(piece) => &piece.coords,
        }
    }
}

/// The fetches of slab `slab`: its chunks, or its shards in pieces of
/// about one decoding batch (`batch_bytes` decoded).
fn jobs(plan: &ReadPlan, slab: usize, batch_bytes: usize) -> Vec<Job> {
    let units = plan.units(slab);
    let codecs = &plan.meta().codecs;
    match codecs.partial_sharding() {
        None => units.into_iter().map(Job::Chunk).collect(),
        Some(codec) => {
            let inner_bytes = codec.inner_codecs().decoded_repr().size_bytes().max(1);
            let per_piece = (batch_bytes / inner_bytes).max(1);
            units
                .into_iter()
                .flat_map(|unit| shard::pieces(codec, unit, per_piece))
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
        Source::Encoded(bytes) => {
            let repr = codecs.decoded_repr();
            let elements = item.placement.prefix_elements(&repr.shape);
            let prefix = elements as usize * repr.data_type.size();
            let spared = repr.size_bytes().saturating_sub(prefix);
            if item.cache_as.is_some() || spared < PREFIX_SPARES_AT_LEAST {
                Some(codecs.decode(bytes)?)
            } else {
                Some(codecs.decode_prefix(bytes, prefix)?)
            }
        }
    };
    Ok(Decoded {
        data,
        placement: item.placement,
        cache_as: item.cache_as,
    })
}
