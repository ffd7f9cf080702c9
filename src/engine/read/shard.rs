//! The sharding codec's partial decoder: a shard's index with one ranged
//! read (validated by the codec, cached with the shard's ETag), then only
//! the needed inner chunks, by byte ranges conditional on that ETag (the
//! store coalesces near ranges). A cold shard whose inner chunks are all
//! needed is read whole in one request; else the needed inner chunks are
//! fetched in pieces of about one decoding batch each, so a read never
//! holds more encoded bytes than its pieces in flight.

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::fetch::{check_pin, Fetched, Item, Pin, Source};
use crate::engine::error::{Error, Result};
use crate::engine::format::chunk_grid::Axis;
use crate::engine::format::codec::array_to_bytes::sharding::{IndexLocation, ShardIndex, ShardingCodec};
use crate::engine::query::plan::{point_units, units, Part, ReadPlan, Unit};
use crate::engine::query::selection::{ChunkSpan, DimSelection};
use crate::engine::read::cache::{CachedIndex, Keep};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{ByteRange, StoreError};

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
    /// Which decoded inner chunks go to the decoded-chunk cache.
    keep: Keep,
}

/// The pieces of a slab's shards `units`: each shard's needed inner chunks
/// in runs of `per_piece`, or in one piece when the slab needs the whole
/// shard. With `answer` (the bytes of a whole read in one slab, the cache
/// on), the read keeps inner chunks in the decoded-chunk cache by
/// [`Keep::rule`]; one that keeps them all takes each shard in one piece,
/// so that one version check covers a shard's cached chunks.
///
/// `codec` is any shard's codec (inner chunks are alike in every shard);
/// `per_shard` gives the number of inner chunks of the shard at `coords`
/// (shards of a rectilinear grid differ).
pub(super) fn pieces(
    codec: &ShardingCodec,
    per_shard: impl Fn(&[u64]) -> usize,
    units: Vec<Unit>,
    per_piece: usize,
    answer: Option<u64>,
) -> Vec<Piece> {
    let shards: Vec<(Vec<u64>, Vec<Unit>)> = units
        .into_iter()
        .map(|unit| {
            let needed = inner_units(codec, &unit);
            (unit.coords, needed)
        })
        .collect();
    let chunks = shards.iter().map(|(_, needed)| needed.len() as u64).sum();
    let keep = Keep::rule(answer, chunks, codec.inner_codecs().decoded_repr());
    let per_piece = if keep == Keep::All { usize::MAX } else { per_piece };
    shards
        .into_iter()
        .flat_map(|(coords, needed)| {
            let whole = needed.len() == per_shard(&coords);
            split(needed, if whole { usize::MAX } else { per_piece }).map(move |needed| Piece {
                coords: coords.clone(),
                needed,
                whole,
                keep,
            })
        })
        .collect()
}

/// `needed` in runs of `per_piece` (at least one run).
fn split(needed: Vec<Unit>, per_piece: usize) -> impl Iterator<Item = Vec<Unit>> {
    let mut needed = needed.into_iter().peekable();
    let mut first = true;
    std::iter::from_fn(move || {
        let more = std::mem::take(&mut first) || needed.peek().is_some();
        more.then(|| needed.by_ref().take(per_piece).collect())
    })
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
                // The shard changed since its index was cached: drop it, and
                // read again unless the read is pinned to the old version.
                Err(changed @ Error::Store(StoreError::Changed(_))) if attempt == 0 => {
                    let cache_key = (self.scope.clone(), key.clone());
                    self.resources.caches.shard_indexes.invalidate(&cache_key).await;
                    if pin.is_some() {
                        return Err(changed);
                    }
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

    /// The shard's version (ETag): a cached index's, confirmed by a `head`
    /// (a shard rewritten since is read again: its index is dropped), or
    /// that of the index read now.
    pub(super) async fn shard_version(&self, key: &str, codec: &ShardingCodec) -> Result<Option<String>> {
        if let Some(cached) = self.cached_index(key).await {
            if self.current_version(key).await? == Some(cached.etag.clone()) {
                return Ok(cached.etag.clone());
            }
            let cache_key = (self.scope.clone(), key.to_string());
            self.resources.caches.shard_indexes.invalidate(&cache_key).await;
        }
        Ok(self.fetch_index(key, codec, None).await?.and_then(|c| c.etag.clone()))
    }

    async fn cached_index(&self, key: &str) -> Option<Arc<CachedIndex>> {
        let caches = &self.resources.caches;
        let cached = caches.shard_indexes.get(&(self.scope.clone(), key.to_string())).await;
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
        let cache_key = (self.scope.clone(), key.to_string());
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
        let cache_key = (self.scope.clone(), key.to_string());
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

    /// The needed inner chunks by byte ranges, conditional on the index's
    /// ETag. When nothing is fetched (every chunk cached or empty) and the
    /// index came from the cache, the shard's version is confirmed instead.
    async fn fetch_inner_chunks(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: &str,
        cached: Option<Arc<CachedIndex>>,
        piece: &Piece,
        pin: Pin,
    ) -> Result<(Option<String>, Vec<Item>)> {
        let (index, fresh) = match (cached, &pin) {
            (Some(c), None) => (Some(c), false),
            (Some(c), Some(p)) if c.etag == *p => (Some(c), false),
            // Pinned to no version: absent then, or a store without ETags.
            (None, Some(None)) | (None, None) => (self.load_index(key, codec).await?, true),
            _ => {
                let pinned = pin.as_ref().and_then(|p| p.as_deref());
                (self.fetch_index(key, codec, pinned).await?, true)
            }
        };
        let Some(index) = index else {
            check_pin(key, &pin, None)?;
            return Ok((None, piece.needed.iter().map(|u| Item::fill(plan, u)).collect()));
        };
        check_pin(key, &pin, Some(&index.etag))?;
        let (mut items, ranges) = self.items_of(plan, codec, key, &index, piece).await;
        if !ranges.is_empty() {
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
        } else if !fresh && index.etag.is_some() && pin.is_none() {
            // No conditional read vouches for the cached index (and the
            // cached chunks): ask for the shard's version. A pinned read
            // needs no asking: its pin was confirmed when the answer was
            // named (`shard_version`), and the cached chunks are that
            // version's.
            self.confirm_version(key, index.etag.as_deref()).await?;
        }
        Ok((index.etag.clone(), items))
    }

    /// The items of `piece` by `index`: each from the decoded-chunk cache
    /// (when the piece is kept and the index has a version), the fill value
    /// (an empty inner chunk), or a byte range still to fetch, returned
    /// with the item's position.
    async fn items_of(
        &self,
        plan: &ReadPlan,
        codec: &ShardingCodec,
        key: &str,
        index: &CachedIndex,
        piece: &Piece,
    ) -> (Vec<Item>, Vec<(usize, Range<u64>)>) {
        let caches = &self.resources.caches;
        let etag = index.etag.as_ref().filter(|_| piece.keep != Keep::Never);
        let mut items = Vec::with_capacity(piece.needed.len());
        let mut ranges = Vec::new();
        for u in &piece.needed {
            let linear = codec.linear_index(&u.coords);
            let mut cache_as = etag.map(|etag| (self.scope.clone(), key.to_string(), linear, etag.clone()));
            let hit = match &cache_as {
                Some(k) => caches.decoded_chunks.get(k).await,
                None => None,
            };
            if cache_as.is_some() {
                let stats = &caches.chunk_stats;
                if hit.is_some() { &stats.hits } else { &stats.misses }.fetch_add(1, Ordering::Relaxed);
            }
            let source = match (hit, index.index.chunk_range(linear)) {
                (Some(data), _) => {
                    cache_as = None;
                    Source::Decoded(data)
                }
                (None, Some(range)) => {
                    if piece.keep == Keep::Hot && !caches.offer(&self.scope, key, linear) {
                        cache_as = None;
                    }
                    ranges.push((items.len(), range));
                    Source::Fill // replaced by the fetched bytes
                }
                (None, None) => Source::Fill,
            };
            items.push(Item {
                source,
                placement: u.part.placement(&plan.read_shape),
                cache_as,
            });
        }
        (items, ranges)
    }

    /// [`StoreError::Changed`] unless `key` still has the version `etag`.
    async fn confirm_version(&self, key: &str, etag: Option<&str>) -> Result<()> {
        // Missing and without a version read alike, as when pinned.
        let current = self.current_version(key).await?.flatten();
        if current.as_deref() != etag {
            return Err(Error::Store(StoreError::Changed(key.to_string())));
        }
        Ok(())
    }

    /// The version of `key` now (one HEAD): `None` when it is missing,
    /// `Some(None)` when its store gives no versions.
    async fn current_version(&self, key: &str) -> Result<Option<Option<String>>> {
        Ok(self.store.head(key).await?.map(|info| info.etag))
    }
}

/// The inner chunks of `unit` (a shard) that the plan needs, with the
/// parts of them it takes.
fn inner_units(codec: &ShardingCodec, unit: &Unit) -> Vec<Unit> {
    let inner_shape = codec.inner_shape();
    match &unit.part {
        Part::Points(points) => {
            let axes: Vec<Axis> = inner_shape.iter().map(|&n| Axis::Regular(n)).collect();
            point_units(points.iter().map(|(out, p)| (*out, &p[..])), &axes)
        }
        Part::Spans(dims) => {
            let inner_spans: Vec<Vec<ChunkSpan>> = dims
                .iter()
                .zip(inner_shape)
                .map(|(spans, &inner)| {
                    spans
                        .iter()
                        .flat_map(|span| {
                            DimSelection::strided(span.start_in_chunk, span.step, span.count)
                                .chunk_spans(&Axis::Regular(inner), 0..span.count)
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
