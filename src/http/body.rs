//! Response bodies written as they are made: by a streaming task
//! ([`channel_body`]) or a blocking writer ([`ChannelWriter`]).

/// A response body of what a streaming task sends on `rx`; an error
/// ends the connection short.
pub(crate) fn channel_body(
    mut rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, std::io::Error>>,
) -> axum::body::Body {
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
