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

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Request metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// Responses cut short after they began (an error mid-stream).
    pub stream_errors: AtomicU64,
    /// Requests refused because too many reads were in flight.
    pub overloaded: AtomicU64,
}

impl Metrics {
    /// Record one finished request.
    pub fn record(&self, route: &str, status: u16, elapsed: Duration) {
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry((route.to_string(), status))
            .or_default() += 1;
        let mut latency = self.latency.lock().expect("metrics lock");
        let h = latency.entry(route.to_string()).or_default();
        let secs = elapsed.as_secs_f64();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    /// Render request metrics; `extra` appends other families.
    pub fn render(&self, extra: impl FnOnce(&mut String)) -> String {
        let mut out = String::new();
        out.push_str("# HELP zarr_serve_requests_total HTTP requests by route and status.\n# TYPE zarr_serve_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "zarr_serve_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        out.push_str("# HELP zarr_serve_request_duration_seconds HTTP request latency by route.\n# TYPE zarr_serve_request_duration_seconds histogram\n");
        for (route, h) in self.latency.lock().expect("metrics lock").iter() {
            let route = escape(route);
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "zarr_serve_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "zarr_serve_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "zarr_serve_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "zarr_serve_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
        let single = |v: &AtomicU64| [(String::new(), v.load(Ordering::Relaxed))];
        family(
            &mut out,
            "zarr_serve_stream_errors_total",
            "Responses cut short by an error after they began.",
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
        extra(&mut out);
        out
    }
}

/// Append one metric family of type `kind`; each sample is (labels, value).
pub fn family(out: &mut String, name: &str, help: &str, kind: &str, samples: &[(String, u64)]) {
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
pub fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
