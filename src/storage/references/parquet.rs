//! Kerchunk's Parquet references: a directory (`refs.parq/`) with a
//! `.zmetadata` JSON document (`metadata`: every metadata key's JSON;
//! `record_size`) and, per array, files `ARRAY/refs.N.parq` of
//! `record_size` rows each: row `i` of file `N` is the array's chunk
//! `N * record_size + i` in C order of its chunk grid, with the columns
//! `path`, `offset`, `size` (a byte range, or a whole object when both are
//! 0) and `raw` (the value itself). A row with neither is a missing chunk.
//!
//! As fsspec's `LazyReferenceMapper` writes and reads them.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use serde_json::Value;

use super::Reference;

/// One array's chunk grid, as its `.zarray` says.
#[derive(Debug, Clone)]
struct Grid {
    /// Chunks along each dimension.
    counts: Vec<u64>,
    separator: char,
}

/// A Parquet reference set's metadata: every metadata key and each array's grid.
#[derive(Debug)]
pub(super) struct ParquetRefs {
    /// Metadata keys (`.zgroup`, `a/.zarray`, ...) with their JSON text.
    pub(super) metadata: BTreeMap<String, Bytes>,
    record_size: u64,
    grids: BTreeMap<String, Grid>,
}

impl ParquetRefs {
    /// Parse the `.zmetadata` document.
    pub(super) fn parse(text: &[u8]) -> Result<Self, String> {
        let doc: Value = serde_json::from_slice(text).map_err(|e| format!(".zmetadata is not JSON: {e}"))?;
        let record_size = doc
            .get("record_size")
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .ok_or(".zmetadata has no positive 'record_size'")?;
        let entries = doc
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or(".zmetadata has no 'metadata' object")?;
        let mut metadata = BTreeMap::new();
        let mut grids = BTreeMap::new();
        for (key, value) in entries {
            // Written as JSON objects; a string is the document's text.
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Some(array) = key.strip_suffix("/.zarray").or((key == ".zarray").then_some("")) {
                let zarray: Value = serde_json::from_str(&text).map_err(|e| format!("{key}: {e}"))?;
                grids.insert(array.to_string(), grid(&zarray).map_err(|e| format!("{key}: {e}"))?);
            }
            metadata.insert(key.clone(), Bytes::from(text));
        }
        Ok(Self {
            metadata,
            record_size,
            grids,
        })
    }

    /// The record file and row of chunk `key` (`ARRAY/i.j.k`), if it is one
    /// of an array's chunks inside its grid.
    pub(super) fn locate(&self, key: &str) -> Option<(String, u64)> {
        let (array, chunk) = self.split(key)?;
        let grid = &self.grids[array];
        let indices: Vec<u64> = chunk
            .split(grid.separator)
            .map(|c| c.parse().ok())
            .collect::<Option<_>>()?;
        if indices.len() != grid.counts.len() || indices.iter().zip(&grid.counts).any(|(i, n)| i >= n) {
            return None;
        }
        let linear = indices.iter().zip(&grid.counts).fold(0u64, |acc, (i, n)| acc * n + i);
        let file = format!(
            "{}refs.{}.parq",
            if array.is_empty() {
                String::new()
            } else {
                format!("{array}/")
            },
            linear / self.record_size
        );
        Some((file, linear % self.record_size))
    }

    /// (array, chunk part) of a key under a known array: the longest array
    /// path the key starts with.
    fn split<'k>(&self, key: &'k str) -> Option<(&str, &'k str)> {
        self.grids.keys().rev().find_map(|array| {
            let rest = if array.is_empty() {
                Some(key)
            } else {
                key.strip_prefix(array.as_str())?.strip_prefix('/')
            };
            rest.filter(|r| !r.is_empty() && !r.starts_with('.'))
                .map(|r| (array.as_str(), r))
        })
    }
}

fn grid(zarray: &Value) -> Result<Grid, String> {
    let numbers = |name: &str| -> Result<Vec<u64>, String> {
        zarray
            .get(name)
            .and_then(Value::as_array)
            .ok_or(format!("no '{name}'"))?
            .iter()
            .map(|v| v.as_u64().ok_or(format!("'{name}' must hold non-negative integers")))
            .collect()
    };
    let (shape, chunks) = (numbers("shape")?, numbers("chunks")?);
    if shape.len() != chunks.len() || chunks.contains(&0) {
        return Err("'shape' and 'chunks' disagree".into());
    }
    let mut counts: Vec<u64> = shape.iter().zip(&chunks).map(|(s, c)| s.div_ceil(*c)).collect();
    if counts.is_empty() {
        counts.push(1);
    }
    let separator = match zarray.get("dimension_separator").and_then(Value::as_str) {
        Some("/") => '/',
        _ => '.',
    };
    Ok(Grid { counts, separator })
}

/// Every row of one record file: a reference, or `None` for a missing chunk.
pub(super) fn read_records(file: Bytes) -> Result<Arc<Vec<Option<Reference>>>, String> {
    let reader = SerializedFileReader::new(file).map_err(|e| format!("not a Parquet file: {e}"))?;
    let rows = reader.get_row_iter(None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for row in rows {
        let row = row.map_err(|e| e.to_string())?;
        let (mut path, mut offset, mut size, mut raw) = (None, 0u64, 0u64, None);
        for (name, field) in row.get_column_iter() {
            match (name.as_str(), field) {
                ("path", Field::Str(s)) => path = Some(s.clone()),
                ("path", Field::Bytes(b)) => path = Some(String::from_utf8_lossy(b.data()).into_owned()),
                ("offset", f) => offset = integer(f)?,
                ("size", f) => size = integer(f)?,
                ("raw", Field::Bytes(b)) => raw = Some(Bytes::copy_from_slice(b.data())),
                ("raw", Field::Str(s)) => raw = Some(Bytes::from(s.clone())),
                _ => {}
            }
        }
        out.push(match (raw, path) {
            (Some(raw), _) => Some(Reference::Inline(raw)),
            (None, Some(path)) if offset == 0 && size == 0 => Some(Reference::Object(path)),
            (None, Some(path)) => Some(Reference::Span(
                path,
                offset..offset.checked_add(size).ok_or("offset + size overflows")?,
            )),
            (None, None) => None,
        });
    }
    Ok(Arc::new(out))
}

fn integer(field: &Field) -> Result<u64, String> {
    let value = match field {
        Field::Long(n) => *n,
        Field::Int(n) => i64::from(*n),
        Field::ULong(n) => i64::try_from(*n).unwrap_or(-1),
        Field::UInt(n) => i64::from(*n),
        Field::Null => 0,
        other => return Err(format!("offset and size must be integers, not {other}")),
    };
    u64::try_from(value).map_err(|_| format!("negative offset or size {value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs() -> ParquetRefs {
        ParquetRefs::parse(
            br#"{"record_size": 4, "metadata": {
                ".zgroup": {"zarr_format": 2},
                "t/.zarray": {"shape": [10, 9], "chunks": [5, 3], "zarr_format": 2},
                "g/s/.zarray": "{\"shape\": [7], \"chunks\": [2], \"dimension_separator\": \"/\"}",
                "g/.zgroup": {"zarr_format": 2}}}"#,
        )
        .unwrap()
    }

    #[test]
    fn chunk_keys_locate_their_record_and_row() {
        let r = refs();
        // t: a 2 x 3 grid; chunk (1, 2) is number 5: file 1, row 1.
        assert_eq!(r.locate("t/1.2"), Some(("t/refs.1.parq".into(), 1)));
        assert_eq!(r.locate("t/0.0"), Some(("t/refs.0.parq".into(), 0)));
        assert_eq!(r.locate("g/s/3"), Some(("g/s/refs.0.parq".into(), 3)));
        for outside in ["t/2.0", "t/0.3", "t/0", "t/.zarray", "g/s/4", "u/0.0", "t/a.b"] {
            assert_eq!(r.locate(outside), None, "{outside}");
        }
        assert_eq!(
            &r.metadata["g/s/.zarray"][..],
            br#"{"shape": [7], "chunks": [2], "dimension_separator": "/"}"#
        );
        assert!(r.metadata[".zgroup"].starts_with(b"{"));
    }

    #[test]
    fn bad_documents_are_named() {
        for (text, needle) in [
            (&b"[]"[..], "record_size"),
            (br#"{"record_size": 0, "metadata": {}}"#, "record_size"),
            (br#"{"record_size": 3}"#, "metadata"),
            (
                br#"{"record_size": 3, "metadata": {"a/.zarray": {"shape": [3]}}}"#,
                "chunks",
            ),
        ] {
            let err = ParquetRefs::parse(text).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }
}
