//! Reused large buffers: output slabs, the bytes read from local files, and
//! the chunks a write builds and encodes.
//!
//! A fresh multi-megabyte buffer costs a page fault and a page clear per
//! 4 KiB (or per huge page) on first touch: about a tenth of the CPU of a
//! bulk read in profiles. Such buffers are instead taken from a
//! [`BufferPool`] and given back when the last reference to their bytes is
//! dropped (after the HTTP layer has written a slab, after the chunks of a
//! read are decoded, after a written chunk is stored).
//!
//! A pooled buffer keeps the bytes of its previous use: a slab must write
//! every byte it hands out, which read planning guarantees (every output
//! element lies in exactly one chunk block, fill included). A pool built
//! with [`BufferPool::checking`] (debug builds, interop tests) poisons
//! reused buffers to catch a gap.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Buffers smaller than this are allocated as usual.
pub(crate) const MIN_POOLED_BYTES: usize = 1 << 20;

/// Buffers a checking pool pools (almost all, so tests exercise reuse).
const MIN_POOLED_CHECKING: usize = 256;

/// Idle buffers a pool keeps at most, whatever their bytes.
const MAX_IDLE_BUFFERS: usize = 32;

/// A pool of idle large buffers, bounded in bytes.
#[derive(Debug)]
pub struct BufferPool {
    idle: Mutex<Vec<Vec<u8>>>,
    /// Idle bytes kept at most; larger buffers are never kept.
    max_idle_bytes: usize,
    /// Pool almost every buffer and poison reused ones (see [`BufferPool::checking`]).
    checking: bool,
}

impl BufferPool {
    /// A pool that keeps at most `max_idle_bytes` of idle buffers (debug
    /// builds check reuse, as [`BufferPool::checking`]).
    pub fn new(max_idle_bytes: usize) -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            max_idle_bytes,
            checking: cfg!(debug_assertions),
        }
    }

    /// A pool that pools almost every buffer and fills each reused one with
    /// a poison byte, so that tests reading through it see any byte a slab
    /// fails to write.
    pub(crate) fn checking(max_idle_bytes: usize) -> Self {
        Self {
            checking: true,
            ..Self::new(max_idle_bytes)
        }
    }

    fn min_pooled(&self) -> usize {
        if self.checking {
            MIN_POOLED_CHECKING
        } else {
            MIN_POOLED_BYTES
        }
    }

    /// The smallest idle buffer of at least `capacity` bytes that wastes at
    /// most half of itself.
    fn reuse(&self, capacity: usize) -> Option<Vec<u8>> {
        if capacity < self.min_pooled() {
            return None;
        }
        let mut idle = self.idle.lock().expect("pool lock");
        let best = idle
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= capacity && b.capacity() / 2 <= capacity)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        best.map(|i| idle.swap_remove(i))
    }

    /// An empty buffer with room for `capacity` bytes, to append to.
    pub(crate) fn take_empty(&self, capacity: usize) -> Vec<u8> {
        match self.reuse(capacity) {
            Some(mut buffer) => {
                buffer.clear();
                buffer
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// A buffer of exactly `len` bytes (contents unspecified when pooled).
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        match self.reuse(len) {
            Some(mut buffer) => {
                // Within capacity: no reallocation; new bytes (if any) are zeroed.
                buffer.resize(len, 0);
                buffer.truncate(len);
                if self.checking {
                    buffer.fill(0xA5);
                }
                buffer
            }
            None => vec![0; len],
        }
    }

    /// A buffer of `len` zero bytes (a fresh one is zeroed by the allocator;
    /// only a reused one is cleared).
    pub(crate) fn take_zeroed(&self, len: usize) -> Vec<u8> {
        match self.reuse(len) {
            Some(mut buffer) => {
                buffer.clear();
                buffer.resize(len, 0);
                buffer
            }
            None => vec![0; len],
        }
    }

    /// Wrap `buffer` as bytes that go back to `pool` when dropped.
    pub(crate) fn into_bytes(pool: &Arc<Self>, buffer: Vec<u8>) -> Bytes {
        if buffer.capacity() < pool.min_pooled() {
            return Bytes::from(buffer);
        }
        Bytes::from_owner(Pooled {
            buffer,
            pool: pool.clone(),
        })
    }

    fn give_back(&self, buffer: Vec<u8>) {
        if buffer.capacity() > self.max_idle_bytes {
            return; // would only push every other idle buffer out
        }
        let mut idle = self.idle.lock().expect("pool lock");
        // The newest buffers stay (they fit what is being read now); the
        // oldest go when the pool is over its bounds.
        idle.push(buffer);
        let mut held: usize = idle.iter().map(Vec::capacity).sum();
        while held > self.max_idle_bytes || idle.len() > MAX_IDLE_BUFFERS {
            held -= idle.remove(0).capacity();
        }
    }
}

impl Default for BufferPool {
    /// A pool keeping at most 64 MiB idle.
    fn default() -> Self {
        Self::new(64 << 20)
    }
}

/// `data` that keeps `guard` (a permit, say) alive until its last
/// reference is dropped.
pub(crate) fn holding<G: Send + 'static>(data: Bytes, guard: G) -> Bytes {
    Bytes::from_owner(Held { data, _guard: guard })
}

struct Held<G> {
    data: Bytes,
    _guard: G,
}

impl<G> AsRef<[u8]> for Held<G> {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

struct Pooled {
    buffer: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buffers_have_the_room_asked_for() {
        let buffer = BufferPool::new(64 << 20).take_empty(5 << 20);
        assert!(buffer.is_empty() && buffer.capacity() >= 5 << 20);
    }

    #[test]
    fn buffers_come_back_and_are_reused_at_the_right_size() {
        let pool = Arc::new(BufferPool::new(64 << 20));
        let first = pool.take(3 << 20);
        let ptr = first.as_ptr();
        drop(BufferPool::into_bytes(&pool, first));
        // Too small to reuse a 3 MiB buffer for: a fresh one.
        let small = pool.take(1 << 20);
        assert_ne!(small.as_ptr(), ptr);
        let again = pool.take(2 << 20);
        assert_eq!(again.len(), 2 << 20);
        assert_eq!(again.as_ptr(), ptr, "the idle buffer is reused");
        let bytes = BufferPool::into_bytes(&pool, again);
        assert_eq!(bytes.len(), 2 << 20);
    }

    #[test]
    fn idle_bytes_stay_within_the_bound() {
        let pool = Arc::new(BufferPool::new(4 << 20));
        let buffers: Vec<Bytes> = (0..3)
            .map(|_| BufferPool::into_bytes(&pool, pool.take(2 << 20)))
            .collect();
        drop(buffers);
        let idle: usize = pool.idle.lock().unwrap().iter().map(Vec::capacity).sum();
        assert!(idle <= 4 << 20, "{idle} idle bytes");
        // Larger than the whole bound: never kept.
        drop(BufferPool::into_bytes(&pool, pool.take(5 << 20)));
        assert!(pool.idle.lock().unwrap().iter().all(|b| b.capacity() < 5 << 20));
    }

    #[test]
    fn a_checking_pool_poisons_reused_buffers() {
        let pool = Arc::new(BufferPool::checking(1 << 20));
        drop(BufferPool::into_bytes(&pool, vec![0; 4096]));
        assert!(pool.take(4000).iter().all(|&b| b == 0xA5));
    }
}
