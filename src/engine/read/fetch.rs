//! Where a chunk's bytes come from, and the read of an unsharded chunk.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::engine::error::{Error, Result};
use crate::engine::format::codec::CodecChain;
use crate::engine::query::plan::{Placement, ReadPlan, Unit};
use crate::engine::read::cache::{ChunkKey, Keep};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::{ByteRange, StoreError};

/// The store versions (ETags) of every key a read used; `None` = absent.
pub type Versions = BTreeMap<String, Option<String>>;

/// The version a read must find for one key: `None` = any,
/// `Some(None)` = the key must be absent.
pub(super) type Pin = Option<Option<String>>;

/// Where a chunk's bytes come from.
pub(super) enum Source {
    /// Never written: the fill value.
    Fill,
    /// Encoded bytes, to decode with the unit's codecs.
    Encoded(Bytes),
    /// Already decoded (a decoded-chunk cache hit).
    Decoded(Bytes),
}

/// One chunk (or inner chunk) a slab needs, and where its part goes.
pub(super) struct Item {
    pub(super) source: Source,
    pub(super) placement: Placement,
    /// Where to keep the decoded chunk, for small reads with the cache on.
    pub(super) cache_as: Option<ChunkKey>,
}

impl Item {
    /// The fill value for `unit`'s part of the output.
    pub(super) fn fill(plan: &ReadPlan, unit: &Unit) -> Self {
        Item {
            source: Source::Fill,
            placement: unit.part.placement(&plan.read_shape),
            cache_as: None,
        }
    }
}

/// One unit (chunk or shard) after its I/O: the items to decode with
/// `codecs` and copy, and the version of the key read.
pub(super) struct Fetched {
    pub(super) key: String,
    pub(super) version: Option<String>,
    pub(super) codecs: Arc<CodecChain>,
    pub(super) items: Vec<Item>,
}

impl Dataset {
    /// An unsharded chunk: read whole. A chunk `keep` marks (one of a
    /// small read's; one a small answer missed before: [`Keep`]) comes from
    /// the decoded-chunk cache when the store still has the version it was
    /// decoded from (the version the read is pinned to, else a `head`: a
    /// stat on local disks), and is offered to it once decoded.
    pub(super) async fn fetch_chunk(
        &self,
        plan: &ReadPlan,
        key: String,
        unit: &Unit,
        pin: Pin,
        keep: Keep,
    ) -> Result<Fetched> {
        let codecs = plan.meta().codecs_at(&unit.coords).clone();
        let placement = unit.part.placement(&codecs.decoded_repr().shape);
        let one = |key, version, source, cache_as| Fetched {
            key,
            version,
            codecs: codecs.clone(),
            items: vec![Item {
                source,
                placement: placement.clone(),
                cache_as,
            }],
        };
        let caches = &self.resources.caches;
        let look = match keep {
            Keep::Hot => caches.missed_before(&self.scope, &key, WHOLE_CHUNK),
            keep => keep == Keep::All,
        };
        let cache_key = match (&pin, look) {
            (_, false) => None,
            // Pinned to a version: the cache holds that one or none (no
            // version pins to absent, or to a store without ETags: read).
            (Some(version), true) => version
                .clone()
                .map(|etag| (self.scope.clone(), key.clone(), WHOLE_CHUNK, etag)),
            (None, true) => match self.store.head(&key).await? {
                // Never written: the fill value, without asking again.
                None => return Ok(one(key, None, Source::Fill, None)),
                // No version (a store without ETags): nothing to key by.
                Some(info) => info
                    .etag
                    .map(|etag| (self.scope.clone(), key.clone(), WHOLE_CHUNK, etag)),
            },
        };
        if let Some(cache_key) = &cache_key {
            let hit = caches.decoded_chunks.get(cache_key).await;
            let stats = &caches.chunk_stats;
            if hit.is_some() { &stats.hits } else { &stats.misses }.fetch_add(1, Ordering::Relaxed);
            if let Some(data) = hit {
                return Ok(one(key, Some(cache_key.3.clone()), Source::Decoded(data), None));
            }
        }
        let read = self
            .store
            .get(&key, ByteRange::All, pin.as_ref().and_then(|p| p.as_deref()))
            .await?;
        check_pin(&key, &pin, read.as_ref().map(|r| &r.info.etag))?;
        Ok(match read {
            None => one(key, None, Source::Fill, None),
            Some(read) => {
                // Kept under the version this read saw.
                let offer = match keep {
                    Keep::Hot => caches.offer(&self.scope, &key, WHOLE_CHUNK),
                    keep => keep == Keep::All,
                };
                let cache_as = (cache_key.is_some() && offer)
                    .then(|| read.info.etag.clone())
                    .flatten()
                    .map(|etag| (self.scope.clone(), key.clone(), WHOLE_CHUNK, etag));
                one(key, read.info.etag, Source::Encoded(read.data), cache_as)
            }
        })
    }
}

/// The position in a [`ChunkKey`] of a whole (unsharded) chunk.
const WHOLE_CHUNK: usize = usize::MAX;

/// A read pinned to a version must find exactly that version.
pub(super) fn check_pin(key: &str, pin: &Pin, found: Option<&Option<String>>) -> Result<()> {
    match pin {
        Some(expected) if found.cloned().flatten() != *expected => {
            Err(Error::Store(StoreError::Changed(key.to_string())))
        }
        _ => Ok(()),
    }
}
