//! Process metrics in the Prometheus text format.
//!
//! Request counts and latency by route and status are recorded by the HTTP
//! middleware; store and cache counters live with their owners and are read
//! when `/metrics` is rendered.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Latency histogram bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// What is counted for one route.
#[derive(Debug, Default)]
struct RouteStats {
    /// Requests by status.
    statuses: BTreeMap<u16, u64>,
    /// Latency histogram: requests per bucket, total count and sum.
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Request metrics.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    routes: Mutex<BTreeMap<String, RouteStats>>,
    /// Responses cut short after they began (an error mid-stream).
    pub(crate) stream_errors: AtomicU64,
    /// Requests refused because too many reads were in flight.
    pub(crate) overloaded: AtomicU64,
    /// Reads holding a read slot, by route.
    in_flight: Mutex<BTreeMap<String, u64>>,
    /// Writes that changed the store, by dataset.
    writes: Mutex<BTreeMap<String, WriteStats>>,
}

/// What the writes to one dataset did.
#[derive(Debug, Default, Clone, Copy)]
struct WriteStats {
    requests: u64,
    body_bytes: u64,
    objects_written: u64,
    objects_deleted: u64,
}

/// One read in flight on a route, counted until dropped.
pub(crate) struct InFlight {
    metrics: std::sync::Arc<Metrics>,
    route: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut routes = self.metrics.in_flight.lock().expect("metrics lock");
        if let Some(n) = routes.get_mut(&self.route) {
            *n = n.saturating_sub(1);
        }
    }
}

impl Metrics {
    /// Record one finished request.
    pub(crate) fn record(&self, route: &str, status: u16, elapsed: Duration) {
        let mut routes = self.routes.lock().expect("metrics lock");
        // The route's key is allocated once, on its first request.
        if !routes.contains_key(route) {
            routes.insert(route.to_string(), RouteStats::default());
        }
        let stats = routes.get_mut(route).expect("inserted above");
        *stats.statuses.entry(status).or_default() += 1;
        let secs = elapsed.as_secs_f64();
        for (bucket, bound) in stats.buckets.iter_mut().zip(BUCKETS) {
            if secs <= bound {
                *bucket += 1;
            }
        }
        stats.count += 1;
        stats.sum += secs;
    }

    /// A read of `route` begins; it ends when the guard is dropped.
    pub(crate) fn read_started(self: &std::sync::Arc<Self>, route: &str) -> InFlight {
        *self
            .in_flight
            .lock()
            .expect("metrics lock")
            .entry(route.to_string())
            .or_default() += 1;
        InFlight {
            metrics: self.clone(),
            route: route.to_string(),
        }
    }

    /// Count one write to `dataset`: its body's bytes and the objects it
    /// put and deleted.
    pub(crate) fn write_done(&self, dataset: &str, body_bytes: u64, objects_written: u64, objects_deleted: u64) {
        let mut writes = self.writes.lock().expect("metrics lock");
        let stats = writes.entry(dataset.to_string()).or_default();
        stats.requests += 1;
        stats.body_bytes += body_bytes;
        stats.objects_written += objects_written;
        stats.objects_deleted += objects_deleted;
    }

    /// Render request metrics; `extra` appends other families.
    pub(crate) fn render(&self, extra: impl FnOnce(&mut String)) -> String {
        let mut out = String::new();
        let routes = self.routes.lock().expect("metrics lock");
        out.push_str("# HELP zarr_serve_requests_total HTTP requests by route and status.\n# TYPE zarr_serve_requests_total counter\n");
        for (route, stats) in routes.iter() {
            for (status, n) in &stats.statuses {
                let _ = writeln!(
                    out,
                    "zarr_serve_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                    escape(route)
                );
            }
        }
        out.push_str("# HELP zarr_serve_request_duration_seconds HTTP request latency by route.\n# TYPE zarr_serve_request_duration_seconds histogram\n");
        for (route, stats) in routes.iter() {
            let route = escape(route);
            let series = "zarr_serve_request_duration_seconds";
            for (bound, n) in BUCKETS.iter().zip(stats.buckets) {
                let _ = writeln!(out, "{series}_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(out, "{series}_bucket{{route=\"{route}\",le=\"+Inf\"}} {}", stats.count);
            let _ = writeln!(out, "{series}_sum{{route=\"{route}\"}} {}", stats.sum);
            let _ = writeln!(out, "{series}_count{{route=\"{route}\"}} {}", stats.count);
        }
        drop(routes);
        let single = |v: &AtomicU64| [(String::new(), v.load(Ordering::Relaxed))];
        family(
            &mut out,
            "zarr_serve_stream_errors_total",
            "Responses cut short after they began: an error, or a client that took no data for 60 s.",
            "counter",
            &single(&self.stream_errors),
        );
        family(
            &mut out,
            "zarr_serve_overloaded_total",
            "Requests refused with 503 because too many reads were in flight.",
            "counter",
            &single(&self.overloaded),
        );
        let in_flight: Vec<(String, u64)> = self
            .in_flight
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|(route, n)| (format!("route=\"{}\"", escape(route)), *n))
            .collect();
        family(
            &mut out,
            "zarr_serve_reads_in_flight",
            "Reads holding a read slot, by route.",
            "gauge",
            &in_flight,
        );
        let writes: Vec<(String, WriteStats)> = self
            .writes
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|(ds, s)| (format!("dataset=\"{}\"", escape(ds)), *s))
            .collect();
        let each = |f: fn(&WriteStats) -> u64| writes.iter().map(|(l, s)| (l.clone(), f(s))).collect::<Vec<_>>();
        family(
            &mut out,
            "zarr_serve_writes_total",
            "Writes that succeeded, by dataset.",
            "counter",
            &each(|s| s.requests),
        );
        family(
            &mut out,
            "zarr_serve_write_body_bytes_total",
            "Bytes of the bodies of writes that succeeded, by dataset.",
            "counter",
            &each(|s| s.body_bytes),
        );
        let objects: Vec<(String, u64)> = writes
            .iter()
            .flat_map(|(l, s)| {
                [
                    (format!("{l},op=\"put\""), s.objects_written),
                    (format!("{l},op=\"delete\""), s.objects_deleted),
                ]
            })
            .collect();
        family(
            &mut out,
            "zarr_serve_write_objects_total",
            "Objects writes put or deleted, by dataset.",
            "counter",
            &objects,
        );
        extra(&mut out);
        out
    }
}

/// Append one metric family of type `kind`; each sample is (labels, value).
pub(crate) fn family(out: &mut String, name: &str, help: &str, kind: &str, samples: &[(String, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, value) in samples {
        if labels.is_empty() {
            let _ = writeln!(out, "{name} {value}");
        } else {
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
    }
}

/// Escape a label value.
pub(crate) fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
