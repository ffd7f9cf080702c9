//! Helpers for reading the JSON of `zarr.json` documents, shared by the
//! metadata, chunk grid, key encoding and codec parsers.

use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};

/// A list of non-negative integers, naming `field` in the error.
pub(crate) fn u64_list(value: &Value, field: &str) -> Result<Vec<u64>> {
    let bad = || corrupt(format!("{field} {value} is not a list of non-negative integers"));
    value
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_u64().ok_or_else(bad))
        .collect()
}

/// The `name` and `configuration` of an extension point (`chunk_grid`,
/// `chunk_key_encoding`, a codec), given either as an object or a bare name.
pub(crate) fn name_and_configuration<'a>(
    value: &'a Value,
    field: &str,
) -> Result<(&'a str, Option<&'a Map<String, Value>>)> {
    match value {
        Value::String(name) => Ok((name, None)),
        Value::Object(obj) => {
            let name = obj
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| corrupt(format!("{field} {value} has no name")))?;
            let config = match obj.get("configuration") {
                None | Some(Value::Null) => None,
                Some(Value::Object(c)) => Some(c),
                Some(other) => return Err(corrupt(format!("{field} configuration {other} is not an object"))),
            };
            Ok((name, config))
        }
        other => Err(corrupt(format!("{field} {other} is neither a name nor an object"))),
    }
}

/// The `id` and configuration of a numcodecs codec (`{"id": "zlib", "level": 1}`);
/// `what` names the field in errors (`"filter"`, `"compressor"`).
pub(crate) fn numcodecs_id<'a>(value: &'a Value, what: &str) -> Result<(&'a str, &'a Map<String, Value>)> {
    let obj = value
        .as_object()
        .ok_or_else(|| corrupt(format!("{what} {value} is not an object")))?;
    let id = obj
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| corrupt(format!("{what} {value} has no id")))?;
    Ok((id, obj))
}
