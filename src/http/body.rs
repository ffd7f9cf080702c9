//! Response bodies written as they are made: the slabs of one or more
//! reads, each through its encoder ([`stream_parts`], every route that
//! streams array data), or what a blocking writer writes ([`ChannelWriter`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;

use crate::encode::Encoder;
use crate::engine::{DataType, Dataset, ReadPlan, Versions};
use crate::metrics::Metrics;

/// What a streaming task sends: pieces of the body, or why it ended short.
type Sender = tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>;

/// One array of a streamed answer: its read, pinned to the versions the
/// answer's ETag names, and the encoder that writes it.
pub(crate) struct Part {
    pub(crate) plan: ReadPlan,
    pub(crate) versions: Versions,
    pub(crate) encoder: Arc<dyn Encoder>,
}

/// The versions of the keys under `plan`'s array among `all` (what one
/// part of an answer of several arrays is pinned to).
pub(crate) fn own_versions(plan: &ReadPlan, all: &Versions) -> Versions {
    let prefix = match plan.node().path.as_str() {
        "" => String::new(),
        path => format!("{path}/"),
    };
    all.range(prefix.clone()..)
        .take_while(|(key, _)| key.starts_with(&prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The body of `head`, then of each part its encoder's head, its slabs as
/// they are read (the next read while the previous is written; text
/// encoded off the async workers, in pieces, so memory stays bounded) and
/// its tail (api.md 4.1, 4-6). A client that goes away stops the reading;
/// a failure after the status went out ends the body short and is counted.
pub(crate) fn stream_parts(metrics: Arc<Metrics>, dataset: Dataset, head: Bytes, parts: Vec<Part>) -> axum::body::Body {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        if !head.is_empty() && tx.send(Ok(head)).await.is_err() {
            return;
        }
        for part in parts {
            let path = part.plan.node().path.clone();
            match send_part(&dataset, part, &tx).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    metrics.stream_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(dataset = %dataset.name, path = %path, error = %e, "a streamed answer failed part way");
                    let _ = tx.send(Err(std::io::Error::other(e))).await;
                    return;
                }
            }
        }
    });
    channel_body(rx)
}

/// One part of [`stream_parts`]: `Ok(false)` when the client went away.
async fn send_part(dataset: &Dataset, part: Part, tx: &Sender) -> Result<bool, String> {
    let Part {
        plan,
        versions,
        encoder,
    } = part;
    let head = encoder.head();
    if !head.is_empty() && tx.send(Ok(head)).await.is_err() {
        return Ok(false);
    }
    let data_type = plan.data_type();
    let mut slabs = std::pin::pin!(dataset.slab_stream(plan, versions));
    let mut start = 0u64;
    loop {
        let slab = tokio::select! {
            // The client went away: stop reading (dropping `slabs` aborts them).
            _ = tx.closed() => return Ok(false),
            slab = slabs.next() => match slab {
                Some(slab) => slab.map_err(|e| e.to_string())?,
                None => break,
            },
        };
        let count = element_count(data_type, &slab);
        // A client that stops reading is cut off by the connection's stall
        // guard, which ends these sends too.
        if !send_encoded(&encoder, tx, start, slab, data_type.size()).await? {
            return Ok(false);
        }
        start += count;
    }
    let tail = encoder.tail();
    Ok(tail.is_empty() || tx.send(Ok(tail)).await.is_ok())
}

/// Elements in a slab: fixed-size ones, or variable-length items (counted
/// by their lengths, nothing decoded).
fn element_count(data_type: DataType, slab: &[u8]) -> u64 {
    match data_type {
        DataType::String | DataType::Bytes(_) => crate::engine::vlen::ranges(slab, None).map_or(0, |r| r.len() as u64),
        _ => (slab.len() / data_type.size().max(1)) as u64,
    }
}

/// Send a slab's elements (the first of them element `start`) encoded:
/// in pieces of the encoder's [`Encoder::piece_elements`] off the async
/// workers (encoders that spend CPU on each element), else as the encoder
/// gives them, inline (elements sent as they are, or byte-swapped).
/// `Ok(false)` when the client went away.
async fn send_encoded(
    encoder: &Arc<dyn Encoder>,
    tx: &Sender,
    start: u64,
    slab: Bytes,
    size: usize,
) -> Result<bool, String> {
    let Some(piece) = encoder.piece_elements() else {
        for encoded in encoder.element_pieces(start, slab)? {
            if tx.send(Ok(encoded)).await.is_err() {
                return Ok(false);
            }
        }
        return Ok(true);
    };
    let step = (piece as usize * size).max(1);
    for at in (0..slab.len()).step_by(step) {
        let data = slab.slice(at..slab.len().min(at + step));
        let (encoder, first) = (encoder.clone(), start + (at / size) as u64);
        let text = tokio::task::spawn_blocking(move || encoder.elements(first, data))
            .await
            .map_err(|e| format!("encoding failed: {e}"))??;
        if tx.send(Ok(text)).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A response body of what a streaming task sends on `rx`; an error
/// ends the connection short.
fn channel_body(mut rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, std::io::Error>>) -> axum::body::Body {
    axum::body::Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

/// What a blocking task writes (text, a file), sent as a body in pieces
/// of about [`ChannelWriter::PIECE`] bytes as it goes: the answer is never
/// whole in memory. A write fails (broken pipe) once the client is gone,
/// which stops the task.
pub(crate) struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    piece: Vec<u8>,
}

impl ChannelWriter {
    /// Bytes sent at a time.
    pub(crate) const PIECE: usize = 1 << 20;

    /// A writer, and the body that sends what it writes (two pieces queued
    /// at most).
    pub(crate) fn new() -> (Self, axum::body::Body) {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let writer = Self {
            tx,
            piece: Vec::with_capacity(Self::PIECE),
        };
        (writer, channel_body(rx))
    }

    /// What completes once the body is gone (the client left, or the
    /// response was dropped): a reader feeding this writer can stop then
    /// instead of at the writer's next write. Holds the body open until it
    /// is dropped.
    pub(crate) fn gone(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let tx = self.tx.clone();
        async move { tx.closed().await }
    }

    /// Send what is left, or end the body short with `failed`.
    pub(crate) fn finish(mut self, failed: std::io::Result<()>) {
        let last = failed.and_then(|()| std::io::Write::flush(&mut self));
        if let Err(e) = last {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                tracing::warn!(error = %e, "a streamed answer failed part way");
                let _ = self.tx.blocking_send(Err(e));
            }
        }
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.piece.extend_from_slice(data);
        if self.piece.len() >= Self::PIECE {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.piece.is_empty() {
            return Ok(());
        }
        let piece = std::mem::replace(&mut self.piece, Vec::with_capacity(Self::PIECE));
        self.tx
            .blocking_send(Ok(bytes::Bytes::from(piece)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}
