//! Connections whose client stops taking data are closed.
//!
//! A response body waiting in the server's write queue holds what it points
//! to: a streamed slab holds its share of the process's slab budget until
//! it is written. A client that keeps its connection open but reads nothing
//! would hold it for ever, so every connection fails its writes once the
//! socket has accepted nothing for [`CLIENT_STALL`]; the server then drops
//! the connection and everything its response held. Idle keep-alive
//! connections write nothing and are not affected.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

use crate::metrics::Metrics;

/// How long a write may wait for the client before the connection is closed.
pub(super) const CLIENT_STALL: Duration = Duration::from_secs(60);

/// A listener whose connections close when their client stalls.
pub(super) struct StallGuardedListener {
    listener: TcpListener,
    metrics: Arc<Metrics>,
}

impl StallGuardedListener {
    /// Guard the connections accepted by `listener`; stalls are counted in `metrics`.
    pub(super) fn new(listener: TcpListener, metrics: Arc<Metrics>) -> Self {
        Self { listener, metrics }
    }
}

impl axum::serve::Listener for StallGuardedListener {
    type Io = StallGuard<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        // A body sent in pieces (a stream, chunked encoding) must not wait
        // for the client's delayed ACK of the previous piece (Nagle's
        // algorithm): about 40 ms on Linux, on one small answer in twenty.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY refused: {e}");
        }
        (StallGuard::new(stream, CLIENT_STALL, Some(self.metrics.clone())), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// An I/O object whose writes fail with `TimedOut` after `limit` without progress.
pub(super) struct StallGuard<T> {
    inner: T,
    limit: Duration,
    /// Armed while a write is pending: when it fires, the client stalled.
    deadline: Option<Pin<Box<Sleep>>>,
    metrics: Option<Arc<Metrics>>,
}

impl<T> StallGuard<T> {
    /// Guard `inner`; a stall is counted in `metrics` if given.
    pub(super) fn new(inner: T, limit: Duration, metrics: Option<Arc<Metrics>>) -> Self {
        Self {
            inner,
            limit,
            deadline: None,
            metrics,
        }
    }

    /// After a write that could not proceed: `Pending` until the deadline,
    /// then the error that closes the connection.
    fn wait_or_fail<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let limit = self.limit;
        let deadline = self
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        if deadline.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.deadline = None;
        if let Some(metrics) = &self.metrics {
            metrics.stream_errors.fetch_add(1, Ordering::Relaxed);
        }
        tracing::warn!("client took no data for {limit:?}; connection closed");
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "client stopped reading")))
    }

    fn progressed<R>(&mut self, result: Poll<io::Result<R>>, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        match result {
            Poll::Pending => self.wait_or_fail(cx),
            ready => {
                self.deadline = None;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuard<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuard<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.progressed(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.progressed(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.progressed(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn writes_fail_when_the_peer_stops_reading_and_not_before() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let mut guarded = StallGuard::new(ours, Duration::from_millis(100), None);
        // A slow reader that keeps taking data: no error however long it takes.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 256];
            for _ in 0..40 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                theirs.read_exact(&mut buf).await.unwrap();
            }
            theirs // then stop reading, keeping the pipe open
        });
        guarded
            .write_all(&[7u8; 40 * 256])
            .await
            .expect("a slow reader is not a stall");
        let _theirs = reader.await.unwrap();
        let started = std::time::Instant::now();
        // Bounded, so a guard that never fires fails the test instead of hanging it.
        let err = tokio::time::timeout(Duration::from_secs(5), guarded.write_all(&[7u8; 4096]))
            .await
            .expect("the stall ends the write")
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
