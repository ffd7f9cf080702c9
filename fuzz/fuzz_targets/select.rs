//! The `select` parser and its resolution against shapes: never panics, and
//! every resolved index lies inside the array.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zarr_serve::engine::Selection;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(selection) = Selection::parse(text) else { return };
    for shape in [&[][..], &[0][..], &[7][..], &[5, 1, 13][..], &[3, 0, 4, 9][..]] {
        if let Ok(dims) = selection.resolve(shape) {
            assert_eq!(dims.len(), shape.len());
            for (d, n) in dims.iter().zip(shape) {
                if d.len > 0 {
                    assert!(d.index(0) < *n && d.index(d.len - 1) < *n, "{text:?} {shape:?} {d:?}");
                }
                assert!(d.len <= *n);
            }
        }
    }
});
