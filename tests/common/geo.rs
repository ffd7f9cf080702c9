//! The CF lat/lon dataset the map tests (tiles, WMS) read, and what they
//! check pixels with: descending latitudes, longitudes in 0..360, a time
//! dimension; `tas[t, i, j] = 100 t + 8 i + j`.

use serde_json::{json, Value};

pub const LATS: [f64; 4] = [30.0, 10.0, -10.0, -30.0];
pub const LONS: [f64; 8] = [0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0];

pub fn write_array(
    dir: &std::path::Path,
    name: &str,
    shape: &[u64],
    dt: &str,
    dims: &[&str],
    attrs: Value,
    data: &[u8],
) {
    let node = dir.join(name);
    std::fs::create_dir_all(node.join("c")).unwrap();
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dt,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": shape}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "dimension_names": dims, "attributes": attrs,
    });
    std::fs::write(node.join("zarr.json"), meta.to_string()).unwrap();
    // A 0-d array's one chunk is `c` itself.
    let key = match shape.len() {
        0 => node.join("c"),
        n => node.join("c").join(vec!["0"; n].join("/")),
    };
    if shape.is_empty() {
        std::fs::remove_dir(&key).unwrap();
    }
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    std::fs::write(key, data).unwrap();
}

/// A temporary directory holding an empty Zarr v3 root group.
pub fn empty_group() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group"}"#,
    )
    .unwrap();
    dir
}

pub fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `tas[t, i, j] = 100 t + 8 i + j` (float32), with lat, lon and time.
pub fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("zarr.json"),
        r#"{"zarr_format": 3, "node_type": "group", "attributes": {"institution": "zarr-serve tests"}}"#,
    )
    .unwrap();
    write_array(
        root,
        "lat",
        &[4],
        "float64",
        &["lat"],
        json!({"units": "degrees_north"}),
        &f64s(&LATS),
    );
    write_array(
        root,
        "lon",
        &[8],
        "float64",
        &["lon"],
        json!({"units": "degrees_east"}),
        &f64s(&LONS),
    );
    write_array(
        root,
        "time",
        &[2],
        "float64",
        &["time"],
        json!({"units": "days since 2000-01-01", "standard_name": "time"}),
        &f64s(&[0.0, 1.0]),
    );
    let tas: Vec<u8> = (0..2)
        .flat_map(|t| (0..4).flat_map(move |i| (0..8).map(move |j| (100 * t + 8 * i + j) as f32)))
        .flat_map(f32::to_le_bytes)
        .collect();
    write_array(
        root,
        "tas",
        &[2, 4, 8],
        "float32",
        &["time", "lat", "lon"],
        json!({"long_name": "air temperature"}),
        &tas,
    );
    // The latest slice with longitude first: tas_xy[j, i] = tas[1, i, j].
    let xy: Vec<u8> = (0..8)
        .flat_map(|j| (0..4).map(move |i| (100 + 8 * i + j) as f32))
        .flat_map(f32::to_le_bytes)
        .collect();
    write_array(root, "tas_xy", &[8, 4], "float32", &["lon", "lat"], json!({}), &xy);
    dir
}

/// RGBA pixels of a PNG.
pub fn pixels(png: &[u8]) -> (u32, u32, Vec<u8>) {
    // Indexed or RGBA: palettes and tRNS expanded, always RGBA.
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::ALPHA);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        other => panic!("expected RGBA, got {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// The cell of a sorted-or-reversed list of centres holding `v` (edges at
/// midpoints, outer ones mirrored; a shared edge goes to the larger index).
pub fn cell(centres: &[f64], v: f64) -> Option<usize> {
    let n = centres.len();
    let edge = |k: usize| match k {
        0 => centres[0] - (centres[1] - centres[0]) / 2.0,
        k if k == n => centres[n - 1] + (centres[n - 1] - centres[n - 2]) / 2.0,
        k => (centres[k - 1] + centres[k]) / 2.0,
    };
    (0..n).find(|&k| {
        let (a, b) = (edge(k), edge(k + 1));
        if a < b {
            a <= v && v < b
        } else {
            b < v && v <= a
        }
    })
}

/// `tas[y, x] = y * n + x` on an n x n global grid (float32, chunks of
/// 256 x 256; n a multiple of 256), with `lat` (north to south) and `lon`.
pub fn big_grid(root: &std::path::Path, n: usize) {
    std::fs::write(root.join("zarr.json"), r#"{"zarr_format": 3, "node_type": "group"}"#).unwrap();
    let step = 180.0 / n as f64;
    let lats: Vec<f64> = (0..n).map(|i| 90.0 - step * (i as f64 + 0.5)).collect();
    let lons: Vec<f64> = (0..n).map(|j| -180.0 + 2.0 * step * (j as f64 + 0.5)).collect();
    let degrees = |units: &str| json!({ "units": units });
    write_array(
        root,
        "lat",
        &[n as u64],
        "float64",
        &["lat"],
        degrees("degrees_north"),
        &f64s(&lats),
    );
    write_array(
        root,
        "lon",
        &[n as u64],
        "float64",
        &["lon"],
        degrees("degrees_east"),
        &f64s(&lons),
    );
    let chunk = 256;
    let node = root.join("tas");
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [n, n], "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk, chunk]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "dimension_names": ["lat", "lon"], "attributes": {"long_name": "air temperature"},
    });
    std::fs::create_dir_all(&node).unwrap();
    std::fs::write(node.join("zarr.json"), meta.to_string()).unwrap();
    for ci in 0..n / chunk {
        std::fs::create_dir_all(node.join(format!("c/{ci}"))).unwrap();
        for cj in 0..n / chunk {
            let data: Vec<u8> = (0..chunk)
                .flat_map(|i| (0..chunk).map(move |j| ((ci * chunk + i) * n + cj * chunk + j) as f32))
                .flat_map(f32::to_le_bytes)
                .collect();
            std::fs::write(node.join(format!("c/{ci}/{cj}")), data).unwrap();
        }
    }
}
