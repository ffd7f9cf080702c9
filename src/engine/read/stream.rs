//! A multi-slab read as a stream of slabs, for responses sent while they
//! are read.
//!
//! Slab bytes a stream holds at once are bounded by the
//! `stream_bytes_in_flight` limit: two slabs in flight (one written while
//! the next is read) when they fit, else one. A slab's slot is released only
//! when the consumer drops its bytes (for a response: when the server has
//! written the frame), so memory stays within that however fast the reads
//! are (measurements in BENCHMARKS.md).

use std::sync::Arc;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;

use super::fetch::Versions;
use crate::buffer_pool;
use crate::engine::error::{Error, Result};
use crate::engine::query::plan::ReadPlan;
use crate::engine::read::hierarchy::Dataset;

impl Dataset {
    /// The slabs of `plan` in order, each read pinned to `versions` (a key
    /// that changed fails the stream). Each slab is read by a task of its
    /// own, so reading goes on while the consumer is busy with the previous
    /// slab; dropping the stream aborts the reads in flight.
    pub(crate) fn slab_stream(
        &self,
        plan: ReadPlan,
        versions: Versions,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        let limit = self.resources.stream_bytes_in_flight;
        let in_flight = (limit / plan.max_slab_bytes().max(1)).clamp(1, 2) as usize;
        let slots = Arc::new(Semaphore::new(in_flight));
        let count = plan.slab_count();
        let shared = Arc::new((self.clone(), plan, versions));
        // Slots are taken in slab order, and a slab's decoding ticket once
        // it holds its slot (spawned tasks may start in any order).
        let resources = self.resources.clone();
        futures::stream::iter(0..count)
            .then(move |slab| {
                let (slots, resources) = (slots.clone(), resources.clone());
                async move {
                    let slot = slots.acquire_owned().await.expect("never closed");
                    (slab, slot, resources.ticket())
                }
            })
            .map(move |(slab, slot, ticket)| {
                let shared = shared.clone();
                AbortOnDropHandle::new(tokio::spawn(async move {
                    let (dataset, plan, versions) = &*shared;
                    let (data, _) = dataset.read_slab(plan, slab, Some(versions), ticket, None).await?;
                    // The slot is free again when the consumer drops the bytes.
                    Ok::<_, Error>(buffer_pool::holding(data, slot))
                }))
            })
            .buffered(in_flight)
            .map(|joined| joined.unwrap_or_else(|e| Err(Error::Internal(format!("a slab read failed: {e}")))))
    }
}
