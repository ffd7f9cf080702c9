//! Known answers from zfpy 1.0.1 (`tests/fixtures/zfp`, see its
//! `generate.py`): 1-D to 4-D, every scalar type and mode, partial blocks,
//! zero blocks, subnormals; decoded with the header and without it, and
//! encoded byte for byte as libzfp encodes.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/zfp")
}

fn cases() -> Vec<Value> {
    let text = std::fs::read(fixtures().join("cases.json")).unwrap();
    let cases: Value = serde_json::from_slice(&text).unwrap();
    cases["cases"].as_array().unwrap().clone()
}

fn data_type(name: &str) -> DataType {
    match name {
        "float32" => DataType::Float32,
        "float64" => DataType::Float64,
        "int32" => DataType::Int32,
        _ => DataType::Int64,
    }
}

/// The zarrs `zfp` configuration of a case's mode.
fn configuration(case: &Value) -> Value {
    match case["mode"].as_str().unwrap() {
        "rate" | "rate_low" => json!({"mode": "fixed_rate", "rate": case["rate"]}),
        "precision" => json!({"mode": "fixed_precision", "precision": case["precision"]}),
        "accuracy" => json!({"mode": "fixed_accuracy", "tolerance": case["tolerance"]}),
        _ => json!({"mode": "reversible"}),
    }
}

#[test]
fn streams_decode_as_zfpy_decodes_them() {
    let cases = cases();
    assert!(cases.len() >= 70, "{} cases", cases.len());
    let mut headerless = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let stream = std::fs::read(fixtures().join(format!("{name}.zfp"))).unwrap();
        let want = std::fs::read(fixtures().join(format!("{name}.bin"))).unwrap();
        let shape: Vec<u64> = serde_json::from_value(case["shape"].clone()).unwrap();
        let dt = data_type(case["dtype"].as_str().unwrap());
        let mut seen = None;
        let got = decode_with_header(&stream, |field| {
            seen = Some(field.clone());
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            seen,
            Some(Field::of_shape(scalar_of(dt).unwrap(), &shape).unwrap()),
            "{name}"
        );
        assert!(
            got == want,
            "{name}: first difference at byte {:?}",
            first_difference(&got, &want)
        );
        // A 96-bit header (short mode) ends on a byte: the rest is the
        // stream zarrs' `zfp` codec stores (a fixed rate's padded to its
        // own words).
        if short_header(&stream) {
            let mut body = stream[12..].to_vec();
            if let Some(rate) = case["rate"].as_f64() {
                let field = Field::of_shape(scalar_of(dt).unwrap(), &shape).unwrap();
                let bits = Mode::fixed_rate(rate, field.scalar, shape.len()).max_bits;
                body.resize((field.blocks() as u64 * u64::from(bits)).div_ceil(64) as usize * 8, 0);
            }
            let repr = ChunkRepr::new(shape.clone(), dt, vec![0; dt.size()]);
            let config = configuration(case);
            let codec = ZfpCodec::from_json(config.as_object(), &repr).unwrap();
            let got = codec.decode(&body, &repr).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                got == want,
                "{name} without header: {:?}",
                first_difference(&got, &want)
            );
            headerless += 1;
        }
    }
    assert!(headerless >= 50, "{headerless} decoded without header");
}

/// Whether the header's mode has the 12-bit form (not 4095).
fn short_header(stream: &[u8]) -> bool {
    let mut r = BitReader::new(stream);
    r.bits(32);
    r.bits(52);
    r.bits(12) != 4095
}

/// The mode zfpy compressed a case with.
fn mode_of(case: &Value, field: &Field) -> Mode {
    match case["mode"].as_str().unwrap() {
        "rate" | "rate_low" => Mode::fixed_rate(case["rate"].as_f64().unwrap(), field.scalar, field.sizes.len()),
        "precision" => Mode::fixed_precision(case["precision"].as_u64().unwrap() as u32),
        "accuracy" => Mode::fixed_accuracy(case["tolerance"].as_f64().unwrap()),
        _ => Mode::reversible(),
    }
}

#[test]
fn streams_encode_as_zfpy_encodes_them() {
    for case in &cases() {
        let name = case["name"].as_str().unwrap();
        let input = std::fs::read(fixtures().join(format!("{name}.in.bin"))).unwrap();
        let want = std::fs::read(fixtures().join(format!("{name}.zfp"))).unwrap();
        let shape: Vec<u64> = serde_json::from_value(case["shape"].clone()).unwrap();
        let dt = data_type(case["dtype"].as_str().unwrap());
        let field = Field::of_shape(scalar_of(dt).unwrap(), &shape).unwrap();
        let got = encode(&input, &field, &mode_of(case, &field), true).unwrap();
        assert!(
            got == want,
            "{name}: {} bytes vs {}, first difference at {:?}",
            got.len(),
            want.len(),
            first_difference(&got, &want)
        );
        // Reversible mode gives the input back.
        if case["mode"] == "reversible" {
            assert_eq!(decode_with_header(&got, |_| Ok(())).unwrap(), input, "{name}");
        }
    }
}

/// A float32 block of subnormals only: libzfp's scale overflows to
/// infinity and x86 turns every value into `INT_MIN` (zfpy 1.0.1's bytes,
/// which decode to -0.0); the encoder does the same.
#[test]
fn a_block_of_subnormals_encodes_as_libzfp_does() {
    let values: Vec<u8> = [1e-40f32, -3e-41, 5e-42, 2e-39]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let field = Field::of_shape(Scalar::Float, &[4]).unwrap();
    for (mode, zfpy) in [
        (
            Mode::fixed_precision(20),
            "7a6670053200000000003081039a0a000000000000000000",
        ),
        (
            Mode::fixed_accuracy(0.0),
            "7a667005320000000000f0ff008088e0af8737a0a900000000000000000000000000000000000000",
        ),
        (
            Mode::fixed_rate(16.0, Scalar::Float, 1),
            "7a667005320000000000f003039a0a000000000000000000",
        ),
    ] {
        let got = encode(&values, &field, &mode, true).unwrap();
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, zfpy, "{mode:?}");
    }
}

/// What zarrs' codec writes it reads back: every mode, promoted integers,
/// fixed rates sized as zarrs sizes them.
#[test]
fn the_zfp_codec_reads_what_it_writes() {
    let values: Vec<f64> = (0..7 * 9).map(|i| (f64::from(i) * 0.37).sin() * 100.0).collect();
    for (dt, config) in [
        (DataType::Float32, json!({"mode": "fixed_rate", "rate": 12})),
        (DataType::Float64, json!({"mode": "fixed_accuracy", "tolerance": 0.01})),
        (DataType::Float64, json!({"mode": "fixedprecision", "precision": 30})),
        (DataType::Int16, json!({"mode": "reversible"})),
        (DataType::UInt8, json!({"mode": "reversible"})),
        (DataType::UInt64, json!({"mode": "reversible"})),
        (
            DataType::Float32,
            json!({"mode": "expert", "minbits": 1, "maxbits": 300, "maxprec": 20, "minexp": -20}),
        ),
    ] {
        let repr = ChunkRepr::new(vec![7, 9], dt, vec![0; dt.size()]);
        let codec = ZfpCodec::from_json(config.as_object(), &repr).unwrap();
        let raw: Vec<u8> = values
            .iter()
            .flat_map(|&v| match dt {
                DataType::Float32 => (v as f32).to_le_bytes().to_vec(),
                DataType::Float64 => v.to_le_bytes().to_vec(),
                DataType::Int16 => ((v * 300.0) as i16).to_le_bytes().to_vec(),
                DataType::UInt8 => vec![(v + 100.0) as u8],
                _ => ((v.abs() * 1e15) as u64).to_le_bytes().to_vec(),
            })
            .collect();
        let encoded = codec.encode(&raw, &repr).unwrap();
        let back = codec.decode(&encoded, &repr).unwrap();
        assert_eq!(back.len(), raw.len(), "{config}");
        if config["mode"] == "reversible" {
            assert_eq!(back, raw, "{dt:?} {config}");
        }
        if config["mode"] == "fixed_rate" {
            // zarrs' size: 12 bits a value in blocks of 64 values, 2 x 3 blocks.
            assert_eq!(encoded.len(), 2 * 3 * 64 * 12 / 8, "{config}");
        }
        // Fixed accuracy keeps its promise (zfp is not a projection:
        // encoding what it decoded may move the last bits again).
        if config["mode"] == "fixed_accuracy" {
            for (a, b) in back.chunks(8).zip(raw.chunks(8)) {
                let (a, b) = (
                    f64::from_le_bytes(a.try_into().unwrap()),
                    f64::from_le_bytes(b.try_into().unwrap()),
                );
                assert!((a - b).abs() <= 0.01, "{a} vs {b}");
            }
        }
    }
    let repr = ChunkRepr::new(vec![4], DataType::Float32, vec![0; 4]);
    let lossy = ZfpCodec::from_json(json!({"mode": "fixed_precision", "precision": 9}).as_object(), &repr).unwrap();
    let nan: Vec<u8> = [1.0f32, f32::NAN, 2.0, 3.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(matches!(lossy.encode(&nan, &repr), Err(Error::InvalidRequest(_))));
    let exact = ZfpCodec::from_json(json!({"mode": "reversible"}).as_object(), &repr).unwrap();
    let back = exact.decode(&exact.encode(&nan, &repr).unwrap(), &repr).unwrap();
    assert_eq!(back, nan);
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then_some(a.len().min(b.len())))
}

#[test]
fn damaged_streams_are_errors_never_values() {
    let stream = std::fs::read(fixtures().join("float64_3d_precision.zfp")).unwrap();
    let accept = |_: &Field| Ok(());
    // Cut short: the blocks run out.
    let cut = decode_with_header(&stream[..stream.len() / 2], accept).unwrap_err();
    assert!(matches!(cut, Error::Corrupt { .. }), "{cut}");
    // Not a zfp stream, or another codec version.
    assert!(matches!(
        decode_with_header(b"not zfp at all!!", accept),
        Err(Error::Corrupt { .. })
    ));
    let mut other = stream.clone();
    other[3] = 4;
    assert!(matches!(decode_with_header(&other, accept), Err(Error::Unsupported(_))));
    // The caller refuses the field before anything is decoded.
    let refused = decode_with_header(&stream, |f| Err(corrupt(format!("{} values", f.len())))).unwrap_err();
    assert!(refused.to_string().contains("210 values"), "{refused}");
    // A fixed-rate chunk whose length no rate explains.
    let repr = ChunkRepr::new(vec![9, 7], DataType::Float32, vec![0; 4]);
    let codec = ZfpCodec::from_json(json!({"mode": "fixed_rate", "rate": 8}).as_object(), &repr).unwrap();
    let e = codec.decode(&[0; 24], &repr).unwrap_err();
    assert!(e.to_string().contains("rate 8 gives 96 bytes"), "{e}");
}

#[test]
fn configurations_and_types_are_checked() {
    let repr = |dt: DataType, shape: Vec<u64>| ChunkRepr::new(shape, dt, vec![0; dt.size()]);
    let f32_2d = repr(DataType::Float32, vec![4, 4]);
    for bad in [json!({"mode": "fast"}), json!({"mode": "fixed_rate"}), json!({})] {
        assert!(ZfpCodec::from_json(bad.as_object(), &f32_2d).is_err(), "{bad}");
    }
    let expert = json!({"mode": "expert", "minbits": 9, "maxbits": 8, "maxprec": 20, "minexp": -10});
    assert!(ZfpCodec::from_json(expert.as_object(), &f32_2d).is_err());
    let reversible = json!({"mode": "reversible"});
    let complex = ZfpCodec::from_json(reversible.as_object(), &repr(DataType::Complex64, vec![4])).unwrap_err();
    assert!(
        matches!(&complex, Error::Unsupported(m) if m.contains("complex64")),
        "{complex}"
    );
    let codec = ZfpCodec::from_json(reversible.as_object(), &repr(DataType::Float32, vec![1; 5])).unwrap();
    let five = codec.decode(&[0; 8], &repr(DataType::Float32, vec![1; 5])).unwrap_err();
    assert!(
        matches!(&five, Error::Unsupported(m) if m.contains("5-dimensional")),
        "{five}"
    );
}

/// zarrs promotes 8- and 16-bit integers into int32 (zfp's promote
/// functions) and clamps unsigned ones; decoding demotes them back.
#[test]
fn promoted_integers_are_demoted() {
    let int32 = |values: &[i32]| values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    assert_eq!(
        demote(int32(&[-5 << 23, 7 << 23, i32::MAX]), DataType::Int8),
        vec![251, 7, 127]
    );
    assert_eq!(
        demote(int32(&[(200 - 0x80) << 23, i32::MIN]), DataType::UInt8),
        vec![200, 0]
    );
    assert_eq!(
        demote(int32(&[-300 << 15]), DataType::Int16),
        (-300i16).to_le_bytes().to_vec()
    );
    assert_eq!(
        demote(int32(&[(60000 - 0x8000) << 15]), DataType::UInt16),
        60000u16.to_le_bytes().to_vec()
    );
    assert_eq!(demote(int32(&[-1, 9]), DataType::UInt32), int32(&[0, 9]));
    assert_eq!(demote(int32(&[3, -4]), DataType::Int32), int32(&[3, -4]));
}
