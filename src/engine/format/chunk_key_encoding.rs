//! Chunk key encodings: `default` and `v2`.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#chunk-key-encoding>.
//! Example: `{"name": "default", "configuration": {"separator": "/"}}`; the
//! configuration may be absent.

use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::format::json::name_and_configuration;

/// How chunk grid coordinates become store keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkKeyEncoding {
    /// `c/1/2` (or `c.1.2`); `c` for a 0-d array.
    Default {
        /// `/` or `.`.
        separator: char,
    },
    /// `1.2` (or `1/2`); `0` for a 0-d array.
    V2 {
        /// `.` or `/`.
        separator: char,
    },
}

impl ChunkKeyEncoding {
    /// Parse `chunk_key_encoding`.
    pub fn from_json(value: &Value) -> Result<Self> {
        let (name, config) = name_and_configuration(value, "chunk_key_encoding")?;
        let separator = match config.and_then(|c| c.get("separator")) {
            None => None,
            Some(Value::String(s)) if s == "/" || s == "." => s.chars().next(),
            Some(other) => {
                return Err(Error::Unsupported(format!(
                    "chunk_key_encoding.configuration.separator {other}"
                )))
            }
        };
        match name {
            "default" => Ok(Self::Default {
                separator: separator.unwrap_or('/'),
            }),
            "v2" => Ok(Self::V2 {
                separator: separator.unwrap_or('.'),
            }),
            other => Err(Error::Unsupported(format!("chunk_key_encoding \"{other}\""))),
        }
    }

    /// The key of the chunk at `coords`, relative to the array's node.
    pub fn encode(&self, coords: &[u64]) -> String {
        let join = |sep: char| {
            coords
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(&sep.to_string())
        };
        match self {
            Self::Default { separator } if coords.is_empty() => {
                let _ = separator;
                "c".to_string()
            }
            Self::Default { separator } => format!("c{separator}{}", join(*separator)),
            Self::V2 { .. } if coords.is_empty() => "0".to_string(),
            Self::V2 { separator } => join(*separator),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_keys() {
        let enc = |v: Value, c: &[u64]| ChunkKeyEncoding::from_json(&v).unwrap().encode(c);
        assert_eq!(enc(json!({"name": "default"}), &[1, 2]), "c/1/2");
        assert_eq!(
            enc(json!({"name": "default", "configuration": {"separator": "."}}), &[1, 2]),
            "c.1.2"
        );
        assert_eq!(enc(json!({"name": "default"}), &[]), "c");
        assert_eq!(enc(json!({"name": "v2"}), &[3, 0]), "3.0");
        assert_eq!(
            enc(json!({"name": "v2", "configuration": {"separator": "/"}}), &[3, 0]),
            "3/0"
        );
        assert_eq!(enc(json!({"name": "v2"}), &[]), "0");
        assert!(ChunkKeyEncoding::from_json(&json!({"name": "default", "configuration": {"separator": "-"}})).is_err());
        assert!(ChunkKeyEncoding::from_json(&json!({"name": "hashed"})).is_err());
    }
}
