//! A read-only Zarr v2 view of a whole dataset (contract 2.6), so that
//! clients that read neither v3 nor sharding (zarr-python 2, netCDF-C,
//! older xarray stacks) read everything.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html>. Every
//! group has `.zgroup` and `.zattrs`, every array `.zarray` and `.zattrs`,
//! and the root a consolidated `.zmetadata`. An array's v2 chunks are its
//! read chunks (inner chunks when sharded), served decoded: uncompressed, C
//! order, little-endian, edge chunks padded to the full chunk shape. Arrays
//! the view cannot represent (raw `r*` types, rectilinear chunk grids) are
//! left out. `string` and
//! `variable_length_bytes` arrays are `|O` with the `vlen-utf8` or
//! `vlen-bytes` filter, their chunks in that encoding.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::engine::error::{Error, Result};
use crate::engine::format::copy::{copy_block, Block};
use crate::engine::format::data_type::DataType;
use crate::engine::format::metadata::ArrayMetadata;
use crate::engine::format::values::is_real;
use crate::engine::format::vlen::{encode_item, Gather, FILL_HANDLE};
use crate::engine::query::cf::attribute_number;
use crate::engine::query::node::Node;
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::Selection;
use crate::engine::read::hierarchy::Dataset;
use crate::engine::read::Versions;
use crate::storage::join;

/// Chunk keys listed under an array at most (more are still served).
const MAX_LISTED_CHUNKS: u64 = 10_000;

/// A value of the view.
#[derive(Debug)]
pub enum ViewValue {
    /// `.zgroup`, `.zattrs`, `.zarray` or `.zmetadata`.
    Metadata(Value),
    /// A chunk, planned: read it with [`Dataset::read_view_chunk`].
    Chunk(ViewChunk),
}

/// A chunk of the view: the read of its part of the array, and how it is
/// padded to the full chunk shape (as v2 stores edge chunks).
#[derive(Debug)]
pub struct ViewChunk {
    /// The read of the chunk's elements inside the array.
    pub plan: ReadPlan,
    /// The full chunk shape, and the shape inside the array.
    chunk: Vec<u64>,
    clipped: Vec<u64>,
}

impl ViewChunk {
    /// The chunk's decoded size: elements times element size (8 a
    /// variable-length element).
    pub fn bytes(&self) -> u64 {
        self.chunk.iter().product::<u64>() * self.plan.meta().data_type.size() as u64
    }

    /// The chunk's length as served, when known before reading (elements
    /// of a fixed size).
    pub fn length(&self) -> Option<u64> {
        (!self.plan.meta().data_type.is_variable()).then(|| self.bytes())
    }
}

/// What lies directly under a prefix: sub-prefixes and keys, sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// Names of sub-prefixes (without the trailing `/`).
    pub prefixes: Vec<String>,
    /// Names of keys.
    pub keys: Vec<String>,
}

/// The v2 dtype of `data_type` (little-endian) and the filters it needs,
/// if the view can serve it.
fn v2_dtype(data_type: DataType) -> Option<(String, Value)> {
    match data_type {
        DataType::String => Some(("|O".into(), json!([{"id": "vlen-utf8"}]))),
        DataType::Bytes(_) => Some(("|O".into(), json!([{"id": "vlen-bytes"}]))),
        DataType::Raw(_) => None,
        fixed => Some((fixed.numpy_dtype()?, Value::Null)),
    }
}

/// The readable array at `node` the view can represent (not raw types,
/// not rectilinear grids, which v2 has no form for).
fn view_array(node: &Node) -> Option<&ArrayMetadata> {
    node.array()
        .ok()
        .filter(|m| v2_dtype(m.data_type).is_some() && m.chunk_grid.is_regular())
}

/// `.zarray` and `.zattrs` of an array in the view.
fn array_documents(node: &Node, meta: &ArrayMetadata) -> (Value, Value) {
    let source = node.metadata.as_ref().expect("an array has metadata");
    let mut attrs = source.attributes().as_object().cloned().unwrap_or_default();
    // A v2 node keeps its own fill value; a v3 node's is `_FillValue` or
    // null, never the v3 fill value, which xarray would mask as missing.
    let fill_value = match source.zarr_format() {
        2 => source.raw().get("fill_value").cloned().unwrap_or(Value::Null),
        _ => attrs
            .remove("_FillValue")
            .map_or(Value::Null, |v| decoded_fill_value(v, meta.data_type)),
    };
    if let Some(names) = meta.dimension_names.as_ref() {
        if let Some(names) = names.iter().cloned().collect::<Option<Vec<String>>>() {
            attrs.insert("_ARRAY_DIMENSIONS".into(), json!(names));
        }
    }
    let (dtype, filters) = v2_dtype(meta.data_type).expect("a view array has a v2 dtype");
    let zarray = json!({
        "zarr_format": 2,
        "shape": meta.shape,
        "chunks": meta.codecs.read_chunk_shape(),
        "dtype": dtype,
        "compressor": null,
        "fill_value": fill_value,
        "order": "C",
        "filters": filters,
        "dimension_separator": ".",
    });
    (zarray, Value::Object(attrs))
}

/// A `_FillValue` attribute as a v2 `fill_value`: xarray writes floats
/// in base64 on Zarr v3 ([`attribute_number`]); a number or `"NaN"` stays as
/// it is; anything else undecodable is left out (null).
fn decoded_fill_value(value: Value, data_type: DataType) -> Value {
    if !matches!(value, Value::String(_)) || !is_real(data_type) {
        return value;
    }
    match attribute_number(&value, data_type) {
        Some(n) if n.is_nan() => json!("NaN"),
        Some(n) if n.is_infinite() => json!(if n > 0.0 { "Infinity" } else { "-Infinity" }),
        Some(n) => json!(n),
        None => Value::Null,
    }
}

fn group_attributes(node: &Node) -> Value {
    node.metadata
        .as_ref()
        .map_or_else(|| json!({}), |m| m.attributes().clone())
}

/// The grid of read chunks over `meta`'s shape.
fn read_grid(meta: &ArrayMetadata) -> Vec<u64> {
    let chunks = meta.codecs.read_chunk_shape();
    meta.shape.iter().zip(&chunks).map(|(s, c)| s.div_ceil(*c)).collect()
}

/// The chunk coordinates a key names (`"1.0.3"`; `"0"` for a 0-d array),
/// if they lie inside `grid`.
fn chunk_coords(name: &str, grid: &[u64]) -> Option<Vec<u64>> {
    if grid.is_empty() {
        return (name == "0").then(Vec::new);
    }
    let coords: Vec<u64> = name.split('.').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let inside = coords.len() == grid.len() && coords.iter().zip(grid).all(|(c, n)| c < n);
    inside.then_some(coords)
}

fn not_found(dataset: &Dataset, key: &str) -> Error {
    Error::NotFound(format!("no key '{key}' in the v2 view of dataset '{}'", dataset.name))
}

/// `data` of shape `clipped` (an edge chunk) padded to `chunk` with zeros,
/// or empty elements for variable-length types.
fn pad(data_type: DataType, data: Bytes, clipped: &[u64], chunk: &[u64]) -> Result<Bytes> {
    let rank = chunk.len();
    let block = Block {
        src_start: vec![0; rank],
        src_step: vec![1; rank],
        dst_start: vec![0; rank],
        count: clipped.to_vec(),
    };
    let count = chunk.iter().product::<u64>() as usize;
    let mut padded = vec![0u8; count * data_type.size()];
    if !data_type.is_variable() {
        copy_block(
            Some(&data),
            clipped,
            &mut padded,
            chunk,
            &block,
            &vec![0; data_type.size()],
        );
        return Ok(Bytes::from(padded));
    }
    let mut gather = Gather::default();
    let handles = gather.add(data, clipped.iter().product::<u64>() as usize)?;
    copy_block(Some(&handles), clipped, &mut padded, chunk, &block, &FILL_HANDLE);
    Ok(gather.resolve(&padded, &encode_item(b"")))
}

impl Dataset {
    /// The view's value under `key`.
    pub async fn v2_view_get(&self, key: &str) -> Result<ViewValue> {
        let (path, name) = key.rsplit_once('/').unwrap_or(("", key));
        if name == ".zmetadata" && path.is_empty() {
            return Ok(ViewValue::Metadata(self.consolidated_metadata().await?));
        }
        let node = match self.node(path).await {
            Err(Error::NotFound(_)) => return Err(not_found(self, key)),
            other => other?,
        };
        match (node.node_type(), name) {
            ("group", ".zgroup") => Ok(ViewValue::Metadata(json!({"zarr_format": 2}))),
            ("group", ".zattrs") => Ok(ViewValue::Metadata(group_attributes(&node))),
            ("array", ".zarray" | ".zattrs") => {
                let meta = view_array(&node).ok_or_else(|| not_found(self, key))?;
                let (zarray, zattrs) = array_documents(&node, meta);
                Ok(ViewValue::Metadata(if name == ".zarray" { zarray } else { zattrs }))
            }
            ("array", chunk) => {
                let meta = view_array(&node).ok_or_else(|| not_found(self, key))?;
                let coords = chunk_coords(chunk, &read_grid(meta)).ok_or_else(|| not_found(self, key))?;
                Ok(ViewValue::Chunk(self.plan_view_chunk(path, meta, &coords).await?))
            }
            _ => Err(not_found(self, key)),
        }
    }

    /// The chunk at `coords` of the read-chunk grid.
    async fn plan_view_chunk(&self, path: &str, meta: &ArrayMetadata, coords: &[u64]) -> Result<ViewChunk> {
        let chunk = meta.codecs.read_chunk_shape();
        let ranges: Vec<(u64, u64)> = coords
            .iter()
            .zip(&chunk)
            .zip(&meta.shape)
            .map(|((c, n), s)| (c * n, ((c + 1) * n).min(*s)))
            .collect();
        let plan = self.plan_read(path, &Selection::of_ranges(&ranges)).await?;
        let clipped = ranges.iter().map(|(a, b)| b - a).collect();
        Ok(ViewChunk { plan, chunk, clipped })
    }

    /// The decoded chunk, padded to the full chunk shape; with `pinned`,
    /// read at those versions.
    pub async fn read_view_chunk(&self, chunk: &ViewChunk, pinned: Option<&Versions>) -> Result<Bytes> {
        let (data, _) = self.read_pinned(&chunk.plan, pinned).await?;
        let data_type = chunk.plan.meta().data_type;
        let data = match chunk.clipped == chunk.chunk {
            true => data,
            false => pad(data_type, data, &chunk.clipped, &chunk.chunk)?,
        };
        if !data_type.is_variable() {
            return Ok(data);
        }
        // The vlen-utf8/vlen-bytes encoding: the count, then the elements.
        let count = chunk.chunk.iter().product::<u64>();
        let mut encoded = (count as u32).to_le_bytes().to_vec();
        encoded.extend_from_slice(&data);
        Ok(Bytes::from(encoded))
    }

    /// `.zmetadata`: every group's and representable array's documents.
    async fn consolidated_metadata(&self) -> Result<Value> {
        let mut metadata = Map::new();
        let mut pending = vec![String::new()];
        while let Some(path) = pending.pop() {
            let node = self.node(&path).await?;
            let key = |name: &str| join(&path, name);
            if node.node_type() == "group" {
                metadata.insert(key(".zgroup"), json!({"zarr_format": 2}));
                metadata.insert(key(".zattrs"), group_attributes(&node));
                pending.extend(self.children(&path).await?.into_iter().map(|c| c.path));
            } else if let Some(meta) = view_array(&node) {
                let (zarray, zattrs) = array_documents(&node, meta);
                metadata.insert(key(".zarray"), zarray);
                metadata.insert(key(".zattrs"), zattrs);
            }
        }
        Ok(json!({"zarr_consolidated_format": 1, "metadata": metadata}))
    }

    /// What the view holds directly under `prefix` (a node path; `""` for the root).
    pub async fn v2_view_list(&self, prefix: &str) -> Result<Listing> {
        let node = match self.node(prefix).await {
            Err(Error::NotFound(_)) => return Err(not_found(self, prefix)),
            other => other?,
        };
        let mut listing = Listing::default();
        if node.node_type() == "group" {
            listing.keys = vec![".zattrs".into(), ".zgroup".into()];
            if prefix.is_empty() {
                listing.keys.push(".zmetadata".into());
            }
            for child in self.children(prefix).await? {
                let keep = child.node_type == "group" || view_array(&*self.node(&child.path).await?).is_some();
                if keep {
                    listing.prefixes.push(child.name);
                }
            }
            return Ok(listing);
        }
        let meta = view_array(&node).ok_or_else(|| not_found(self, prefix))?;
        listing.keys = vec![".zarray".into(), ".zattrs".into()];
        let grid = read_grid(meta);
        if grid.iter().product::<u64>() <= MAX_LISTED_CHUNKS {
            listing.keys.extend(chunk_names(&grid));
        }
        listing.keys.sort();
        Ok(listing)
    }
}

/// Every chunk key of `grid`, in C order.
fn chunk_names(grid: &[u64]) -> Vec<String> {
    if grid.is_empty() {
        return vec!["0".into()];
    }
    let mut names = Vec::new();
    let mut coords = vec![0u64; grid.len()];
    if grid.contains(&0) {
        return names;
    }
    loop {
        names.push(coords.iter().map(u64::to_string).collect::<Vec<_>>().join("."));
        let mut d = grid.len();
        loop {
            if d == 0 {
                return names;
            }
            d -= 1;
            coords[d] += 1;
            if coords[d] < grid[d] {
                break;
            }
            coords[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_keys_parse_inside_the_grid_only() {
        assert_eq!(chunk_coords("1.2", &[2, 3]), Some(vec![1, 2]));
        assert_eq!(chunk_coords("2.0", &[2, 3]), None);
        assert_eq!(chunk_coords("1", &[2, 3]), None);
        assert_eq!(chunk_coords("1/2", &[2, 3]), None);
        assert_eq!(chunk_coords("0", &[]), Some(vec![]));
        assert_eq!(chunk_coords("x.1", &[2, 3]), None);
    }

    #[test]
    fn chunk_names_cover_the_grid_in_c_order() {
        assert_eq!(chunk_names(&[2, 2]), vec!["0.0", "0.1", "1.0", "1.1"]);
        assert_eq!(chunk_names(&[]), vec!["0"]);
        assert!(chunk_names(&[3, 0]).is_empty());
    }
}
