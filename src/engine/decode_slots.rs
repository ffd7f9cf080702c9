//! The decoding jobs a process runs at once, handed out by priority.
//!
//! A streamed response reads its next slabs while the current one is
//! written. With first-come slots, those slabs shared the decoders evenly
//! and finished together, so the decoders then idled while the client took
//! them. Here the earliest slab (lowest [`Priority`]) is served first, so
//! one slab is done as early as possible while the later ones fill the gaps.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::oneshot;

/// Lower runs first: the slab's index within its read, then the read's
/// arrival, so a small read's only slab does not wait behind the later
/// slabs of large reads.
pub type Priority = (u64, u64);

/// A held decoding slot; dropping it hands the slot on.
#[derive(Debug)]
pub struct Slot {
    slots: Option<Arc<DecodeSlots>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release();
        }
    }
}

/// Slots handed out lowest priority first (in arrival order among equals).
#[derive(Debug)]
pub struct DecodeSlots {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    free: usize,
    waiting: BinaryHeap<Reverse<Waiter>>,
    arrivals: u64,
}

#[derive(Debug)]
struct Waiter {
    priority: Priority,
    arrival: u64,
    wake: oneshot::Sender<Slot>,
}

impl Waiter {
    fn key(&self) -> (Priority, u64) {
        (self.priority, self.arrival)
    }
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Waiter {}

impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Waiter {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl DecodeSlots {
    /// `count` slots.
    pub fn new(count: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                free: count,
                waiting: BinaryHeap::new(),
                arrivals: 0,
            }),
        })
    }

    /// The process's slots: two per core, so a job is always ready when one
    /// ends (one per core left the cores idle a sixth of a bulk read).
    pub fn global() -> Arc<Self> {
        static SLOTS: OnceLock<Arc<DecodeSlots>> = OnceLock::new();
        SLOTS
            .get_or_init(|| {
                let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
                Self::new(2 * cores)
            })
            .clone()
    }

    /// Wait for a slot; waiters with a lower `priority` are served first.
    pub async fn acquire(self: &Arc<Self>, priority: Priority) -> Slot {
        let wait = {
            let mut state = self.state.lock().expect("slots lock");
            if state.free > 0 {
                state.free -= 1;
                return Slot {
                    slots: Some(self.clone()),
                };
            }
            let (wake, wait) = oneshot::channel();
            state.arrivals += 1;
            let arrival = state.arrivals;
            state.waiting.push(Reverse(Waiter {
                priority,
                arrival,
                wake,
            }));
            wait
        };
        wait.await.expect("a waiter is only dropped after it is woken")
    }

    /// Hand a released slot to the first waiter still waiting, else free it.
    fn release(self: &Arc<Self>) {
        let mut state = self.state.lock().expect("slots lock");
        while let Some(Reverse(waiter)) = state.waiting.pop() {
            // A waiter that gave up has dropped its receiver: try the next.
            // (A slot sent to a receiver dropped later is released again by
            // its own drop, outside this lock.)
            let slot = Slot {
                slots: Some(self.clone()),
            };
            match waiter.wake.send(slot) {
                Ok(()) => return,
                Err(mut unsent) => unsent.slots = None, // still ours
            }
        }
        state.free += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lowest_priority_first_then_arrival() {
        let slots = DecodeSlots::new(1);
        let held = slots.acquire((0, 0)).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, priority) in [(2, 0), (1, 5), (1, 3), (1, 3), (0, 9)].into_iter().enumerate() {
            let (slots, order) = (slots.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = slots.acquire(priority).await;
                order.lock().unwrap().push(i);
            }));
            tokio::task::yield_now().await; // queue in this order
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![4, 2, 3, 1, 0]);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_does_not_lose_the_slot() {
        let slots = DecodeSlots::new(1);
        let held = slots.acquire((0, 0)).await;
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(10), slots.acquire((0, 1))).await;
        assert!(gave_up.is_err());
        drop(held);
        let again = tokio::time::timeout(std::time::Duration::from_secs(1), slots.acquire((5, 5))).await;
        assert!(again.is_ok(), "the released slot is free again");
    }
}
