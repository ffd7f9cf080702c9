//! Fuzz target: see `zarr_serve::fuzz_checks::dap4_constraint`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zarr_serve::fuzz_checks::dap4_constraint(data));
