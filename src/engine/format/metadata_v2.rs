//! Zarr v2 metadata: `.zarray`, `.zgroup` and `.zattrs`, read as
//! zarr-python 3 reads them.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#metadata>.
//! Example: `{"zarr_format": 2, "shape": [100, 100], "chunks": [10, 10],
//! "dtype": "<f8", "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5,
//! "shuffle": 1}, "fill_value": "NaN", "order": "C", "filters": null,
//! "dimension_separator": "."}`. An array becomes the same [`ArrayMetadata`]
//! as a v3 one: keys by the `v2` chunk key encoding, and a codec chain of
//! `transpose` (order `F`), the filters and byte order, and the compressor.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::chunk_grid::ChunkGrid;
use crate::engine::format::chunk_key_encoding::ChunkKeyEncoding;
use crate::engine::format::codec::array_to_bytes::bytes::Endian;
use crate::engine::format::codec::numcodecs::num::NumType;
use crate::engine::format::codec::{ChunkRepr, CodecChain};
use crate::engine::format::data_type::DataType;
use crate::engine::format::json::{numcodecs_id, u64_list};
use crate::engine::format::metadata::{ArrayMetadata, NodeMetadata};
use crate::engine::format::time::TimeUnit;

/// A Zarr v2 array node from its `.zarray` (stored under `key`) and `.zattrs`.
pub(crate) fn array_node(zarray: &[u8], zattrs: Option<&[u8]>, key: &str) -> Result<NodeMetadata> {
    let (raw, parsed) = parse_array(zarray, key)?;
    let attributes = parse_attributes(zattrs, key)?;
    let parsed = parsed.map(|m| Box::new(m.with_xarray_dimensions(&attributes)));
    Ok(NodeMetadata::Array {
        raw,
        zarr_format: 2,
        attributes,
        parsed,
    })
}

/// A Zarr v2 group node from its `.zgroup` (stored under `key`) and `.zattrs`.
pub(crate) fn group_node(zgroup: &[u8], zattrs: Option<&[u8]>, key: &str) -> Result<NodeMetadata> {
    Ok(NodeMetadata::Group {
        raw: parse_group(zgroup, key)?,
        zarr_format: 2,
        attributes: parse_attributes(zattrs, key)?,
    })
}

/// Check `zarr_format` of a v2 document.
fn check_format(obj: &Map<String, Value>, key: &str) -> Result<()> {
    match obj.get("zarr_format") {
        Some(v) if v.as_u64() == Some(2) => Ok(()),
        Some(v) => Err(Error::corrupt(key, format!("zarr_format {v} in a v2 document"))),
        None => Err(Error::corrupt(key, "no zarr_format")),
    }
}

/// Parse a `.zgroup` document stored under `key`.
fn parse_group(bytes: &[u8], key: &str) -> Result<Value> {
    let raw: Value =
        serde_json::from_slice(bytes).map_err(|e| Error::corrupt(key, format!(".zgroup is not valid JSON: {e}")))?;
    let obj = raw
        .as_object()
        .ok_or_else(|| Error::corrupt(key, ".zgroup is not a JSON object"))?;
    check_format(obj, key)?;
    Ok(raw)
}

/// Parse `.zattrs` (absent: `{}`).
fn parse_attributes(bytes: Option<&[u8]>, key: &str) -> Result<Value> {
    let Some(bytes) = bytes else {
        return Ok(json!({}));
    };
    let attrs: Value =
        serde_json::from_slice(bytes).map_err(|e| Error::corrupt(key, format!(".zattrs is not valid JSON: {e}")))?;
    if !attrs.is_object() {
        return Err(Error::corrupt(key, ".zattrs is not a JSON object"));
    }
    Ok(attrs)
}

/// Parse a `.zarray` document stored under `key`: the document, and the
/// validated metadata or why the array cannot be read.
fn parse_array(bytes: &[u8], key: &str) -> Result<(Value, Result<Box<ArrayMetadata>>)> {
    let raw: Value =
        serde_json::from_slice(bytes).map_err(|e| Error::corrupt(key, format!(".zarray is not valid JSON: {e}")))?;
    let obj = raw
        .as_object()
        .ok_or_else(|| Error::corrupt(key, ".zarray is not a JSON object"))?;
    check_format(obj, key)?;
    let parsed = array_metadata(obj).map(Box::new);
    Ok((raw, parsed))
}

fn array_metadata(obj: &Map<String, Value>) -> Result<ArrayMetadata> {
    let field = |name: &str| obj.get(name).ok_or_else(|| corrupt(format!(".zarray has no {name}")));
    let shape = u64_list(field("shape")?, "shape")?;
    let chunks = u64_list(field("chunks")?, "chunks")?;
    let grid = json!({"name": "regular", "configuration": {"chunk_shape": chunks}});
    let chunk_grid = ChunkGrid::from_json(&grid, &shape)?;
    let dtype = field("dtype")?;
    let typestr = dtype
        .as_str()
        .ok_or_else(|| Error::Unsupported(format!("structured dtype {dtype}")))?;
    let (data_type, endian) = data_type(typestr, obj.get("filters"))?;
    let fill_value = match obj.get("fill_value") {
        None | Some(Value::Null) => data_type.default_fill(),
        Some(v) => data_type.fill_value_from_json(v)?,
    };
    let fortran = match obj.get("order").and_then(Value::as_str) {
        Some("C") | None => false,
        Some("F") => true,
        Some(other) => return Err(corrupt(format!("order \"{other}\" is neither C nor F"))),
    };
    let separator = match obj.get("dimension_separator") {
        None | Some(Value::Null) => '.',
        Some(Value::String(s)) if s == "." || s == "/" => s.chars().next().expect("one char"),
        Some(other) => return Err(corrupt(format!("dimension_separator {other}"))),
    };
    let repr = ChunkRepr::new(chunk_grid.first_chunk_shape(), data_type, fill_value.clone());
    let codecs = CodecChain::from_v2(obj.get("filters"), obj.get("compressor"), endian, fortran, &repr)?;
    Ok(ArrayMetadata {
        shape,
        data_type,
        chunk_grid,
        chunk_key_encoding: ChunkKeyEncoding::V2 { separator },
        fill_value,
        codecs: Arc::new(codecs),
        chains: Default::default(),
        dimension_names: None,
    })
}

/// The data type zarr-python 3 gives a NumPy type string, and the byte
/// order it is stored in: numeric types, `<U5` (`fixed_length_utf32`),
/// `|S5` (`null_terminated_bytes`), `<M8[ns]`/`<m8[s]` (datetimes) and
/// `|O`, which the first filter makes `string` (`vlen-utf8`) or
/// `variable_length_bytes` (`vlen-bytes`).
fn data_type(typestr: &str, filters: Option<&Value>) -> Result<(DataType, Endian)> {
    let unsupported = || Error::Unsupported(format!("dtype \"{typestr}\""));
    let endian = match typestr.as_bytes().first() {
        Some(b'>') => Endian::Big,
        _ => Endian::Little,
    };
    let rest = typestr.get(1..).unwrap_or("");
    let length = || {
        rest[1..]
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(unsupported)
    };
    let data_type = match rest.chars().next() {
        Some('U') => DataType::FixedUtf32(length()? * 4),
        Some('S') => DataType::FixedBytes(length()?),
        Some(kind @ ('M' | 'm')) => {
            let unit = rest[1..]
                .strip_prefix("8[")
                .and_then(|u| u.strip_suffix(']'))
                .ok_or_else(unsupported)?;
            let unit = TimeUnit::parse(unit)?;
            match kind {
                'M' => DataType::DateTime64(unit),
                _ => DataType::TimeDelta64(unit),
            }
        }
        Some('O') => {
            let first = filters.and_then(Value::as_array).and_then(|f| f.first());
            match first.map(|f| numcodecs_id(f, "filter")).transpose()?.map(|(id, _)| id) {
                Some("vlen-utf8") => DataType::String,
                Some("vlen-bytes") => DataType::Bytes(crate::engine::format::data_type::BytesName::VariableLengthBytes),
                Some(other) => return Err(Error::Unsupported(format!("object codec \"{other}\""))),
                None => return Err(Error::Unsupported("dtype \"|O\" without an object codec filter".into())),
            }
        }
        _ => return NumType::parse(typestr).map(|n| (n.data_type, n.endian)),
    };
    Ok((data_type, endian))
}

/// The v3 data type of a `.zarray`'s `dtype` as the node document shows
/// it (`<i2` is `int16`), whether or not its codecs can be read; `None`
/// when the dtype itself is not one zarr-python 3 reads.
pub(crate) fn data_type_document(raw: &Value) -> Option<Value> {
    let typestr = raw.get("dtype")?.as_str()?;
    data_type(typestr, raw.get("filters")).ok().map(|(t, _)| t.to_json())
}

/// The v2 pipeline as the node document shows it: the filters in order,
/// then the compressor, nulls left out.
pub(crate) fn codecs_document(raw: &Value) -> Value {
    let mut codecs: Vec<Value> = match raw.get("filters") {
        Some(Value::Array(list)) => list.clone(),
        _ => Vec::new(),
    };
    if let Some(c) = raw.get("compressor").filter(|c| !c.is_null()) {
        codecs.push(c.clone());
    }
    Value::Array(codecs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zarray(extra: Value) -> Vec<u8> {
        let mut doc = json!({"zarr_format": 2, "shape": [4, 6], "chunks": [2, 3], "dtype": ">i2",
            "compressor": null, "fill_value": null, "order": "C", "filters": null});
        for (k, v) in extra.as_object().unwrap() {
            doc[k] = v.clone();
        }
        serde_json::to_vec(&doc).unwrap()
    }

    #[test]
    fn an_array_parses_to_v2_keys_and_a_chain() {
        let (_, parsed) = parse_array(&zarray(json!({"dimension_separator": "/"})), "a/.zarray").unwrap();
        let meta = parsed.unwrap();
        assert_eq!(meta.data_type, DataType::Int16);
        assert_eq!(meta.chunk_key_encoding.encode(&[1, 2]), "1/2");
        assert_eq!(meta.fill_value, vec![0, 0]);
        // Big-endian, C order, no filters or compressor: bytes swapped.
        let chunk = bytes::Bytes::from(vec![0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6]);
        assert_eq!(&meta.codecs.decode(chunk).unwrap()[..4], &[1, 0, 2, 0]);
    }

    #[test]
    fn fortran_order_is_transposed_back() {
        let (_, parsed) = parse_array(&zarray(json!({"order": "F", "dtype": "|u1"})), "a/.zarray").unwrap();
        let meta = parsed.unwrap();
        // A 2x3 chunk [[1,2,3],[4,5,6]] stored column by column.
        let out = meta.codecs.decode(bytes::Bytes::from(vec![1, 4, 2, 5, 3, 6])).unwrap();
        assert_eq!(&out[..], &[1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn unsupported_and_corrupt_are_told_apart() {
        for (extra, unsupported) in [
            (json!({"dtype": "|O"}), true),
            (json!({"dtype": "|O", "filters": [{"id": "pickle"}]}), true),
            (json!({"dtype": "<M8"}), true),
            (json!({"dtype": "<U0"}), true),
            (json!({"dtype": [["a", "<i4"]]}), true),
            (json!({"compressor": {"id": "snappy"}}), true),
            (json!({"filters": [{"id": "categorize"}]}), true),
            (json!({"order": "K"}), false),
            (json!({"chunks": "x"}), false),
        ] {
            let (_, parsed) = parse_array(&zarray(extra.clone()), "a/.zarray").unwrap();
            let e = parsed.unwrap_err();
            assert_eq!(matches!(e, Error::Unsupported(_)), unsupported, "{extra}: {e:?}");
        }
        assert!(parse_array(b"{\"zarr_format\": 3}", "a/.zarray").is_err());
    }
}
