//! The threads that decode chunks: one per core, each taking the next job
//! as soon as it finishes one, lowest [`Priority`] first.
//!
//! Decoding is CPU-bound, so more threads than cores only time-slice them
//! (and thrash their caches), and handing each job to a fresh blocking task
//! left the cores idle between jobs while the runtime woke the next one
//! (a sixth of a bulk read with one job per core).
//!
//! Jobs run in the order of their slab's [`ticket`], taken when the slab
//! gets its turn to be read (a streamed response takes it once the slab
//! holds one of the response's slots): a streamed response's earlier slab finishes first while its next
//! one fills the gaps (first-come jobs had the two finish together, then
//! the cores idled while the client took them), and reads share the
//! decoders first come, first served, slab by slab, so none waits for more
//! than the slabs already started.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Condvar, Mutex, OnceLock};

use tokio::sync::oneshot;

/// Lower runs first (among equals, the order jobs were queued).
pub type Priority = u64;

/// The priority of a slab that starts now: later than every slab started before.
pub fn ticket() -> Priority {
    static TICKETS: AtomicU64 = AtomicU64::new(0);
    TICKETS.fetch_add(1, AtomicOrdering::Relaxed)
}

type Job = Box<dyn FnOnce() + Send>;

/// A pool of decoding threads with one priority queue.
pub struct DecodePool {
    queue: Mutex<Queue>,
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    jobs: BinaryHeap<Reverse<Queued>>,
    queued: u64,
}

struct Queued {
    priority: Priority,
    order: u64,
    job: Job,
}

impl Queued {
    fn key(&self) -> (Priority, u64) {
        (self.priority, self.order)
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl DecodePool {
    /// A pool of `threads` threads (at least one), running until the process ends.
    pub fn start(threads: usize) -> &'static Self {
        let pool: &'static Self = Box::leak(Box::new(Self {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
        }));
        for i in 0..threads.max(1) {
            std::thread::Builder::new()
                .name(format!("zarr-decode-{i}"))
                .spawn(move || pool.work())
                .expect("start a decoding thread");
        }
        pool
    }

    /// The process's pool: one thread per core.
    pub fn global() -> &'static Self {
        static POOL: OnceLock<&'static DecodePool> = OnceLock::new();
        POOL.get_or_init(|| Self::start(std::thread::available_parallelism().map_or(2, |n| n.get())))
    }

    /// Run `f` on a pool thread after every queued job of lower priority;
    /// `None` if it panicked. A job whose caller has gone (its future was
    /// dropped) is skipped.
    pub async fn run<T: Send + 'static>(
        &self,
        priority: Priority,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            if !done.is_closed() {
                let _ = done.send(f());
            }
        });
        {
            let mut queue = self.queue.lock().expect("decode queue lock");
            queue.queued += 1;
            let order = queue.queued;
            queue.jobs.push(Reverse(Queued { priority, order, job }));
        }
        self.ready.notify_one();
        result.await.ok()
    }

    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.queue.lock().expect("decode queue lock");
                loop {
                    if let Some(Reverse(queued)) = queue.jobs.pop() {
                        break queued.job;
                    }
                    queue = self.ready.wait(queue).expect("decode queue lock");
                }
            };
            // A panicking job drops its sender (its caller sees `None`);
            // the thread goes on with the next.
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    #[tokio::test]
    async fn jobs_run_lowest_priority_first_then_in_queue_order() {
        let pool = DecodePool::start(1);
        // Hold the only thread until every job is queued.
        let (release, hold) = mpsc::channel::<()>();
        let blocker = tokio::spawn(pool.run(0, move || hold.recv().unwrap()));
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut jobs = Vec::new();
        for (i, priority) in [9, 5, 3, 3, 1].into_iter().enumerate() {
            let order = order.clone();
            jobs.push(tokio::spawn(pool.run(priority, move || order.lock().unwrap().push(i))));
            tokio::task::yield_now().await; // queued in this order
        }
        while pool.queue.lock().unwrap().jobs.len() < 5 {
            tokio::task::yield_now().await;
        }
        release.send(()).unwrap();
        blocker.await.unwrap().unwrap();
        for job in jobs {
            job.await.unwrap().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![4, 2, 3, 1, 0]);
    }

    #[tokio::test]
    async fn a_panic_is_none_and_the_thread_goes_on() {
        let pool = DecodePool::start(1);
        assert_eq!(pool.run(0, || -> u32 { panic!("bad chunk") }).await, None);
        assert_eq!(pool.run(0, || 7).await, Some(7));
    }
}
