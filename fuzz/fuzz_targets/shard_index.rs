//! Fuzz target: see `zarr_serve::fuzz_checks::shard_index`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zarr_serve::fuzz_checks::shard_index(data));
