//! zarr-serve: an HTTP service that serves regions of Zarr v3 arrays.
//!
//! # Layout
//! - [`engine`]: the Zarr v3 format — metadata, data types, chunk grid and
//!   key encodings, the codec pipeline (array->array, array->bytes,
//!   bytes->bytes, sharding), selections and region read planning, caches.
//!   No HTTP in it.
//! - [`storage`]: the only module that talks to `object_store` (local, S3,
//!   GCS, Azure, HTTP): validated keys, ranged and conditional reads,
//!   listing, limits and counters.
//! - [`http`]: routes, content negotiation, formats (binary, npy, json),
//!   errors as `application/problem+json`; no codec knowledge.
//! - [`config`]: the config file, `ZARR_SERVE_*` environment, command line.
//! - [`metrics`]: Prometheus text rendering.
//! - [`buffer_pool`]: large buffers reused across reads (no page faults).

pub mod buffer_pool;
pub mod config;
pub mod encode;
pub mod engine;
pub mod fuzz_checks;
pub mod http;
mod metrics;
pub mod storage;
