//! zarr-serve: an HTTP service that serves N-dimensional arrays stored as
//! Zarr (v2, v3, Icechunk, kerchunk) in the form each client speaks.
//!
//! # Layout
//! - [`engine`]: the Zarr format (metadata, data types, chunk grids and
//!   keys, the codec pipeline, sharding), selections, labels and CF,
//!   read planning and region reads, geo (grids, CRSs, tile matrix sets,
//!   map frames, geometry to cells), reductions and pictures. No HTTP in it.
//! - [`encode`]: the format writers (npy, JSON, CSV, NetCDF, GeoTIFF, PNG,
//!   XDR, XML escaping): elements in, bytes out; no reads.
//! - [`storage`]: the only module that talks to `object_store` (local, S3,
//!   GCS, Azure, HTTP), Icechunk and kerchunk reference sets: validated
//!   keys, ranged and conditional reads, listing, limits and counters.
//! - [`http`]: the routes and protocol adapters (region reads, passthrough,
//!   the v2 view, tiles, WMS, OPeNDAP DAP2, EDR, the explorer), each
//!   handing its answer to one response pipeline (`http::respond`: 413,
//!   ETag and 304, HEAD, whole or streamed); errors as problem+json or in
//!   the protocol's own form. No codec knowledge.
//! - [`identity`]: who a request is (OpenID Connect tokens, API keys,
//!   dataset tokens) and the grants that say who may read and write each
//!   dataset; rate limits per caller. No HTTP in it.
//! - [`config`]: the config file, `ZARR_SERVE_*` environment, command line.
//! - `metrics`: Prometheus text rendering.
//! - [`buffer_pool`]: large buffers reused across reads (no page faults).
//!
//! `docs/architecture.md` walks through a region read and a WMS map.

pub mod buffer_pool;
pub mod config;
pub mod encode;
pub mod engine;
pub mod fuzz_checks;
pub mod http;
pub mod identity;
mod metrics;
pub mod storage;
