//! The sharding codec's partial decoder: a shard's index with one ranged
//! read (validated by the codec, cached with the shard's ETag), then only
//! the needed inner chunks, by byte ranges conditional on that ETag (the
//! store coalesces near ranges). A cold shard whose inner chunks are all
//! needed is read whole in one request; else the needed inner chunks are
//! fetched in pieces of about one decoding batch each, so a read never
//! holds more encoded bytes than its pieces in flight.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fetch::{check_pin, Fetched, Item, Pin, Source};
use crate::engine::cache::CachedIndex;
use crate::engine::codec::array_to_bytes::sharding::{IndexLocation, ShardIndex, ShardingCodec};
use crate::engine::error::{Error, Result};
use crate::engine::hierarchy::Dataset;
use crate::engine::plan::{point_units, units, Part, ReadPlan, Unit};
use crate::engine::selection::{ChunkSpan, DimSelection};
use crate::storage::{ByteRange, StoreError};

/// Reads that decode at most this many bytes of inner chunks keep them in
/// the decoded-chunk cache (a tile, a few points). Larger reads would only
/// evict what small reads reuse, and would decode whole chunks where a
/// prefix would do.
const CACHEABLE_READ_BYTES: u64 = 4 << 20;

/// Some of the inner chunks of one shard that a slab needs, fetched and
/// decoded together.
pub(super) struct Piece {
    /// The shard's grid position.
    pub(super) coords: Vec<u64>,
    /// The inner chunks, with the parts of them the slab takes.
    needed: Vec<Unit>,
    /// Every inner chunk of the shard is needed (then this is the only
    /// piece, and a cold shard is read whole).
    whole: bool,
    /// Whether the decoded inner chunks go to the decoded-chunk cache
    /// ([`keep_small_reads`]).
    keep: bool,
}

/// The pieces of shard `unit` for a slab: its needed inner chunks in runs
/// of `per_piece`, or one piece when the slab needs the whole shard.
pub(super) fn pieces(codec: &ShardingCodec, unit: Unit, per_piece: usize) -> Vec<Piece> {
    let needed = inner_units(codec, &unit);
    let whole = needed.len() as u64 == codec.chunks_per_shard().iter().product::<u64>();
    if whole || needed.len() <= per_piece {
        return vec![Piece {
            coords: unit.coords,
            needed,
            whole,
            keep: false,
        }];
    }
    let mut needed = needed.into_iter().peekable();
    let mut pieces = Vec::new();
    while needed.peek().is_some() {
        pieces.push(Piece {
            coords: unit.coords.clone(),
            needed: needed.by_ref().take(per_piece).collect(),
            whole: false,
            keep: false,
        });
    }
    pieces
}

/// Mark the pieces of a whole read (`pieces` of its only slab) for the
/// decoded-chunk cache when the read decodes at most
/// [`CACHEABLE_READ_BYTES`] of inner chunks.
pub(super) fn keep_small_reads(codec: &ShardingCodec, pieces: &mut [Piece]) {
    let inner_bytes = codec.inner_codecs().decoded_repr().size_bytes() as u64;
    let chunks: u64 = pieces.iter().map(|p| p.needed.len() as u64).sum();
    let keep = chunks.saturating_mul(inner_bytes) <= CACHEABLE_READ_BYTES;
    for piece in pieces {
        piece.keep = keep;
    }
}

impl Dataset {
    /// A piece of a shard: the index (cached), then only its inner chunks;
    /// once more with a fresh index if the shard changed since it was cached.
    pub(super) async fn fetch_shard(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: String,
        piece: &Piece,
        pin: Pin,
    ) -> Result<Fetched> {
        for attempt in 0..2 {
            let result = match self.cached_index(&key).await {
                None if piece.whole && pin.is_none() => self.fetch_whole_shard(plan, codec, &key, &piece.needed).await,
                cached => {
                    self.fetch_inner_chunks(plan, codec, &key, cached, piece, pin.clone())
                        .await
                }
            };
            match result {
                // The shard changed since its index was cached: drop it and read again.
                Err(Error::Store(StoreError::Changed(_))) if attempt == 0 && pin.is_none() => {
                    let cache_key = (self.name.clone(), key.clone());
                    self.resources.caches.shard_indexes.invalidate(&cache_key).await;
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

    /// The shard's version (ETag), from its cached index or by reading the index.
    pub(super) async fn shard_version(&self, key: &str, codec: &ShardingCodec) -> Result<Option<String>> {
        Ok(match self.cached_index(key).await {
            Some(cached) => cached.etag.clone(),
            None => self.fetch_index(key, codec, None).await?.and_then(|c| c.etag.clone()),
        })
    }

    async fn cached_index(&self, key: &str) -> Option<Arc<CachedIndex>> {
        let caches = &self.resources.caches;
        let cached = caches.shard_indexes.get(&(self.name.clone(), key.to_string())).await;
        let stats = &caches.index_stats;
        if cached.is_some() { &stats.hits } else { &stats.misses }.fetch_add(1, Ordering::Relaxed);
        cached
    }

    /// [`Self::read_index`], cached on the way.
    async fn fetch_index(
        &self,
        key: &str,
        codec: &ShardingCodec,
        pin: Option<&str>,
    ) -> Result<Option<Arc<CachedIndex>>> {
        Ok(match self.read_index(key, codec, pin).await? {
            Some(read) => Some(self.remember_index(key, read.index, read.etag).await),
            None => None,
        })
    }

    /// The shard's index with one ranged request (conditional on `pin`);
    /// `None` when the shard does not exist.
    async fn read_index(&self, key: &str, codec: &ShardingCodec, pin: Option<&str>) -> Result<Option<CachedIndex>> {
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
        Ok(Some(CachedIndex {
            index,
            etag: read.info.etag,
        }))
    }

    /// The shard's index, read once however many pieces of a read ask for
    /// it at the same time (they wait for the first one's request).
    async fn load_index(&self, key: &str, codec: &ShardingCodec) -> Result<Option<Arc<CachedIndex>>> {
        let cache_key = (self.name.clone(), key.to_string());
        let load = async {
            match self.read_index(key, codec, None).await {
                Ok(Some(index)) => Ok(Arc::new(index)),
                Ok(None) => Err(None),
                Err(e) => Err(Some(e)),
            }
        };
        match self.resources.caches.shard_indexes.try_get_with(cache_key, load).await {
            Ok(index) => Ok(Some(index)),
            Err(failed) => match &*failed {
                None => Ok(None),
                Some(e) => Err(e.clone()),
            },
        }
    }

    async fn remember_index(&self, key: &str, index: ShardIndex, etag: Option<String>) -> Arc<CachedIndex> {
        let cached = Arc::new(CachedIndex { index, etag });
        let cache_key = (self.name.clone(), key.to_string());
        self.resources
            .caches
            .shard_indexes
            .insert(cache_key, cached.clone())
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
            return Ok((None, needed.iter().map(|u| Item::fill(plan, u)).collect()));
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
        let cached = self.remember_index(key, index, read.info.etag.clone()).await;
        let items = needed
            .iter()
            .map(|u| {
                let source = match cached.index.chunk_range(codec.linear_index(&u.coords)) {
                    Some(r) => Source::Encoded(read.data.slice(r.start as usize..r.end as usize)),
                    None => Source::Fill,
                };
                Item {
                    source,
                    placement: u.part.placement(&plan.read_shape),
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
        piece: &Piece,
        pin: Pin,
    ) -> Result<(Option<String>, Vec<Item>)> {
        let needed = &piece.needed;
        let index = match (cached, &pin) {
            (Some(c), None) => Some(c),
            (Some(c), Some(p)) if c.etag == *p => Some(c),
            (_, Some(None)) => None,
            (None, None) => self.load_index(key, codec).await?,
            _ => {
                self.fetch_index(key, codec, pin.as_ref().and_then(|p| p.as_deref()))
                    .await?
            }
        };
        let Some(index) = index else {
            check_pin(key, &pin, None)?;
            return Ok((None, needed.iter().map(|u| Item::fill(plan, u)).collect()));
        };
        check_pin(key, &pin, Some(&index.etag))?;
        // Small reads of an unchanged shard may find inner chunks already decoded.
        let caches = &self.resources.caches;
        let cacheable =
            piece.keep && caches.decoded_chunks.policy().max_capacity().unwrap_or(0) > 0 && index.etag.is_some();
        let mut items = Vec::with_capacity(needed.len());
        let mut ranges = Vec::new();
        for u in needed {
            let linear = codec.linear_index(&u.coords);
            let cache_as = cacheable.then(|| {
                let etag = index.etag.clone().unwrap_or_default();
                (self.name.clone(), key.to_string(), linear, etag)
            });
            let hit = match &cache_as {
                Some(k) => caches.decoded_chunks.get(k).await,
                None => None,
            };
            if cacheable {
                let stats = &caches.chunk_stats;
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
                placement: u.part.placement(&plan.read_shape),
                cache_as,
            });
        }
        if ranges.is_empty() && items.iter().any(|i| matches!(i.source, Source::Decoded(_))) {
            // Nothing to fetch, so no conditional read vouches for the hits.
            self.confirm_version(key, index.etag.as_deref()).await?;
        } else if !ranges.is_empty() {
            let asked: Vec<_> = ranges.iter().map(|(_, r)| r.clone()).collect();
            let fetched = self
                .store
                .get_ranges(key, &asked, index.etag.as_deref())
                .await?
                .ok_or_else(|| Error::Store(StoreError::Changed(key.to_string())))?;
            for ((i, r), data) in ranges.into_iter().zip(fetched) {
                if data.len() as u64 != r.end - r.start {
                    return Err(Error::corrupt(key, "shard is shorter than its index says"));
                }
                items[i].source = Source::Encoded(data);
            }
        }
        Ok((index.etag.clone(), items))
    }

    /// [`StoreError::Changed`] unless `key` still has the version `etag`.
    async fn confirm_version(&self, key: &str, etag: Option<&str>) -> Result<()> {
        let current = self.store.head(key).await?.and_then(|info| info.etag);
        match current.as_deref() == etag {
            true => Ok(()),
            false => Err(Error::Store(StoreError::Changed(key.to_string()))),
        }
    }
}

/// The inner chunks of `unit` (a shard) that the plan needs, with the
/// parts of them it takes.
fn inner_units(codec: &ShardingCodec, unit: &Unit) -> Vec<Unit> {
    let inner_shape = codec.inner_shape();
    match &unit.part {
        Part::Points(points) => point_units(points.iter().map(|(out, p)| (*out, &p[..])), inner_shape),
        Part::Spans(dims) => {
            let inner_spans: Vec<Vec<ChunkSpan>> = dims
                .iter()
                .zip(inner_shape)
                .map(|(spans, &inner)| {
                    spans
                        .iter()
                        .flat_map(|span| {
                            DimSelection::strided(span.start_in_chunk, span.step, span.count)
                                .chunk_spans(inner, 0..span.count)
                                .into_iter()
                                .map(|s| ChunkSpan {
                                    out_start: s.out_start + span.out_start,
                                    ..s
                                })
                        })
                        .collect()
                })
                .collect();
            units(&inner_spans)
        }
    }
}
