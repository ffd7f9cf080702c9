//! The process's limits and pools, built once from config at start-up and
//! shared by every dataset: no limit or pool lives in a `static`, so tests
//! build their own with the sizes they need.
//!
//! - the read tuning ([`ReadOptions`]): slab size, range coalescing,
//!   concurrency within a read;
//! - the caches ([`Caches`]): node metadata, shard indexes, decoded chunks;
//! - read slots: region reads in flight at once (others wait, then fail as
//!   overloaded);
//! - the slab budget: decoded slab bytes held at once across all reads,
//!   and as much again for answers made whole (maps, EDR values);
//! - the decoding threads ([`DecodePool`]) and the tickets that order their
//!   jobs slab by slab;
//! - the buffer pool ([`BufferPool`]): large buffers reused across reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::buffer_pool::BufferPool;
use crate::engine::error::{Error, Result};
use crate::engine::query::plan::ReadOptions;
use crate::engine::read::cache::{CacheOptions, Caches};
use crate::engine::read::decode_pool::{DecodePool, Priority};

/// The sizes of every limit and pool; each is a config key (see the README).
#[derive(Debug, Clone)]
pub struct ResourceOptions {
    /// Tuning of region reads.
    pub read: ReadOptions,
    /// Cache sizes and lifetimes.
    pub caches: CacheOptions,
    /// Region reads in flight at once (`max_concurrent_reads`).
    pub max_concurrent_reads: usize,
    /// How long a read waits for a slot before it fails as overloaded (`read_slot_wait_secs`).
    pub read_slot_wait: Duration,
    /// Decoded slab bytes the whole process holds at once (`slab_budget_bytes`).
    pub slab_budget_bytes: usize,
    /// How long a slab waits for its share of the budget before its read
    /// fails as overloaded (`slab_budget_wait_secs`).
    pub slab_budget_wait: Duration,
    /// Slab bytes one streamed response holds at once (`stream_bytes_in_flight`).
    pub stream_bytes_in_flight: u64,
    /// Decoding threads; 0 = one per core (`decode_threads`).
    pub decode_threads: usize,
    /// Idle bytes the buffer pool keeps at most (`buffer_pool_bytes`).
    pub buffer_pool_bytes: usize,
    /// Poison reused buffers so tests see any byte a read fails to write.
    pub check_buffer_reuse: bool,
}

impl Default for ResourceOptions {
    fn default() -> Self {
        Self {
            read: ReadOptions::default(),
            caches: CacheOptions::default(),
            max_concurrent_reads: 16,
            read_slot_wait: Duration::from_secs(5),
            slab_budget_bytes: 256 << 20,
            slab_budget_wait: Duration::from_secs(10),
            stream_bytes_in_flight: 96 << 20,
            decode_threads: 0,
            buffer_pool_bytes: 64 << 20,
            check_buffer_reuse: false,
        }
    }
}

/// Slabs smaller than this take no share of the slab budget, so small
/// reads (tiles) never queue behind large ones.
const SLAB_BUDGET_MIN: usize = 1 << 20;

/// The limits and pools of one process (or one test).
#[derive(Debug)]
pub struct Resources {
    pub(crate) read: ReadOptions,
    pub(crate) caches: Caches,
    /// Bounds the region reads in flight, and so the decoded bytes they
    /// hold under a flood of large requests.
    read_slots: Arc<Semaphore>,
    read_slot_wait: Duration,
    /// Slab bytes held across all reads, in KiB: with many large reads at
    /// once, memory stays bounded by this rather than by the number of
    /// reads times their slabs.
    slab_budget: Arc<Semaphore>,
    /// Answers drawn or written whole (maps, EDR values), in KiB: as much
    /// again as the slab budget, apart from it, so that an answer holding
    /// its share never waits on the slabs of its own read.
    answer_budget: Arc<Semaphore>,
    slab_budget_kib: usize,
    slab_budget_wait: Duration,
    pub(crate) stream_bytes_in_flight: u64,
    pub(crate) decoders: DecodePool,
    /// The next decoding ticket: slabs decode in the order they started.
    tickets: AtomicU64,
    pub(crate) buffers: Arc<BufferPool>,
    /// Encoded chunks handed to the decoders, ever.
    pub(crate) chunks_decoded: AtomicU64,
}

impl Resources {
    /// Encoded chunks (or inner chunks) decoded since the start.
    pub fn chunks_decoded(&self) -> u64 {
        self.chunks_decoded.load(Ordering::Relaxed)
    }

    /// Build every pool and limit from `options` (starts the decoding threads).
    pub fn new(options: &ResourceOptions) -> Self {
        let threads = match options.decode_threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        let buffers = if options.check_buffer_reuse {
            BufferPool::checking(options.buffer_pool_bytes)
        } else {
            BufferPool::new(options.buffer_pool_bytes)
        };
        let slab_budget_kib = (options.slab_budget_bytes >> 10).max(1);
        Self {
            read: options.read.clone(),
            caches: Caches::new(&options.caches),
            read_slots: Arc::new(Semaphore::new(options.max_concurrent_reads.max(1))),
            read_slot_wait: options.read_slot_wait,
            slab_budget: Arc::new(Semaphore::new(slab_budget_kib)),
            answer_budget: Arc::new(Semaphore::new(slab_budget_kib)),
            slab_budget_kib,
            slab_budget_wait: options.slab_budget_wait,
            stream_bytes_in_flight: options.stream_bytes_in_flight,
            decoders: DecodePool::start(threads),
            tickets: AtomicU64::new(0),
            chunks_decoded: AtomicU64::new(0),
            buffers: Arc::new(buffers),
        }
    }

    /// The slab budget's size (`slab_budget_bytes`): the most decoded bytes
    /// an answer read whole may hold.
    pub fn slab_budget_bytes(&self) -> u64 {
        (self.slab_budget_kib as u64) << 10
    }

    /// The caches, for reporting.
    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    /// The buffer pool that stores read local files into.
    pub fn buffers(&self) -> Arc<BufferPool> {
        self.buffers.clone()
    }

    /// A slot for one region read, held until the returned permit is
    /// dropped; [`Error::Overloaded`] if none frees up in time.
    pub(crate) async fn admit_read(&self) -> Result<OwnedSemaphorePermit> {
        tokio::time::timeout(self.read_slot_wait, self.read_slots.clone().acquire_owned())
            .await
            .map_err(|_| Error::Overloaded("too many region reads in flight; retry shortly".into()))
            .map(|permit| permit.expect("read slots are never closed"))
    }

    /// The decoding priority of a slab that starts now: after every slab
    /// started before.
    pub(crate) fn ticket(&self) -> Priority {
        self.tickets.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserve `size` bytes of the slab budget (at most all of it) until
    /// the returned permit is dropped with the slab's bytes; nothing for
    /// small slabs. Fails as overloaded after the budget wait, so clients
    /// that stop reading cannot stall the others for ever.
    pub(crate) async fn hold_slab_bytes(&self, size: usize) -> Result<Option<OwnedSemaphorePermit>> {
        self.hold(&self.slab_budget, size).await
    }

    /// Reserve `size` bytes for an answer held whole while it is made (a
    /// map's pixels, an EDR answer's values), from a budget of
    /// `slab_budget_bytes` apart from the slabs' (its reads take slabs of
    /// their own); as [`Resources::hold_slab_bytes`] otherwise.
    pub(crate) async fn hold_answer_bytes(&self, size: usize) -> Result<Option<OwnedSemaphorePermit>> {
        self.hold(&self.answer_budget, size).await
    }

    async fn hold(&self, budget: &Arc<Semaphore>, size: usize) -> Result<Option<OwnedSemaphorePermit>> {
        if size < SLAB_BUDGET_MIN {
            return Ok(None);
        }
        let kib = size.div_ceil(1 << 10).clamp(1, self.slab_budget_kib) as u32;
        match tokio::time::timeout(self.slab_budget_wait, budget.clone().acquire_many_owned(kib)).await {
            Ok(permit) => Ok(Some(permit.expect("budgets are never closed"))),
            Err(_) => Err(Error::Overloaded(
                "memory for decoded data is held by other responses; retry shortly".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Resources {
        Resources::new(&ResourceOptions {
            slab_budget_bytes: 4 << 20,
            slab_budget_wait: Duration::from_millis(50),
            max_concurrent_reads: 1,
            read_slot_wait: Duration::from_millis(50),
            decode_threads: 1,
            ..ResourceOptions::default()
        })
    }

    #[tokio::test]
    async fn the_slab_budget_bounds_held_bytes_and_times_out() {
        let resources = small();
        assert!(
            resources.hold_slab_bytes(1000).await.unwrap().is_none(),
            "small slabs are free"
        );
        let first = resources.hold_slab_bytes(3 << 20).await.unwrap();
        let waited = resources.hold_slab_bytes(2 << 20).await;
        assert!(matches!(waited, Err(Error::Overloaded(_))), "{waited:?}");
        drop(first);
        // Larger than the whole budget: takes all of it, not for ever.
        assert!(resources.hold_slab_bytes(64 << 20).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn answers_never_wait_on_the_slabs_of_their_reads() {
        let resources = small();
        let answer = resources.hold_answer_bytes(64 << 20).await.unwrap();
        assert!(answer.is_some(), "the whole answer budget");
        // Its read still gets slabs; another whole answer waits, then fails.
        assert!(resources.hold_slab_bytes(3 << 20).await.unwrap().is_some());
        let waited = resources.hold_answer_bytes(2 << 20).await;
        assert!(matches!(waited, Err(Error::Overloaded(_))), "{waited:?}");
        drop(answer);
        assert!(resources.hold_answer_bytes(2 << 20).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn read_slots_bound_reads_in_flight() {
        let resources = small();
        let slot = resources.admit_read().await.unwrap();
        assert!(matches!(resources.admit_read().await, Err(Error::Overloaded(_))));
        drop(slot);
        assert!(resources.admit_read().await.is_ok());
    }

    #[test]
    fn tickets_increase() {
        let resources = small();
        let a = resources.ticket();
        assert!(resources.ticket() > a);
    }
}
