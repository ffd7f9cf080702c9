//! Reused large buffers: output slabs and the bytes read from local files.
//!
//! A fresh multi-megabyte buffer costs a page fault and a page clear per
//! 4 KiB (or per huge page) on first touch: about a tenth of the CPU of a
//! bulk read in profiles. Such buffers are instead taken from a small
//! process-wide pool and given back when the last reference to their bytes
//! is dropped (after the HTTP layer has written a slab, after the chunks of
//! a read are decoded).
//!
//! A pooled buffer keeps the bytes of its previous use: a slab must write
//! every byte it hands out, which read planning guarantees (every output
//! element lies in exactly one chunk block, fill included). Debug builds and
//! the interop tests ([`check_reuse`]) poison reused buffers to catch a gap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// Buffers smaller than this are allocated as usual.
pub const MIN_POOLED_BYTES: usize = 1 << 20;

/// Whether reuse is being checked: almost every buffer pooled, reused ones
/// poisoned (on in debug builds; tests turn it on in release builds).
static CHECKING: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

/// Pool almost every buffer and fill each reused one with a poison byte, so
/// that tests reading through the pool see any byte a slab fails to write.
pub fn check_reuse(on: bool) {
    CHECKING.store(on, Ordering::Relaxed);
}

fn min_pooled() -> usize {
    if CHECKING.load(Ordering::Relaxed) {
        256
    } else {
        MIN_POOLED_BYTES
    }
}

/// Idle bytes and buffers the pool keeps at most.
const MAX_IDLE_BYTES: usize = 64 << 20;
const MAX_IDLE_BUFFERS: usize = 32;

static IDLE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// The smallest idle buffer of at least `capacity` bytes that wastes at
/// most half of itself.
fn reuse(capacity: usize) -> Option<Vec<u8>> {
    if capacity < min_pooled() {
        return None;
    }
    let mut idle = IDLE.lock().expect("pool lock");
    let best = idle
        .iter()
        .enumerate()
        .filter(|(_, b)| b.capacity() >= capacity && b.capacity() / 2 <= capacity)
        .min_by_key(|(_, b)| b.capacity())
        .map(|(i, _)| i);
    best.map(|i| idle.swap_remove(i))
}

/// An empty buffer with room for `capacity` bytes, to append to.
pub fn take_empty(capacity: usize) -> Vec<u8> {
    match reuse(capacity) {
        Some(mut buffer) => {
            buffer.clear();
            buffer
        }
        None => Vec::with_capacity(capacity),
    }
}

/// A buffer of exactly `len` bytes (contents unspecified when pooled).
pub fn take(len: usize) -> Vec<u8> {
    match reuse(len) {
        Some(mut buffer) => {
            // Within capacity: no reallocation; new bytes (if any) are zeroed.
            buffer.resize(len, 0);
            buffer.truncate(len);
            if CHECKING.load(Ordering::Relaxed) {
                buffer.fill(0xA5);
            }
            buffer
        }
        None => vec![0; len],
    }
}

/// Wrap `buffer` as bytes that go back to the pool when dropped.
pub fn into_bytes(buffer: Vec<u8>) -> Bytes {
    if buffer.capacity() < min_pooled() {
        return Bytes::from(buffer);
    }
    Bytes::from_owner(Pooled(buffer))
}

/// `data` that keeps `guard` (a permit, say) alive until its last
/// reference is dropped.
pub fn holding<G: Send + 'static>(data: Bytes, guard: G) -> Bytes {
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

struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        if buffer.capacity() > MAX_IDLE_BYTES {
            return; // would only push every other idle buffer out
        }
        let mut idle = IDLE.lock().expect("pool lock");
        // The newest buffers stay (they fit what is being read now); the
        // oldest go when the pool is over its bounds.
        idle.push(buffer);
        let mut held: usize = idle.iter().map(Vec::capacity).sum();
        while held > MAX_IDLE_BYTES || idle.len() > MAX_IDLE_BUFFERS {
            held -= idle.remove(0).capacity();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_buffers_have_the_room_asked_for() {
        let buffer = take_empty(5 << 20);
        assert!(buffer.is_empty() && buffer.capacity() >= 5 << 20);
    }

    #[test]
    fn buffers_come_back_and_are_reused_at_the_right_size() {
        let first = take(3 << 20);
        let ptr = first.as_ptr();
        drop(into_bytes(first));
        // Too small to reuse a 3 MiB buffer for: a fresh one.
        let small = take(1 << 20);
        assert_ne!(small.as_ptr(), ptr);
        let again = take(2 << 20);
        assert_eq!(again.len(), 2 << 20);
        assert_eq!(again.as_ptr(), ptr, "the idle buffer is reused");
        let bytes = into_bytes(again);
        assert_eq!(bytes.len(), 2 << 20);
    }
}
