//! The coordinates of an array's dimensions (the 1-D array named after
//! each dimension in the same group, the xarray/CF convention), read once
//! per node load and kept with the array's node, and label selection on a
//! read: `sel` and points by label resolved to positions before planning.

use std::sync::Arc;

use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::query::labels::{Coordinate, LabelQuery};
use crate::engine::query::node::{Coordinates, Node};
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::{DimSelection, Selection};
use crate::engine::read::hierarchy::Dataset;
use crate::storage::join;

/// Coordinates longer than this are not read (a label lookup would cost
/// more than the read it serves).
const MAX_COORDINATE_LEN: u64 = 50_000_000;

impl Dataset {
    /// The coordinate of each dimension of the array at `node`: the 1-D
    /// array of the dimension's name in the same group, of the dimension's
    /// length. Read once, then kept with the node.
    pub(crate) async fn coordinates(&self, node: &Node) -> Result<Coordinates> {
        node.coordinates
            .get_or_try_init(|| async {
                let meta = node.array()?;
                let parent = node.path.rsplit_once('/').map_or("", |(p, _)| p);
                let names = meta.dimension_names.clone().unwrap_or_default();
                let mut out = Vec::with_capacity(meta.shape.len());
                for (d, &len) in meta.shape.iter().enumerate() {
                    let name = names.get(d).cloned().flatten();
                    let coordinate = match name {
                        Some(name) => self.coordinate(&join(parent, &name), &name, len).await?,
                        None => None,
                    };
                    out.push(coordinate);
                }
                Ok::<Coordinates, Error>(out.into())
            })
            .await
            .cloned()
    }

    /// The labels of dimension `dim` of the array at `path`, one per
    /// position, when the dimension has a coordinate.
    pub async fn dimension_labels(&self, path: &str, dim: usize) -> Result<Option<Vec<Value>>> {
        let node = self.node(path).await?;
        let len = node.array()?.shape.get(dim).copied().unwrap_or(0);
        let coordinates = self.coordinates(&node).await?;
        Ok(coordinates
            .get(dim)
            .and_then(Option::as_ref)
            .map(|c| (0..len).map(|i| c.label_json(i)).collect()))
    }

    /// The coordinate at `path`, if it is a readable 1-D array of `len`.
    async fn coordinate(&self, path: &str, name: &str, len: u64) -> Result<Option<Arc<Coordinate>>> {
        let node = match self.node(path).await {
            Ok(node) => node,
            Err(Error::NotFound(_) | Error::Unsupported(_) | Error::Corrupt { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let Ok(meta) = node.array() else {
            return Ok(None);
        };
        if meta.shape != [len] || len > MAX_COORDINATE_LEN {
            return Ok(None);
        }
        let plan = self.plan_read(path, &Selection::default()).await?;
        let (data, _) = self.read_all(&plan).await?;
        let attributes = node.metadata.as_ref().map_or(Value::Null, |m| m.attributes().clone());
        match Coordinate::new(name, meta, &attributes, &data) {
            Ok(c) => Ok(Some(Arc::new(c))),
            // Complex or bytes labels: not a coordinate to select by.
            Err(Error::InvalidRequest(_)) => Ok(None),
            Err(e) => Err(e.at_key(path)),
        }
    }

    /// `selection` with the dimensions `labels.sel` names picked by label,
    /// or the points `labels.points` gives by label.
    pub async fn resolve_labels(&self, node: &Node, selection: Selection, labels: &LabelQuery) -> Result<Selection> {
        if labels.sel.is_empty() && labels.points.is_none() {
            return Ok(selection);
        }
        let meta = node.array()?;
        let coordinates = self.coordinates(node).await?;
        let rank = meta.shape.len();
        let dim_of = |name: &str| -> Result<usize> {
            let names = meta.dimension_names.as_deref().unwrap_or_default();
            names.iter().position(|n| n.as_deref() == Some(name)).ok_or_else(|| {
                let known: Vec<&str> = names.iter().flatten().map(String::as_str).collect();
                Error::InvalidRequest(format!(
                    "array '/{}' has no dimension named '{name}' (its dimensions: {})",
                    node.path,
                    if known.is_empty() {
                        "unnamed".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })
        };
        let coordinate = |d: usize, name: &str| {
            coordinates[d].clone().ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "dimension '{name}' has no coordinate (a 1-D array '{name}' of length {} in the same group)",
                    meta.shape[d]
                ))
            })
        };
        if let Some(points) = &labels.points {
            let mut positions = Vec::with_capacity(points.len());
            for (p, point) in points.iter().enumerate() {
                let mut at = vec![None; rank];
                for (name, label) in point {
                    let d = dim_of(name)?;
                    let i = coordinate(d, name)?
                        .point(label, labels.method)
                        .map_err(|e| Error::InvalidRequest(format!("points[{p}]: {e}")))?;
                    at[d] = Some(i as i64);
                }
                let full: Option<Vec<i64>> = at.into_iter().collect();
                positions.push(full.ok_or_else(|| {
                    Error::InvalidRequest(format!("points[{p}] must give a label for every dimension"))
                })?);
            }
            return Ok(Selection::points(positions));
        }
        let mut selection = selection;
        for (name, sel) in &labels.sel {
            let d = dim_of(name)?;
            if selection.constrains(d, rank) {
                return Err(Error::InvalidRequest(format!(
                    "dimension '{name}' is picked by both select and sel: leave it ':' in select"
                )));
            }
            let pick = coordinate(d, name)?.pick(sel, labels.method)?;
            selection = selection.with_dim(d, rank, pick);
        }
        Ok(selection)
    }
}

impl Dataset {
    /// `dimension_names` and `coords` of a planned result, for JSON: the
    /// name of each kept dimension (null when unnamed), and for each with a
    /// coordinate the labels of the result's positions. A point selection
    /// has one unnamed dimension, and the labels of each point along every
    /// dimension with a coordinate.
    pub async fn result_coords(&self, plan: &ReadPlan) -> Result<(Vec<Value>, serde_json::Map<String, Value>)> {
        let meta = plan.meta();
        let coordinates = self.coordinates(plan.node()).await?;
        let names: Vec<Option<String>> = match &meta.dimension_names {
            Some(n) => n.clone(),
            None => vec![None; meta.shape.len()],
        };
        let mut coords = serde_json::Map::new();
        if let Some(points) = &plan.points {
            for (d, c) in coordinates.iter().enumerate() {
                if let (Some(c), Some(name)) = (c, &names[d]) {
                    coords.insert(name.clone(), points.iter().map(|p| c.label_json(p[d])).collect());
                }
            }
            return Ok((vec![Value::Null], coords));
        }
        let mut dimension_names = Vec::new();
        for (d, sel) in plan.dims.iter().enumerate().filter(|(_, s)| !s.dropped) {
            dimension_names.push(names[d].clone().map_or(Value::Null, Value::String));
            if let (Some(c), Some(name)) = (&coordinates[d], &names[d]) {
                coords.insert(name.clone(), (0..sel.len).map(|k| c.label_json(sel.index(k))).collect());
            }
        }
        Ok((dimension_names, coords))
    }
}

/// A label column of a result, for tables: a dimension's name (`dim_{d}`
/// when unnamed) and, per position along result dimension `dim`, its label
/// (instants as ISO 8601 text), or its position in the array when the
/// dimension has no coordinate.
#[derive(Debug, Clone)]
pub struct LabelColumn {
    /// The dimension's name.
    pub name: String,
    /// The result dimension it labels.
    pub dim: usize,
    /// A label per position along it.
    pub labels: ColumnLabels,
}

/// A column's labels: the coordinate's, or positions in the array (kept
/// as a selection, not one value each: a long dimension costs nothing).
#[derive(Debug, Clone)]
pub enum ColumnLabels {
    /// The coordinate's labels.
    Labels(Vec<Value>),
    /// Positions in the array.
    Positions(DimSelection),
}

/// The values of a result dimension's coordinate at the result's
/// positions, with what a file needs to describe them.
#[derive(Debug, Clone)]
pub struct CoordinateValues {
    /// The coordinate's data type.
    pub data_type: crate::engine::DataType,
    /// The coordinate array's attributes.
    pub attributes: Value,
    /// Its Zarr v2 `fill_value` (null otherwise).
    pub v2_fill: Value,
    /// Little-endian elements, one per position of the result dimension.
    pub data: bytes::Bytes,
}

/// One dimension of a (non-point) result: its name (`dim_{d}` when
/// unnamed), length and coordinate.
#[derive(Debug, Clone)]
pub struct ResultDimension {
    /// Its name.
    pub name: String,
    /// Its length in the result.
    pub len: u64,
    /// Its coordinate's values, if it has a coordinate.
    pub coordinate: Option<CoordinateValues>,
}

fn dimension_name(names: Option<&[Option<String>]>, d: usize) -> String {
    names
        .and_then(|n| n.get(d).cloned().flatten())
        .unwrap_or_else(|| format!("dim_{d}"))
}

impl Dataset {
    /// The label columns of a planned result: one per kept dimension, or
    /// for points one per array dimension (all along the one result dimension).
    pub async fn label_columns(&self, plan: &ReadPlan) -> Result<Vec<LabelColumn>> {
        let meta = plan.meta();
        let names = meta.dimension_names.as_deref();
        let coordinates = self.coordinates(plan.node()).await?;
        let labels = |d: usize, sel: DimSelection| match &coordinates[d] {
            Some(c) => ColumnLabels::Labels((0..sel.len).map(|k| c.label_json(sel.index(k))).collect()),
            None => ColumnLabels::Positions(sel),
        };
        if let Some(points) = &plan.points {
            return Ok((0..meta.shape.len())
                .map(|d| LabelColumn {
                    name: dimension_name(names, d),
                    dim: 0,
                    labels: labels(d, DimSelection::listed(points.iter().map(|p| p[d]).collect())),
                })
                .collect());
        }
        let kept = plan.dims.iter().enumerate().filter(|(_, s)| !s.dropped);
        Ok(kept
            .enumerate()
            .map(|(r, (d, sel))| LabelColumn {
                name: dimension_name(names, d),
                dim: r,
                labels: labels(d, sel.clone()),
            })
            .collect())
    }

    /// The dimensions of a planned result (not a point selection), each
    /// with its coordinate's values at the result's positions when it has
    /// a coordinate.
    pub async fn result_dimensions(&self, plan: &ReadPlan) -> Result<Vec<ResultDimension>> {
        if plan.points.is_some() {
            return Err(Error::InvalidRequest(
                "a point selection has no dimensions to describe in a file: select a region".into(),
            ));
        }
        let meta = plan.meta();
        let names = meta.dimension_names.as_deref();
        let coordinates = self.coordinates(plan.node()).await?;
        let parent = plan.node().path.rsplit_once('/').map_or("", |(p, _)| p);
        let mut out = Vec::new();
        for (d, sel) in plan.dims.iter().enumerate().filter(|(_, s)| !s.dropped) {
            let name = dimension_name(names, d);
            let coordinate = match &coordinates[d] {
                Some(_) => {
                    let path = join(parent, &name);
                    let coord_plan = self.plan_read(&path, &Selection::of_dim(sel)).await?;
                    let (data, _) = self.read_all(&coord_plan).await?;
                    let node = coord_plan.node();
                    Some(CoordinateValues {
                        data_type: coord_plan.data_type(),
                        attributes: node.attributes().cloned().unwrap_or_default(),
                        v2_fill: node.v2_fill_value(),
                        data,
                    })
                }
                None => None,
            };
            out.push(ResultDimension {
                name,
                len: sel.len,
                coordinate,
            });
        }
        Ok(out)
    }
}
