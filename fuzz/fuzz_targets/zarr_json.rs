//! Parsing and validating `zarr.json`: any bytes give a node or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zarr_serve::engine::NodeMetadata;

fuzz_target!(|data: &[u8]| {
    if let Ok(NodeMetadata::Array { parsed: Ok(meta), .. }) = NodeMetadata::parse(data, "fuzz/zarr.json") {
        // A valid array can plan its read units.
        let _ = meta.codecs.read_chunk_shape();
        let _ = meta.chunk_grid.grid_shape(&meta.shape);
        let _ = meta.chunk_key_encoding.encode(&vec![0; meta.shape.len()]);
    }
});
