//! Operational endpoints: health, readiness, metrics, the OpenAPI document.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;

use super::AppState;
use std::sync::atomic::AtomicU64;

use crate::engine::CacheStats;
use crate::metrics::{escape, family};
use crate::storage::StoreStats;

/// Picks one counter of a store's stats.
type StatOf = fn(&StoreStats) -> &AtomicU64;

type CacheReport<'a> = (&'static str, u64, u64, &'a CacheStats);

/// `GET /healthz`: 200 while the process serves.
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 once every dataset's store answered; else 503 naming
/// them (a dataset not everyone may read only as "a dataset": its name and
/// store are nobody's business here).
pub(super) async fn readyz(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let checks = state.datasets.iter().map(|(name, d)| {
        let public = state.is_public(name);
        async move {
            let result = tokio::time::timeout(Duration::from_secs(5), d.dataset.store().check()).await;
            let said = |what: String| {
                if public {
                    format!("{name}: {what}")
                } else {
                    "a dataset: not ready".into()
                }
            };
            match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(said(e.to_string())),
                Err(_) => Some(said("store did not answer within 5 s".into())),
            }
        }
    });
    let failures: Vec<String> = futures::future::join_all(checks).await.into_iter().flatten().collect();
    if failures.is_empty() {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready\n{}\n", failures.join("\n")),
        )
    }
}

/// `GET /metrics`: Prometheus text format; with `metrics_token` set, only
/// for requests that send it as a bearer token.
pub(super) async fn metrics(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, super::ApiError> {
    super::check_token(state.metrics_token.as_deref(), &headers)?;
    state.resources.caches().settle().await;
    let body = state.metrics.render(|out| {
        let per_dataset = |get: StatOf| -> Vec<(String, u64)> {
            let stats = state.datasets.iter().map(|(name, d)| (name, d.dataset.store().stats()));
            stats
                .map(|(name, s)| (format!("dataset=\"{}\"", escape(name)), get(s).load(Ordering::Relaxed)))
                .collect()
        };
        let store_families: [(&str, &str, StatOf); 4] = [
            ("zarr_serve_store_requests_total", "Store requests by dataset.", |s| {
                &s.requests
            }),
            (
                "zarr_serve_store_range_requests_total",
                "Ranged store GETs by dataset.",
                |s| &s.range_requests,
            ),
            (
                "zarr_serve_store_bytes_total",
                "Bytes read from the store by dataset.",
                |s| &s.bytes,
            ),
            (
                "zarr_serve_store_errors_total",
                "Failed store requests by dataset.",
                |s| &s.errors,
            ),
        ];
        for (name, help, get) in store_families {
            family(out, name, help, "counter", &per_dataset(get));
        }
        family(
            out,
            "zarr_serve_chunks_decoded_total",
            "Encoded chunks (inner chunks when sharded) decoded.",
            "counter",
            &[(String::new(), state.resources.chunks_decoded())],
        );
        let report = state.resources.caches().report();
        let per_cache = |get: &dyn Fn(&CacheReport) -> u64| -> Vec<(String, u64)> {
            report.iter().map(|r| (format!("cache=\"{}\"", r.0), get(r))).collect()
        };
        family(
            out,
            "zarr_serve_cache_hits_total",
            "Cache lookups answered from memory.",
            "counter",
            &per_cache(&|r| r.3.hits.load(Ordering::Relaxed)),
        );
        family(
            out,
            "zarr_serve_cache_misses_total",
            "Cache lookups that went to the store.",
            "counter",
            &per_cache(&|r| r.3.misses.load(Ordering::Relaxed)),
        );
        family(
            out,
            "zarr_serve_cache_entries",
            "Entries held per cache.",
            "gauge",
            &per_cache(&|r| r.1),
        );
        family(
            out,
            "zarr_serve_cache_size",
            "Weighted size per cache (bytes for shard indexes and decoded chunks, entries for metadata).",
            "gauge",
            &per_cache(&|r| r.2),
        );
    });
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        body,
    ))
}

/// `GET /openapi.yaml`
pub(super) async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        include_str!("../../openapi.yaml"),
    )
}
