//! Fuzz target: see `zarr_serve::fuzz_checks::kerchunk`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zarr_serve::fuzz_checks::kerchunk(data));
