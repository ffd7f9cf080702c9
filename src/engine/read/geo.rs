//! Geo variables read (contract 3.2): an array's grid from its coordinates,
//! the values a map raster samples (one orthogonal read of the grid rows
//! and columns its pixels fall in, CF-decoded), and the default colour
//! range of a 2-D slice.

use std::sync::Arc;

use serde_json::Value;

use crate::engine::error::{Error, Result};
use crate::engine::format::values::real_values;
use crate::engine::query::geo::{multiscales, CellAxis, Crs, CrsSources, DimInfo, GeoGrid, Sampling};
use crate::engine::query::labels::{Coordinate, Label, LabelQuery, Method};
use crate::engine::query::node::{Coordinates, Node};
use crate::engine::query::plan::ReadPlan;
use crate::engine::query::selection::{DimSelection, Selection};
use crate::engine::read::hierarchy::Dataset;
use crate::engine::read::{ReadQuery, Versions};
use crate::storage::join;

/// The variable a CF `grid_mapping` attribute names: the attribute
/// itself, or the first name of its extended form (`crs: x y`).
fn grid_mapping_name(attribute: &str) -> Option<String> {
    let name = attribute.split_whitespace().next()?.trim_end_matches(':');
    (!name.is_empty()).then(|| name.to_string())
}

/// How many groups up from a variable its pyramid is looked for (its own
/// group holds an array layout's levels, the next a group layout's).
const PYRAMID_DEPTH: usize = 3;

/// At most this many elements of a slice are read for its default range.
const RANGE_SAMPLE_ELEMENTS: u64 = 16 << 20;

/// At most this many nodes are visited looking for geo variables.
const MAX_LISTED_NODES: usize = 10_000;

/// An array that is a geo variable, with its grid.
#[derive(Debug, Clone)]
pub struct GeoVariable {
    /// The array's node.
    pub node: Arc<Node>,
    /// Its horizontal grid.
    pub grid: Arc<GeoGrid>,
    coordinates: Coordinates,
}

/// A raster sampled from a geo variable: the CF-decoded values of the grid
/// cells its pixels fall in, and for each pixel (row by row) the position
/// of its cell among them ([`Raster::OFF_GRID`] where it has none).
#[derive(Debug)]
pub struct Raster {
    /// Values of the sampled cells (NaN where missing).
    pub cells: Vec<f64>,
    /// Per pixel, an index into `cells`.
    pub pixels: Vec<u32>,
    /// The versions of the store keys read.
    pub versions: Versions,
}

impl Raster {
    /// A pixel off the grid.
    pub const OFF_GRID: u32 = u32::MAX;

    /// A raster of `pixels` pixels, all off the grid.
    pub fn off_grid(pixels: usize) -> Self {
        Raster {
            cells: Vec::new(),
            pixels: vec![Self::OFF_GRID; pixels],
            versions: Versions::new(),
        }
    }

    /// The value of pixel `i` (NaN off the grid).
    pub fn value(&self, i: usize) -> f64 {
        match self.pixels[i] {
            Self::OFF_GRID => f64::NAN,
            at => self.cells[at as usize],
        }
    }
}

impl Dataset {
    /// The geo variable at `path` (400 if the array is not one).
    pub async fn geo_variable(&self, path: &str) -> Result<GeoVariable> {
        let node = self.node(path).await?;
        let meta = node.array()?;
        let coordinates = self.coordinates(&node).await?;
        if let Some(grid) = node.geo.get() {
            return Ok(GeoVariable {
                grid: grid.clone(),
                node: node.clone(),
                coordinates,
            });
        }
        let names = meta.dimension_names.clone().unwrap_or_default();
        let dims: Vec<DimInfo> = (0..meta.shape.len())
            .map(|d| {
                let coordinate = coordinates.get(d).and_then(Option::as_ref);
                DimInfo {
                    name: names.get(d).and_then(Option::as_deref),
                    attributes: coordinate.map(|c| c.attributes()),
                    values: coordinate.and_then(|c| c.numbers()),
                    is_time: coordinate.is_some_and(|c| c.is_time()),
                }
            })
            .collect();
        let attributes = node
            .metadata
            .as_ref()
            .map(|m| m.attributes().clone())
            .unwrap_or_default();
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let mapping_name = text(&attributes, "grid_mapping").and_then(|m| grid_mapping_name(&m));
        let (mapping, group) = self.crs_nodes(path, mapping_name.as_deref()).await;
        let mapping_attributes = mapping.as_ref().and_then(|n| n.attributes().cloned());
        let proj_code = text(&attributes, "proj:code").or_else(|| {
            group
                .as_ref()
                .and_then(|g| g.attributes().and_then(|a| text(a, "proj:code")))
        });
        let sources = CrsSources {
            grid_mapping: mapping_name.as_deref().map(|n| (n, mapping_attributes.as_ref())),
            proj_code: proj_code.as_deref(),
            x_units: None,
        };
        let grid =
            GeoGrid::detect(&dims, &sources).map_err(|e| Error::InvalidRequest(format!("array '/{path}': {e}")))?;
        let grid = node.geo.get_or_init(|| Arc::new(grid)).clone();
        Ok(GeoVariable {
            node: node.clone(),
            grid,
            coordinates: coordinates.clone(),
        })
    }

    /// The nodes that may name the CRS of the array at `path`: the variable
    /// `mapping` names (its `grid_mapping`, a sibling), and its group.
    async fn crs_nodes(&self, path: &str, mapping: Option<&str>) -> (Option<Arc<Node>>, Option<Arc<Node>>) {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        let mapping = match mapping {
            Some(name) => self.node(&join(parent, name)).await.ok(),
            None => None,
        };
        (mapping, self.node(parent).await.ok())
    }

    /// The level of `var`'s multiscales pyramid that a raster with pixels
    /// `pixel` degrees wide reads: the coarsest whose cells are no larger
    /// than its pixels, else the finest; `var` itself when no group above
    /// it (up to [`PYRAMID_DEPTH`] levels) lists it in a pyramid. Levels
    /// that are not geo variables are passed over.
    pub async fn pyramid_level(&self, var: &GeoVariable, pixel: f64) -> Result<GeoVariable> {
        let Some(paths) = self.pyramid(&var.node.path).await else {
            return Ok(var.clone());
        };
        let mut levels = Vec::with_capacity(paths.len());
        for path in paths {
            if let Ok(level) = self.geo_variable(&path).await {
                levels.push((level.grid.smallest_cell_degrees(), level));
            }
        }
        let finest = levels.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        let coarsest_fitting = levels
            .iter()
            .filter(|(cell, _)| *cell <= pixel * (1.0 + 1e-9))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        Ok(coarsest_fitting
            .or(finest)
            .map_or_else(|| var.clone(), |(_, level)| level.clone()))
    }

    /// The paths of every level of the pyramid holding the array at `path`.
    async fn pyramid(&self, path: &str) -> Option<Vec<String>> {
        let mut group = path;
        for _ in 0..PYRAMID_DEPTH {
            let parent = group.rsplit_once('/').map_or("", |(p, _)| p);
            let relative = path[parent.len()..].trim_start_matches('/');
            let node = self.node(parent).await.ok()?;
            if let Some(levels) = node.attributes().and_then(|a| multiscales::levels(a, relative)) {
                return Some(levels.iter().map(|l| join(parent, l)).collect());
            }
            if parent.is_empty() {
                return None;
            }
            group = parent;
        }
        None
    }

    /// Every geo variable of the dataset, in path order (arrays that are
    /// not one are left out; at most [`MAX_LISTED_NODES`] nodes visited).
    pub async fn geo_variables(&self) -> Result<Vec<GeoVariable>> {
        let mut found = Vec::new();
        let mut groups = vec![String::new()];
        let mut visited = 0;
        while let Some(group) = groups.pop() {
            for child in self.children(&group).await? {
                visited += 1;
                if visited > MAX_LISTED_NODES {
                    return Ok(found);
                }
                match child.node_type {
                    "group" => groups.push(child.path),
                    _ => {
                        if let Ok(var) = self.geo_variable(&child.path).await {
                            found.push(var);
                        }
                    }
                }
            }
        }
        found.sort_by(|a, b| a.node.path.cmp(&b.node.path));
        Ok(found)
    }

    /// Plan the read of the grid rows and columns `sampling` lists, the
    /// other dimensions picked by `labels` (`sel`), else the latest time
    /// and the first index of any other.
    pub async fn plan_raster(&self, var: &GeoVariable, sampling: &Sampling, labels: &LabelQuery) -> Result<ReadPlan> {
        let list = |items: &[u64]| format!("[{}]", items.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
        let selection = self.fixed_dims(var, labels, |d| {
            if d == var.grid.x_dim {
                Some(list(&sampling.cols))
            } else if d == var.grid.y_dim {
                Some(list(&sampling.rows))
            } else {
                None
            }
        })?;
        self.plan_slice(var, selection, labels).await
    }

    /// The values `sampling` picks for a raster of its pixels, read by
    /// `plan` ([`Dataset::plan_raster`]).
    pub async fn read_raster(
        &self,
        var: &GeoVariable,
        sampling: &Sampling,
        plan: &ReadPlan,
        pinned: Option<&Versions>,
    ) -> Result<Raster> {
        let (data, versions) = self.read_pinned(plan, pinned).await?;
        let cells = real_values(plan.data_type(), &data)?;
        // The result is [rows, cols] in the array's dimension order.
        let pixels = sampling.cell_indices(var.grid.y_dim < var.grid.x_dim);
        Ok(Raster {
            cells,
            pixels,
            versions,
        })
    }

    /// The smallest and largest CF-decoded value of the 2-D slice `labels`
    /// picks (NaN and `nodata` left out), over at most 16 Mi evenly strided
    /// elements; `None` when it has no value.
    pub async fn slice_range(
        &self,
        var: &GeoVariable,
        labels: &LabelQuery,
        nodata: Option<f64>,
    ) -> Result<Option<(f64, f64)>> {
        let meta = var.node.array()?;
        let (nx, ny) = (meta.shape[var.grid.x_dim], meta.shape[var.grid.y_dim]);
        let step = ((nx * ny) as f64 / RANGE_SAMPLE_ELEMENTS as f64).sqrt().ceil().max(1.0) as u64;
        let strided = format!("::{step}");
        let selection = self.fixed_dims(var, labels, |d| {
            (d == var.grid.x_dim || d == var.grid.y_dim).then(|| strided.clone())
        })?;
        let plan = self.plan_slice(var, selection, labels).await?;
        let (data, _) = self.read_all(&plan).await?;
        let values = real_values(plan.data_type(), &data)?;
        let kept = values.into_iter().filter(|v| !v.is_nan() && Some(*v) != nodata);
        Ok(kept.fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        }))
    }

    /// A selection text for the variable: `horizontal(d)` for X and Y, `:`
    /// for the dimensions `labels` picks, the latest time, else index 0.
    fn fixed_dims(
        &self,
        var: &GeoVariable,
        labels: &LabelQuery,
        horizontal: impl Fn(usize) -> Option<String>,
    ) -> Result<Selection> {
        let meta = var.node.array()?;
        let names = meta.dimension_names.clone().unwrap_or_default();
        let items: Vec<String> = (0..meta.shape.len())
            .map(|d| {
                if let Some(item) = horizontal(d) {
                    return item;
                }
                let name = names.get(d).cloned().flatten();
                if name.is_some_and(|n| labels.sel.iter().any(|(s, _)| *s == n)) {
                    return ":".into();
                }
                let latest = (Some(d) == var.grid.t_dim)
                    .then(|| var.coordinates.get(d).and_then(Option::as_ref).map(|c| c.latest()))
                    .flatten();
                latest.unwrap_or(0).to_string()
            })
            .collect();
        Selection::parse(&items.join(","))
    }

    /// Plan `selection` with `labels`, CF-decoded; it must leave exactly the
    /// two horizontal dimensions.
    async fn plan_slice(&self, var: &GeoVariable, selection: Selection, labels: &LabelQuery) -> Result<ReadPlan> {
        let query = ReadQuery {
            selection,
            labels: labels.clone(),
            decode_cf: true,
        };
        let plan = self.plan_query(&var.node.path, &query).await?;
        if plan.output_shape().len() != 2 {
            return Err(Error::InvalidRequest(
                "sel must pick one value of each dimension other than the horizontal two".into(),
            ));
        }
        Ok(plan)
    }
}

/// Where a 2-D result of a geo variable lies, when it is a regular raster:
/// the outer corner of its first cell (row 0, column 0) and the step from
/// one cell to the next along X (columns) and Y (rows), in the grid's CRS.
#[derive(Debug, Clone, PartialEq)]
pub struct RasterPlacement {
    /// X of the first cell's outer corner.
    pub x0: f64,
    /// X step from a column to the next.
    pub dx: f64,
    /// Y of the first cell's outer corner.
    pub y0: f64,
    /// Y step from a row to the next.
    pub dy: f64,
    /// The grid's CRS.
    pub crs: Crs,
}

/// Centres may differ from a regular step by this fraction of the step
/// (float32 coordinates of a 0.01° grid are off by up to 0.15% of it).
const REGULAR_TOLERANCE: f64 = 1e-2;

impl GeoVariable {
    /// The placement of the result `plan` reads from this variable: its
    /// two dimensions must be Y then X (every other dimension picked by an
    /// integer), and the cells it picks along each evenly spaced.
    pub fn placement(&self, plan: &ReadPlan) -> Result<RasterPlacement> {
        let kept: Vec<usize> = (0..plan.dims.len()).filter(|&d| !plan.dims[d].dropped).collect();
        if plan.points.is_some() || kept != [self.grid.y_dim, self.grid.x_dim] {
            return Err(Error::InvalidRequest(
                "a raster needs a 2-D result of the Y and X dimensions, in that order \
                 (pick one index or label of every other dimension)"
                    .into(),
            ));
        }
        let (x0, dx) = regular(&self.grid.x, &plan.dims[self.grid.x_dim], "X")?;
        let (y0, dy) = regular(&self.grid.y, &plan.dims[self.grid.y_dim], "Y")?;
        Ok(RasterPlacement {
            x0,
            dx,
            y0,
            dy,
            crs: self.grid.crs.clone(),
        })
    }
}

/// The outer edge of the first picked cell and the step between picked
/// cells, when the picked cells are evenly spaced (a single cell: its width).
fn regular(axis: &CellAxis, sel: &DimSelection, what: &str) -> Result<(f64, f64)> {
    let centre = |k: u64| axis.centre(sel.index(k));
    let step = match sel.len {
        0 => return Err(Error::InvalidRequest(format!("the raster has no cells along {what}"))),
        1 => {
            let i = sel.index(0);
            axis.edge(i + 1) - axis.edge(i)
        }
        n => (centre(n - 1) - centre(0)) / (n - 1) as f64,
    };
    let irregular = (1..sel.len).any(|k| {
        let expected = centre(0) + step * k as f64;
        (centre(k) - expected).abs() > step.abs() * REGULAR_TOLERANCE
    });
    if irregular || step == 0.0 {
        return Err(Error::InvalidRequest(format!(
            "the cells picked along {what} are not evenly spaced: a raster needs a regular grid"
        )));
    }
    Ok((centre(0) - step / 2.0, step))
}

/// A read of a geo variable's cells for a query (EDR): a window of the
/// grid, and the T and Z positions (every one when `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct CellRead {
    /// The columns, in order.
    pub cols: Vec<u64>,
    /// The rows, in order.
    pub rows: Vec<u64>,
    /// T positions, in order.
    pub times: Option<Vec<u64>>,
    /// Z positions, in order.
    pub levels: Option<Vec<u64>>,
}

/// A geo variable's time or vertical axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Along {
    /// T.
    Time,
    /// Z.
    Level,
}

impl Along {
    fn name(self) -> &'static str {
        match self {
            Along::Time => "time",
            Along::Level => "vertical",
        }
    }

    /// What one position along it is called.
    fn position(self) -> &'static str {
        match self {
            Along::Time => "time step",
            Along::Level => "level",
        }
    }
}

/// What a request picks along T or Z: a position for each label (by
/// `method`), or the positions whose labels lie between two (either open).
#[derive(Debug, Clone, PartialEq)]
pub enum AxisPick {
    /// One position per label.
    Labels(Vec<Label>, Method),
    /// Every position between, in stored order.
    Between(Option<Label>, Option<Label>),
}

impl GeoVariable {
    /// The coordinate of dimension `dim`, if it has one.
    pub fn coordinate(&self, dim: usize) -> Option<&Coordinate> {
        self.coordinates.get(dim).and_then(|c| c.as_deref())
    }

    /// Its dimension along T or Z, if it has that axis.
    pub fn axis(&self, along: Along) -> Option<usize> {
        match along {
            Along::Time => self.grid.t_dim,
            Along::Level => self.grid.z_dim,
        }
    }

    /// The positions along T or Z that `pick` selects, in order (every one
    /// without a pick); `None` when the variable has no such axis and
    /// nothing is picked. A pick along an axis it lacks, or one without a
    /// coordinate, or a pick of nothing, is an invalid request (as is a
    /// label the coordinate cannot read).
    pub fn pick_along(&self, along: Along, pick: Option<&AxisPick>) -> Result<Option<Vec<u64>>> {
        let invalid = |what: String| Error::InvalidRequest(what);
        let Some(dim) = self.axis(along) else {
            return match pick {
                Some(_) => Err(invalid(format!("no {} axis", along.name()))),
                None => Ok(None),
            };
        };
        let Some(pick) = pick else {
            return Ok(Some((0..self.node.array()?.shape[dim]).collect()));
        };
        let coordinate = self
            .coordinate(dim)
            .ok_or_else(|| invalid(format!("the {} axis has no coordinate", along.name())))?;
        let picked = match pick {
            AxisPick::Labels(labels, method) => labels
                .iter()
                .map(|label| coordinate.point(label, *method))
                .collect::<Result<Vec<u64>>>()?,
            AxisPick::Between(lo, hi) => coordinate.within(lo.as_ref(), hi.as_ref())?,
        };
        if picked.is_empty() {
            return Err(invalid(format!("no {} there", along.position())));
        }
        Ok(Some(picked))
    }

    /// The selection of `read`: its window, T and Z positions, the first
    /// index of any other dimension.
    fn cell_selection(&self, read: &CellRead) -> Result<Selection> {
        let rank = self.node.array()?.shape.len();
        let list = |list: &[u64]| match list {
            [first, .., last] if list.windows(2).all(|w| w[1] == w[0] + 1) => format!("{first}:{}", last + 1),
            [one] => format!("{one}:{}", one + 1),
            _ => format!("[{}]", list.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
        };
        let positions = |p: &Option<Vec<u64>>| p.as_deref().map_or(":".to_string(), list);
        let items: Vec<String> = (0..rank)
            .map(|d| match d {
                d if d == self.grid.x_dim => list(&read.cols),
                d if d == self.grid.y_dim => list(&read.rows),
                d if Some(d) == self.grid.t_dim => positions(&read.times),
                d if Some(d) == self.grid.z_dim => positions(&read.levels),
                _ => "0".to_string(),
            })
            .collect();
        Selection::parse(&items.join(","))
    }

    /// The extents of a chunk as reads decode it (the inner chunk when
    /// sharded) along T, Z, Y and X (1 along an axis it lacks).
    pub fn cell_chunk(&self) -> Result<[u64; 4]> {
        let shape = self.node.array()?.codecs.read_chunk_shape();
        let along = |d: Option<usize>| d.and_then(|d| shape.get(d).copied()).unwrap_or(1);
        Ok([
            along(self.grid.t_dim),
            along(self.grid.z_dim),
            along(Some(self.grid.y_dim)),
            along(Some(self.grid.x_dim)),
        ])
    }

    /// The dimensions a cell read keeps, in the order T, Z, Y, X.
    fn cell_axes(&self) -> Vec<usize> {
        [
            self.grid.t_dim,
            self.grid.z_dim,
            Some(self.grid.y_dim),
            Some(self.grid.x_dim),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

impl Dataset {
    /// Plan the CF-decoded read of `read` from `var`.
    pub async fn plan_cells(&self, var: &GeoVariable, read: &CellRead) -> Result<ReadPlan> {
        let query = ReadQuery {
            selection: var.cell_selection(read)?,
            labels: LabelQuery::default(),
            decode_cf: true,
        };
        self.plan_query(&var.node.path, &query).await
    }

    /// The values a plan of [`Dataset::plan_cells`] reads, ordered T, Z,
    /// Y, X (those the variable has), NaN where missing.
    pub async fn read_cells(
        &self,
        var: &GeoVariable,
        plan: &ReadPlan,
        pinned: Option<&Versions>,
    ) -> Result<(Vec<f64>, Versions)> {
        let (data, versions) = self.read_pinned(plan, pinned).await?;
        let values = real_values(plan.data_type(), &data)?;
        drop(data);
        let shape = plan.output_shape();
        // The kept dimensions in array order, and where each goes.
        let mut kept: Vec<usize> = var.cell_axes();
        kept.sort_unstable();
        let order: Vec<usize> = var
            .cell_axes()
            .iter()
            .map(|d| kept.iter().position(|k| k == d).unwrap_or(0))
            .collect();
        Ok((transpose(values, &shape, &order), versions))
    }
}

/// `values` of C-order `shape`, with its axes put in `order` (output axis
/// `k` is input axis `order[k]`).
fn transpose(values: Vec<f64>, shape: &[u64], order: &[usize]) -> Vec<f64> {
    if order.iter().enumerate().all(|(k, &d)| k == d) || shape.len() != order.len() {
        return values;
    }
    let rank = shape.len();
    let mut strides = vec![1u64; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let out_shape: Vec<u64> = order.iter().map(|&d| shape[d]).collect();
    let mut out = Vec::with_capacity(values.len());
    let mut index = vec![0u64; rank];
    for _ in 0..values.len() {
        let at: u64 = (0..rank).map(|k| index[k] * strides[order[k]]).sum();
        out.push(values[at as usize]);
        for k in (0..rank).rev() {
            index[k] += 1;
            if index[k] < out_shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}
