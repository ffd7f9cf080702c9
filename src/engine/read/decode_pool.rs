//! The threads that decode chunks: one per core, each taking the next job
//! as soon as it finishes one, lowest [`Priority`] first.
//!
//! Decoding is CPU-bound, so more threads than cores only time-slice them.
//! Jobs run in the order of their slab's ticket
//! ([`crate::engine::Resources`] hands them out as slabs start), so a
//! streamed response's earlier slab finishes first and reads share the
//! decoders first come, first served, slab by slab. The measurements behind
//! this are in BENCHMARKS.md ("Why the read path is shaped so").

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::oneshot;

/// Lower runs first (among equals, the order jobs were queued).
pub(crate) type Priority = u64;

type Job = Box<dyn FnOnce() + Send>;

/// A pool of decoding threads with one priority queue. Its threads end
/// when the pool is dropped, after the jobs already queued.
#[derive(Debug)]
pub(crate) struct DecodePool {
    shared: Arc<Shared>,
}

/// What the pool's threads share with it.
#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DecodeQueue")
    }
}

#[derive(Default)]
struct Queue {
    jobs: BinaryHeap<Reverse<Queued>>,
    queued: u64,
    closed: bool,
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
    /// A pool of `threads` threads (at least one).
    pub(crate) fn start(threads: usize) -> Self {
        let shared = Arc::new(Shared::default());
        let threads = threads.max(1);
        for i in 0..threads {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("zarr-decode-{i}"))
                .spawn(move || shared.work())
                .expect("start a decoding thread");
        }
        Self { shared }
    }

    /// Run `f` on a pool thread after every queued job of lower priority;
    /// `Err` with the panic's message if it panicked (the panic hook has
    /// logged where). A job whose caller has gone (its future was dropped)
    /// is skipped.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        priority: Priority,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            if !done.is_closed() {
                let _ = done.send(catch_unwind(AssertUnwindSafe(f)).map_err(panic_message));
            }
        });
        {
            let mut queue = self.shared.queue.lock().expect("decode queue lock");
            queue.queued += 1;
            let order = queue.queued;
            queue.jobs.push(Reverse(Queued { priority, order, job }));
        }
        self.shared.ready.notify_one();
        result.await.unwrap_or_else(|_| Err("the decoding pool stopped".into()))
    }
}

impl Drop for DecodePool {
    fn drop(&mut self) {
        self.shared.queue.lock().expect("decode queue lock").closed = true;
        self.shared.ready.notify_all();
    }
}

impl Shared {
    fn work(&self) {
        loop {
            let job = {
                let mut queue = self.queue.lock().expect("decode queue lock");
                loop {
                    if let Some(Reverse(queued)) = queue.jobs.pop() {
                        break queued.job;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self.ready.wait(queue).expect("decode queue lock");
                }
            };
            job();
        }
    }
}

/// The message a panic was raised with.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => payload.downcast_ref::<&str>().map_or("a panic", |m| m).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[tokio::test]
    async fn jobs_run_lowest_priority_first_then_in_queue_order() {
        let pool = Arc::new(DecodePool::start(1));
        // Hold the only thread until every job is queued.
        let (release, hold) = mpsc::channel::<()>();
        let p = pool.clone();
        let blocker = tokio::spawn(async move { p.run(0, move || hold.recv().unwrap()).await });
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut jobs = Vec::new();
        for (i, priority) in [9, 5, 3, 3, 1].into_iter().enumerate() {
            let (order, p) = (order.clone(), pool.clone());
            jobs.push(tokio::spawn(async move {
                p.run(priority, move || order.lock().unwrap().push(i)).await
            }));
            tokio::task::yield_now().await; // queued in this order
        }
        while pool.shared.queue.lock().unwrap().jobs.len() < 5 {
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
    async fn a_panic_is_its_message_and_the_thread_goes_on() {
        let pool = DecodePool::start(1);
        let result = pool.run(0, || -> u32 { panic!("bad chunk {}", 7) }).await;
        assert_eq!(result, Err("bad chunk 7".to_string()));
        assert_eq!(pool.run(0, || 7).await, Ok(7));
    }

    #[test]
    fn threads_end_when_the_pool_is_dropped() {
        let pool = DecodePool::start(2);
        let shared = Arc::downgrade(&pool.shared);
        drop(pool);
        for _ in 0..200 {
            if shared.strong_count() == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("decoding threads still hold the queue 2 s after the pool was dropped");
    }
}
