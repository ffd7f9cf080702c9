//! Serving connections, and shutting down gracefully.

use std::sync::Arc;
use std::time::Duration;

use super::{app, stall, AppState};

/// Most bytes of a request's head a connection buffers: past this hyper
/// answers 431 itself (with no body). Above `MAX_TARGET_BYTES` and
/// `MAX_HEADER_BYTES` and below this, a request reaches the middleware,
/// which answers 414 or 431 as problem+json.
const MAX_HEAD_BUFFER: usize = 1 << 20;

/// Serve `app` on `listener` until `shutdown` resolves, then finish
/// in-flight requests (at most `grace`). Connections are served as axum's
/// `serve` does (HTTP/1.1 and HTTP/2, graceful shutdown), with a request
/// head buffer of [`MAX_HEAD_BUFFER`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    use axum::serve::Listener as _;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::ServiceExt as _;
    // The OIDC issuer's keys, fetched while the first requests come in.
    state.identity.start();
    let mut listener = stall::StallGuardedListener::new(listener, state.metrics.clone());
    let app = app(state);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(MAX_HEAD_BUFFER).timer(TokioTimer::new());
    builder.http2().enable_connect_protocol();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                request.map(axum::body::Body::new)
            },
        ));
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!("in-flight requests did not finish within {grace:?}; exiting");
        }
    }
    Ok(())
}
