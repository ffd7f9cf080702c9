//! The fuzz targets' properties over the committed corpora and crash
//! reproducers (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`): a
//! quick regression run of everything fuzzing found, in every `cargo test`.

use std::path::Path;

use zarr_serve::fuzz_checks;

fn run(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut count = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            check(&std::fs::read(&path).unwrap());
            count += 1;
        }
    }
    // Seeds the corpus always has, so the checks run even before fuzzing.
    for seed in [
        &b""[..],
        b"0",
        b"[1:5,::-2]",
        b"...,3",
        b"\x00",
        b"\x01",
        b"\x07{}",
        b"\x03\x1f\x8b",
    ] {
        check(seed);
    }
    eprintln!("{target}: {count} corpus inputs");
}

#[test]
fn select_corpus() {
    run("select", fuzz_checks::select);
}

#[test]
fn zarr_json_corpus() {
    run("zarr_json", fuzz_checks::zarr_json);
}

#[test]
fn shard_index_corpus() {
    run("shard_index", fuzz_checks::shard_index);
}

#[test]
fn codecs_corpus() {
    run("codecs", fuzz_checks::codecs);
}

#[test]
fn wms_params_corpus() {
    run("wms_params", fuzz_checks::wms_params);
}

#[test]
fn edr_coords_corpus() {
    run("edr_coords", fuzz_checks::edr_coords);
}

#[test]
fn dap2_constraint_corpus() {
    run("dap2_constraint", fuzz_checks::dap2_constraint);
}

#[test]
fn dap4_constraint_corpus() {
    run("dap4_constraint", fuzz_checks::dap4_constraint);
}

#[test]
fn kerchunk_corpus() {
    run("kerchunk", fuzz_checks::kerchunk);
}
