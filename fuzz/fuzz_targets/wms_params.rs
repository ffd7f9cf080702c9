//! Fuzz target: see `zarr_serve::fuzz_checks::wms_params`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zarr_serve::fuzz_checks::wms_params(data));
