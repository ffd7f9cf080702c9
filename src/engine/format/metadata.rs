//! `zarr.json` documents: parsing and validation of array and group metadata.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#metadata>.
//! Every rejection names the field and the value. Unknown names (codecs, data
//! types, grids, extensions) are [`Error::Unsupported`]; malformed structure is
//! [`Error::Corrupt`] naming the metadata key.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::chunk_grid::ChunkGrid;
use crate::engine::format::chunk_key_encoding::ChunkKeyEncoding;
use crate::engine::format::codec::CodecChain;
use crate::engine::format::data_type::DataType;
use crate::engine::format::json::u64_list;

/// The parsed metadata of a node (`zarr.json`, or Zarr v2's `.zarray` or
/// `.zgroup` with `.zattrs`), with the document kept verbatim.
#[derive(Debug, Clone)]
pub enum NodeMetadata {
    /// An array; `parsed` holds why it cannot be read, if it cannot.
    Array {
        /// `zarr.json` (or `.zarray`) verbatim.
        raw: Value,
        /// 3 or 2.
        zarr_format: u8,
        /// The node's attributes (v2: `.zattrs`).
        attributes: Value,
        /// The validated metadata, or why the array is unreadable.
        parsed: Result<Box<ArrayMetadata>>,
    },
    /// A group.
    Group {
        /// `zarr.json` (or `.zgroup`) verbatim.
        raw: Value,
        /// 3 or 2.
        zarr_format: u8,
        /// The node's attributes (v2: `.zattrs`).
        attributes: Value,
    },
}

impl NodeMetadata {
    /// Parse a `zarr.json` document stored under `key`.
    ///
    /// Fails only when the document is not a Zarr v3 node at all; an array
    /// that uses unsupported features parses with `parsed: Err(reason)`.
    pub fn parse(bytes: &[u8], key: &str) -> Result<Self> {
        let raw: Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::corrupt(key, format!("zarr.json is not valid JSON: {e}")))?;
        let obj = raw
            .as_object()
            .ok_or_else(|| Error::corrupt(key, "zarr.json is not a JSON object"))?;
        match obj.get("zarr_format") {
            Some(v) if v.as_u64() == Some(3) => {}
            Some(v) => return Err(Error::Unsupported(format!("zarr_format {v} (only 3 is supported)"))),
            None => return Err(Error::corrupt(key, "zarr.json has no zarr_format")),
        }
        let attributes = obj
            .get("attributes")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        match obj.get("node_type").and_then(Value::as_str) {
            Some("group") => Ok(NodeMetadata::Group {
                raw,
                zarr_format: 3,
                attributes,
            }),
            Some("array") => {
                let parsed = ArrayMetadata::from_json(&raw).map(|m| Box::new(m.with_xarray_dimensions(&attributes)));
                Ok(NodeMetadata::Array {
                    raw,
                    zarr_format: 3,
                    attributes,
                    parsed,
                })
            }
            _ => Err(Error::corrupt(
                key,
                format!(
                    "node_type {} is neither \"array\" nor \"group\"",
                    obj.get("node_type").unwrap_or(&Value::Null)
                ),
            )),
        }
    }

    /// The document verbatim.
    pub fn raw(&self) -> &Value {
        match self {
            NodeMetadata::Array { raw, .. } | NodeMetadata::Group { raw, .. } => raw,
        }
    }

    /// The node's attributes.
    pub fn attributes(&self) -> &Value {
        match self {
            NodeMetadata::Array { attributes, .. } | NodeMetadata::Group { attributes, .. } => attributes,
        }
    }

    /// 3 or 2.
    pub fn zarr_format(&self) -> u8 {
        match self {
            NodeMetadata::Array { zarr_format, .. } | NodeMetadata::Group { zarr_format, .. } => *zarr_format,
        }
    }
}

/// Validated metadata of an array, with its codec chain built.
#[derive(Debug, Clone)]
pub struct ArrayMetadata {
    /// Array shape.
    pub shape: Vec<u64>,
    /// Element type.
    pub data_type: DataType,
    /// The chunk grid.
    pub chunk_grid: ChunkGrid,
    /// How chunk coordinates become keys.
    pub chunk_key_encoding: ChunkKeyEncoding,
    /// One element's little-endian bytes.
    pub fill_value: Vec<u8>,
    /// The codec chain, resolved for the chunk shape (the first chunk's,
    /// in a rectilinear grid).
    pub codecs: Arc<CodecChain>,
    /// A rectilinear grid's chains, one per distinct chunk shape (empty
    /// for a regular grid).
    pub(crate) chains: Arc<std::collections::BTreeMap<Vec<u64>, Arc<CodecChain>>>,
    /// `dimension_names`, if present.
    pub dimension_names: Option<Vec<Option<String>>>,
}

const ARRAY_FIELDS: &[&str] = &[
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
];

/// The most distinct chunk shapes of a rectilinear grid (each has a codec
/// chain of its own).
const MAX_CHUNK_SHAPES: usize = 4096;

impl ArrayMetadata {
    /// The codec chain of the chunk at grid `coords`.
    pub(crate) fn codecs_at(&self, coords: &[u64]) -> &Arc<CodecChain> {
        if self.chains.is_empty() {
            return &self.codecs;
        }
        let shape = self.chunk_grid.chunk_shape(coords);
        self.chains.get(&shape).unwrap_or(&self.codecs)
    }

    /// `chunk_shape` of the node document: the chunk shape, or for a
    /// rectilinear grid one list of edge lengths per dimension.
    pub fn chunk_shape_document(&self) -> Value {
        self.chunk_grid.document(&self.shape)
    }

    /// `read_chunk_shape` of the node document: the inner chunk shape when
    /// sharded, else the chunk shape (the lists of a rectilinear grid).
    pub fn read_chunk_shape_document(&self) -> Value {
        match self.codecs.partial_sharding() {
            Some(_) => self.codecs.read_chunk_shape().into(),
            None => self.chunk_shape_document(),
        }
    }

    /// Validate an array's `zarr.json`.
    pub fn from_json(raw: &Value) -> Result<Self> {
        let obj = raw.as_object().ok_or_else(|| corrupt("zarr.json is not an object"))?;
        check_extensions(obj, ARRAY_FIELDS)?;
        let field = |name: &str| {
            obj.get(name)
                .ok_or_else(|| corrupt(format!("array metadata has no {name}")))
        };
        let shape = u64_list(field("shape")?, "shape")?;
        let data_type = DataType::from_json(field("data_type")?)?;
        let chunk_grid = ChunkGrid::from_json(field("chunk_grid")?, &shape)?;
        let chunk_key_encoding = ChunkKeyEncoding::from_json(field("chunk_key_encoding")?)?;
        let fill_value = data_type.fill_value_from_json(field("fill_value")?)?;
        if let Some(st) = obj.get("storage_transformers") {
            match st.as_array() {
                Some(list) if list.is_empty() => {}
                _ => return Err(Error::Unsupported(format!("storage_transformers {st}"))),
            }
        }
        let dimension_names = match obj.get("dimension_names") {
            None | Some(Value::Null) => None,
            Some(v) => Some(dimension_names(v, shape.len())?),
        };
        if let Some(attrs) = obj.get("attributes") {
            if !attrs.is_object() {
                return Err(corrupt(format!("attributes {attrs} is not an object")));
            }
        }
        let codecs = field("codecs")?;
        let chain = |chunk_shape: Vec<u64>| {
            let repr = crate::engine::format::codec::ChunkRepr::new(chunk_shape, data_type, fill_value.clone());
            CodecChain::from_json(codecs, &repr).map(Arc::new)
        };
        let mut chains = std::collections::BTreeMap::new();
        if !chunk_grid.is_regular() {
            let shapes = chunk_grid.distinct_shapes();
            if shapes.len() > MAX_CHUNK_SHAPES {
                return Err(Error::Unsupported(format!(
                    "a rectilinear chunk grid of {} distinct chunk shapes (at most {MAX_CHUNK_SHAPES})",
                    shapes.len()
                )));
            }
            for shape in shapes {
                chains.insert(shape.clone(), chain(shape)?);
            }
        }
        Ok(Self {
            codecs: chain(chunk_grid.first_chunk_shape())?,
            chains: Arc::new(chains),
            shape,
            data_type,
            chunk_grid,
            chunk_key_encoding,
            fill_value,
            dimension_names,
        })
    }

    /// Dimension names from xarray's `_ARRAY_DIMENSIONS` attribute when the
    /// metadata names none (Zarr v2, and v3 written without them).
    pub(crate) fn with_xarray_dimensions(mut self, attributes: &Value) -> Self {
        if self.dimension_names.is_none() {
            let names = attributes.get("_ARRAY_DIMENSIONS").and_then(Value::as_array);
            if let Some(names) = names.filter(|n| n.len() == self.shape.len()) {
                let names: Option<Vec<Option<String>>> =
                    names.iter().map(|n| n.as_str().map(|s| Some(s.to_string()))).collect();
                self.dimension_names = names;
            }
        }
        self
    }
}

/// Unknown top-level fields make a node unsupported unless they are objects
/// with `"must_understand": false`.
fn check_extensions(obj: &Map<String, Value>, known: &[&str]) -> Result<()> {
    for (name, value) in obj {
        if known.contains(&name.as_str()) {
            continue;
        }
        let optional = value.get("must_understand").and_then(Value::as_bool) == Some(false);
        if !optional {
            return Err(Error::Unsupported(format!(
                "metadata field \"{name}\" must be understood and is not supported"
            )));
        }
    }
    Ok(())
}

fn dimension_names(value: &Value, rank: usize) -> Result<Vec<Option<String>>> {
    let list = value
        .as_array()
        .filter(|l| l.len() == rank)
        .ok_or_else(|| corrupt(format!("dimension_names {value} is not a list of {rank} names")))?;
    list.iter()
        .map(|v| match v {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s.clone())),
            other => Err(corrupt(format!(
                "dimension_names entry {other} is neither a string nor null"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn array(extra: Value) -> Value {
        let mut base = json!({
            "zarr_format": 3, "node_type": "array", "shape": [10, 20], "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [5, 5]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        });
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        base
    }

    fn reason(v: Value) -> String {
        match NodeMetadata::parse(&serde_json::to_vec(&v).unwrap(), "a/zarr.json").unwrap() {
            NodeMetadata::Array { parsed: Err(r), .. } => r.to_string(),
            NodeMetadata::Array { parsed: Ok(_), .. } => String::new(),
            NodeMetadata::Group { .. } => panic!("group"),
        }
    }

    #[test]
    fn valid_array_parses() {
        assert_eq!(reason(array(json!({}))), "");
        assert_eq!(reason(array(json!({"ext": {"must_understand": false}}))), "");
        assert_eq!(reason(array(json!({"storage_transformers": []}))), "");
    }

    #[test]
    fn rejections_name_field_and_value() {
        assert!(reason(array(json!({"ext": {"must_understand": true}}))).contains("\"ext\""));
        assert!(reason(array(json!({"ext": 1}))).contains("\"ext\""));
        assert!(reason(array(json!({"data_type": "int3"}))).contains("int3"));
        assert!(reason(array(json!({"shape": [10, -1]}))).contains("[10,-1]"));
        assert!(reason(array(json!({"chunk_grid": {"name": "rectangular"}}))).contains("rectangular"));
        let rectilinear =
            json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[5, 5], [[5, 3], 6]]}});
        assert_eq!(reason(array(json!({"chunk_grid": rectilinear}))), "");
        assert!(reason(array(json!({"storage_transformers": [{"name": "x"}]}))).contains("storage_transformers"));
        assert!(reason(array(json!({"codecs": [{"name": "foo_codec"}]}))).contains("foo_codec"));
        assert!(reason(array(json!({"dimension_names": ["a"]}))).contains("dimension_names"));
    }

    #[test]
    fn not_a_node() {
        assert!(matches!(NodeMetadata::parse(b"{", "k"), Err(Error::Corrupt { .. })));
        assert!(matches!(
            NodeMetadata::parse(br#"{"zarr_format": 2}"#, "k"),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            NodeMetadata::parse(br#"{"zarr_format": 3, "node_type": "group"}"#, "k"),
            Ok(NodeMetadata::Group { .. })
        ));
    }
}
