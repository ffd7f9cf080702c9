//! The limits every request of a store is held to, each a wrapper around a
//! [`KeySource`] (as object_store's `LimitStore` and `ThrottledStore` wrap
//! an `ObjectStore`): [`Limited`] bounds the requests in flight, [`TimedOut`]
//! bounds how long one may take, [`Counted`] counts them for `/metrics`.
//! [`Bounds`] is the three as one store configures them.

use std::future::Future;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::source::{KeySource, Listing};
use super::{ByteRange, Expect, ObjectInfo, Payload, ReadResult, StoreError};

/// Counters of one store, read by `/metrics`.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Requests sent (GET, ranged GET, HEAD, LIST).
    pub requests: AtomicU64,
    /// Ranged GET requests among them.
    pub range_requests: AtomicU64,
    /// Payload bytes received.
    pub bytes: AtomicU64,
    /// Payload bytes written (puts that succeeded).
    pub written: AtomicU64,
    /// Requests that failed (not counting missing keys).
    pub(crate) errors: AtomicU64,
}

/// The limiter, timeout and counters of one store.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// Bounds the requests in flight to this store, so one dataset cannot
    /// exhaust the backend (or the process) under a flood of requests.
    limiter: Arc<Semaphore>,
    timeout: Duration,
    stats: Arc<StoreStats>,
}

impl Bounds {
    pub(crate) fn new(max_concurrent_requests: usize, timeout: Duration) -> Self {
        Self {
            limiter: Arc::new(Semaphore::new(max_concurrent_requests.max(1))),
            timeout,
            stats: Arc::default(),
        }
    }

    pub(crate) fn stats(&self) -> &StoreStats {
        &self.stats
    }

    /// `source` inside these bounds: counted, then limited, then timed
    /// (waiting for a permit is not part of a request's time).
    pub(crate) fn wrap(&self, source: Arc<dyn KeySource>) -> Arc<dyn KeySource> {
        let timed = TimedOut {
            inner: source,
            timeout: self.timeout,
        };
        let limited = Limited {
            inner: timed,
            limiter: self.limiter.clone(),
        };
        Arc::new(Counted {
            inner: limited,
            stats: self.stats.clone(),
        })
    }

    /// One request that is not a key's (resolving a ref), held to the same
    /// bounds.
    pub(crate) async fn run<T>(&self, request: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        let _permit = self.limiter.acquire().await.expect("store limiter is never closed");
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let result = within(self.timeout, request).await;
        if result.is_err() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        result
    }
}

async fn within<T>(timeout: Duration, request: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(result) => result,
        Err(_) => Err(StoreError::Timeout(timeout)),
    }
}

/// At most as many requests in flight as the semaphore has permits.
#[derive(Debug)]
pub(crate) struct Limited<S> {
    inner: S,
    limiter: Arc<Semaphore>,
}

impl<S> Limited<S> {
    async fn permit(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.limiter.acquire().await.expect("store limiter is never closed")
    }
}

#[async_trait::async_trait]
impl<S: KeySource> KeySource for Limited<S> {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        let _permit = self.permit().await;
        self.inner.get(key, range, if_match).await
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let _permit = self.permit().await;
        self.inner.get_ranges(key, ranges, if_match).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let _permit = self.permit().await;
        self.inner.head(key).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        let _permit = self.permit().await;
        self.inner.list_dir(prefix).await
    }

    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        let _permit = self.permit().await;
        self.inner.put(key, data, expect).await
    }

    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        let _permit = self.permit().await;
        self.inner.delete(key, expect).await
    }
}

/// Each request fails with [`StoreError::Timeout`] after `timeout`.
#[derive(Debug)]
pub(crate) struct TimedOut<S> {
    inner: S,
    timeout: Duration,
}

#[async_trait::async_trait]
impl<S: KeySource> KeySource for TimedOut<S> {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        within(self.timeout, self.inner.get(key, range, if_match)).await
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        within(self.timeout, self.inner.get_ranges(key, ranges, if_match)).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        within(self.timeout, self.inner.head(key)).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        within(self.timeout, self.inner.list_dir(prefix)).await
    }

    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        within(self.timeout, self.inner.put(key, data, expect)).await
    }

    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        within(self.timeout, self.inner.delete(key, expect)).await
    }
}

/// Counts requests, ranged requests, bytes received and failures. Several
/// ranges read at once count as the ranged reads they stand for.
#[derive(Debug)]
pub(crate) struct Counted<S> {
    inner: S,
    stats: Arc<StoreStats>,
}

impl<S> Counted<S> {
    /// Count requests as they start (a request cancelled part way is sent).
    fn sent(&self, requests: u64, ranged: u64) {
        self.stats.requests.fetch_add(requests, Ordering::Relaxed);
        self.stats.range_requests.fetch_add(ranged, Ordering::Relaxed);
    }

    fn failed<T>(&self, result: &Result<T, StoreError>) {
        if result.is_err() {
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A write found the object changed: the store answered as asked, so
    /// not a failure of it.
    fn failed_write<T>(&self, result: &Result<T, StoreError>) {
        if !matches!(result, Err(StoreError::Changed(_))) {
            self.failed(result);
        }
    }

    fn received(&self, bytes: usize) {
        self.stats.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

#[async_trait::async_trait]
impl<S: KeySource> KeySource for Counted<S> {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        self.sent(1, u64::from(range != ByteRange::All));
        let result = self.inner.get(key, range, if_match).await;
        self.failed(&result);
        if let Ok(Some(read)) = &result {
            self.received(read.data.len());
        }
        result
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.sent(ranges.len().max(1) as u64, ranges.len() as u64);
        let result = self.inner.get_ranges(key, ranges, if_match).await;
        self.failed(&result);
        if let Ok(Some(parts)) = &result {
            self.received(parts.iter().map(Bytes::len).sum());
        }
        result
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        self.sent(1, 0);
        let result = self.inner.head(key).await;
        self.failed(&result);
        result
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        self.sent(1, 0);
        let result = self.inner.list_dir(prefix).await;
        self.failed(&result);
        result
    }

    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        self.sent(1, 0);
        let size = data.len() as u64;
        let result = self.inner.put(key, data, expect).await;
        self.failed_write(&result);
        if result.is_ok() {
            self.stats.written.fetch_add(size, Ordering::Relaxed);
        }
        result
    }

    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        self.sent(1, 0);
        let result = self.inner.delete(key, expect).await;
        self.failed_write(&result);
        result
    }
}
