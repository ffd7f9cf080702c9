//! Geographic arrays (contract 3.2): which dimensions of an array are X, Y,
//! T and Z, its CRS, the cells of its horizontal grid, which cell holds a
//! point, and the rows and columns of the grid that a map raster's pixels
//! sample.
//!
//! A *geo variable* has two horizontal dimensions with 1-D coordinates
//! (cell centres): longitude and latitude in degrees (CRS84), or x and y
//! of a projected CRS ([`Crs`]). Each coordinate's role comes from, in
//! order: its `axis` attribute; its `standard_name`; its `units`; else its
//! name. Cell edges are the midpoints between neighbouring centres, the
//! outer ones mirrored; latitude may descend and longitudes may run 0..360
//! (seen from a map as −180..180). A point takes the cell that contains it,
//! and on a shared edge the cell with the larger index. For a lat/lon grid
//! on Web Mercator or CRS84 the sampling is separable: one lookup per pixel
//! column and one per pixel row; a projected grid projects every pixel.

mod crs;
mod frame;
pub mod multiscales;
pub mod region;
mod tile_matrix_set;

use serde_json::Value;

pub use crs::{Crs, CrsSources, Projection};
pub use frame::{MapCrs, MapFrame};
pub use tile_matrix_set::{
    to_mercator, TileMatrixSet, EARTH_RADIUS, MERCATOR_HALF, MERCATOR_LATITUDE, METRES_PER_DEGREE, TILE_SIZE,
};

use crate::engine::error::{Error, Result};

/// What a dimension is, by CF's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Longitude (or projected x).
    X,
    /// Latitude (or projected y).
    Y,
    /// Time.
    T,
    /// Vertical.
    Z,
}

/// What is known of one dimension's coordinate: its name, its attributes
/// and its values (cell centres), when it has a numeric 1-D coordinate.
#[derive(Debug, Clone, Default)]
pub struct DimInfo<'a> {
    /// The dimension's name.
    pub name: Option<&'a str>,
    /// The coordinate array's attributes.
    pub attributes: Option<&'a Value>,
    /// The coordinate's values, when numeric.
    pub values: Option<&'a [f64]>,
    /// Whether the coordinate holds times (CF time units or datetimes).
    pub is_time: bool,
}

fn attr<'a>(info: &DimInfo<'a>, key: &str) -> Option<&'a str> {
    info.attributes?.get(key)?.as_str()
}

/// A longitude in degrees, a turn either way, as −180..180.
pub fn wrap_longitude(lon: f64) -> f64 {
    (lon + 180.0).rem_euclid(360.0) - 180.0
}

/// The role of a dimension, from its coordinate (3.2's order).
pub fn role(info: &DimInfo) -> Option<Role> {
    if let Some(axis) = attr(info, "axis") {
        match axis.trim().to_ascii_uppercase().as_str() {
            "X" => return Some(Role::X),
            "Y" => return Some(Role::Y),
            "T" => return Some(Role::T),
            "Z" => return Some(Role::Z),
            _ => {}
        }
    }
    if let Some(name) = attr(info, "standard_name") {
        match name {
            "longitude" | "projection_x_coordinate" | "grid_longitude" => return Some(Role::X),
            "latitude" | "projection_y_coordinate" | "grid_latitude" => return Some(Role::Y),
            "time" => return Some(Role::T),
            n if ["pressure", "height", "depth", "altitude"]
                .iter()
                .any(|z| n.contains(z)) =>
            {
                return Some(Role::Z)
            }
            _ => {}
        }
    }
    if let Some(units) = attr(info, "units") {
        if DEGREES_EAST.contains(&units) {
            return Some(Role::X);
        }
        if DEGREES_NORTH.contains(&units) {
            return Some(Role::Y);
        }
    }
    if info.is_time {
        return Some(Role::T);
    }
    if info.attributes.and_then(|a| a.get("positive")).is_some() {
        return Some(Role::Z);
    }
    match info.name.map(str::to_ascii_lowercase).as_deref() {
        Some("lon" | "longitude" | "x") => Some(Role::X),
        Some("lat" | "latitude" | "y") => Some(Role::Y),
        _ => None,
    }
}

const DEGREES_EAST: [&str; 5] = ["degrees_east", "degree_east", "degrees_E", "degreeE", "degree_E"];
const DEGREES_NORTH: [&str; 5] = ["degrees_north", "degree_north", "degrees_N", "degreeN", "degree_N"];

/// One horizontal axis of a grid: its cell edges (monotonic, either way).
#[derive(Debug, Clone, PartialEq)]
pub struct CellAxis {
    edges: Vec<f64>,
    centres: Vec<f64>,
    descending: bool,
}

impl CellAxis {
    /// The cells around `centres` (at least two, strictly monotonic).
    pub fn from_centres(centres: &[f64], what: &str) -> Result<Self> {
        let n = centres.len();
        let monotonic = centres.windows(2).all(|w| w[1] > w[0]) || centres.windows(2).all(|w| w[1] < w[0]);
        if n < 2 || !monotonic || centres.iter().any(|c| !c.is_finite()) {
            return Err(Error::InvalidRequest(format!(
                "the {what} coordinate must hold at least two finite, strictly monotonic values"
            )));
        }
        let mut edges = Vec::with_capacity(n + 1);
        edges.push(centres[0] - (centres[1] - centres[0]) / 2.0);
        edges.extend(centres.windows(2).map(|w| (w[0] + w[1]) / 2.0));
        edges.push(centres[n - 1] + (centres[n - 1] - centres[n - 2]) / 2.0);
        Ok(Self {
            descending: centres[1] < centres[0],
            edges,
            centres: centres.to_vec(),
        })
    }

    /// Number of cells (at least two).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.edges.len() - 1
    }

    /// The cell holding `v`: `edges[i] <= v < edges[i + 1]` along the
    /// axis's direction, so a shared edge belongs to the larger index.
    pub fn cell(&self, v: f64) -> Option<u64> {
        let i = if self.descending {
            self.edges.partition_point(|&e| e >= v)
        } else {
            self.edges.partition_point(|&e| e <= v)
        };
        (1..=self.len()).contains(&i).then(|| i as u64 - 1)
    }

    /// The smallest and largest edge.
    pub fn extent(&self) -> (f64, f64) {
        let (a, b) = (self.edges[0], self.edges[self.len()]);
        (a.min(b), a.max(b))
    }

    /// The narrowest cell.
    pub fn smallest_cell(&self) -> f64 {
        self.edges
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(f64::INFINITY, f64::min)
    }

    /// The widest cell.
    pub fn largest_cell(&self) -> f64 {
        self.edges.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f64::max)
    }

    /// Edge `i` (`0..=len`): cell `i` lies between edges `i` and `i + 1`.
    pub fn edge(&self, i: u64) -> f64 {
        self.edges[i as usize]
    }

    /// The centre of cell `i`: its coordinate.
    pub fn centre(&self, i: u64) -> f64 {
        self.centres[i as usize]
    }
}

/// A geo variable's horizontal grid: its cells in its CRS.
#[derive(Debug, Clone, PartialEq)]
pub struct GeoGrid {
    /// The X (longitude, or projected x) dimension.
    pub x_dim: usize,
    /// The Y (latitude, or projected y) dimension.
    pub y_dim: usize,
    /// X cells.
    pub x: CellAxis,
    /// Y cells.
    pub y: CellAxis,
    /// The T dimension, if any.
    pub t_dim: Option<usize>,
    /// The vertical dimension, if any.
    pub z_dim: Option<usize>,
    /// The CRS of `x` and `y`.
    pub crs: Crs,
}

/// Points taken along each side of a projected grid for its bounds.
const BOUNDARY_POINTS: usize = 64;

impl GeoGrid {
    /// The grid of an array whose dimensions are described by `dims`, its
    /// CRS named by `crs` (contract 3.2; the X coordinate's units are
    /// taken from `dims`).
    pub fn detect(dims: &[DimInfo], crs: &CrsSources) -> Result<Self> {
        let roles: Vec<Option<Role>> = dims.iter().map(role).collect();
        let find = |r: Role| {
            let mut found = roles.iter().enumerate().filter(|(_, x)| **x == Some(r)).map(|(d, _)| d);
            match (found.next(), found.next()) {
                (Some(d), None) => Some(d),
                _ => None,
            }
        };
        let (Some(x_dim), Some(y_dim)) = (find(Role::X), find(Role::Y)) else {
            return Err(Error::InvalidRequest(
                "not a geo variable: it needs one X and one Y dimension, each with a 1-D coordinate \
                 (found by axis, standard_name, units or the names lon/lat, x/y)"
                    .into(),
            ));
        };
        let values = |d: usize, what: &str| {
            dims[d].values.ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "not a geo variable: its {what} dimension has no numeric coordinate"
                ))
            })
        };
        Ok(Self {
            crs: grid_crs(&dims[x_dim], crs)?,
            x: CellAxis::from_centres(values(x_dim, "X")?, "X")?,
            y: CellAxis::from_centres(values(y_dim, "Y")?, "Y")?,
            x_dim,
            y_dim,
            t_dim: find(Role::T),
            z_dim: find(Role::Z),
        })
    }

    /// The cell (column, row) holding longitude `lon`, latitude `lat`;
    /// `None` on an axis where it is off the grid. On a CRS84 grid the
    /// longitude is tried as it is and a turn either way (grids in 0..360
    /// or past ±180).
    pub fn cell(&self, lon: f64, lat: f64) -> (Option<u64>, Option<u64>) {
        match &self.crs {
            Crs::Crs84 => (self.x_cell(lon), self.y.cell(lat)),
            Crs::Projected(p) => match p.forward(lon, lat) {
                Some((x, y)) => (self.x.cell(x), self.y.cell(y)),
                None => (None, None),
            },
        }
    }

    fn x_cell(&self, lon: f64) -> Option<u64> {
        [lon, lon + 360.0, lon - 360.0].into_iter().find_map(|l| self.x.cell(l))
    }

    /// The centre of cell (`col`, `row`) in the grid's CRS and in CRS84.
    pub fn centre(&self, col: u64, row: u64) -> ((f64, f64), Option<(f64, f64)>) {
        let (x, y) = (self.x.centre(col), self.y.centre(row));
        let lonlat = match &self.crs {
            Crs::Crs84 => Some((x, y)),
            Crs::Projected(p) => p.inverse(x, y),
        };
        ((x, y), lonlat)
    }

    /// `[west, south, east, north]` of the grid's outer cell edges in
    /// CRS84, longitudes in −180..180 (west > east when the grid crosses
    /// the antimeridian; −180..180 when it goes all the way round). A
    /// projected grid's are those of its outline and of a pole inside it.
    pub fn bounds(&self) -> [f64; 4] {
        match &self.crs {
            Crs::Crs84 => self.degree_bounds(),
            Crs::Projected(p) => self.projected_bounds(p),
        }
    }

    fn degree_bounds(&self) -> [f64; 4] {
        let (w, e) = self.x.extent();
        let (s, n) = self.y.extent();
        let (s, n) = (s.max(-90.0), n.min(90.0));
        if e - w >= 360.0 {
            return [-180.0, s, 180.0, n];
        }
        let (w, e) = (wrap_longitude(w), wrap_longitude(e));
        // An east edge exactly on the antimeridian is 180, not −180.
        let e = if e == -180.0 { 180.0 } else { e };
        [w, s, e, n]
    }

    fn projected_bounds(&self, p: &Projection) -> [f64; 4] {
        let ((x0, x1), (y0, y1)) = (self.x.extent(), self.y.extent());
        let along =
            |a: f64, b: f64| (0..=BOUNDARY_POINTS).map(move |i| a + (b - a) * i as f64 / BOUNDARY_POINTS as f64);
        let outline = along(x0, x1)
            .flat_map(|x| [(x, y0), (x, y1)])
            .chain(along(y0, y1).flat_map(|y| [(x0, y), (x1, y)]));
        let (mut w, mut s, mut e, mut n) = (f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
        for (lon, lat) in outline.filter_map(|(x, y)| p.inverse(x, y)) {
            (w, e, s, n) = (w.min(lon), e.max(lon), s.min(lat), n.max(lat));
        }
        let inside = |lat: f64| {
            p.forward(0.0, lat)
                .is_some_and(|(x, y)| (x0..=x1).contains(&x) && (y0..=y1).contains(&y))
        };
        if inside(90.0) {
            (w, e, n) = (-180.0, 180.0, 90.0);
        }
        if inside(-90.0) {
            (w, e, s) = (-180.0, 180.0, -90.0);
        }
        if !w.is_finite() {
            return [-180.0, -90.0, 180.0, 90.0];
        }
        [w.max(-180.0), s.max(-90.0), e.min(180.0), n.min(90.0)]
    }

    /// The smallest cell side in degrees (a projected one measured as
    /// degrees of longitude at the equator).
    pub fn smallest_cell_degrees(&self) -> f64 {
        let smallest = self.x.smallest_cell().min(self.y.smallest_cell());
        match &self.crs {
            Crs::Crs84 => smallest,
            Crs::Projected(p) => smallest / p.units_per_metre() / METRES_PER_DEGREE,
        }
    }
}

/// The CRS of a grid whose X coordinate is `x`: CRS84 for degrees, else
/// the projected CRS `sources` name; projected coordinates (by units or
/// standard name) with no CRS named are refused.
fn grid_crs(x: &DimInfo, sources: &CrsSources) -> Result<Crs> {
    if degrees(x) {
        return Ok(Crs::Crs84);
    }
    let sources = CrsSources {
        x_units: attr(x, "units"),
        ..*sources
    };
    let named = Crs::from_sources(&sources).map_err(|e| Error::InvalidRequest(format!("not a geo variable: {e}")))?;
    match named {
        Some(crs) => Ok(crs),
        None if attr(x, "units").is_some() || attr(x, "standard_name") == Some("projection_x_coordinate") => {
            Err(Error::InvalidRequest(
                "not a geo variable: its X coordinate is not in degrees and no CRS is given \
                 (a CF grid_mapping or GeoZarr proj:code)"
                    .into(),
            ))
        }
        None => Ok(Crs::Crs84),
    }
}

/// Whether a coordinate is in degrees (by units or standard name).
fn degrees(info: &DimInfo) -> bool {
    matches!(attr(info, "units"), Some(u) if DEGREES_EAST.contains(&u) || DEGREES_NORTH.contains(&u))
        || matches!(attr(info, "standard_name"), Some("longitude" | "latitude"))
}

/// What a raster's pixels sample: the distinct grid rows and columns to
/// read, ascending, and for each pixel the positions of its cell among
/// them (`None`: off the grid). On a CRS84 grid the two are separable (one
/// lookup per pixel column and per pixel row); on a projected grid each
/// pixel is projected.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// Grid columns to read, ascending.
    pub cols: Vec<u64>,
    /// Grid rows to read, ascending.
    pub rows: Vec<u64>,
    pixels: Pixels,
}

#[derive(Debug, Clone, PartialEq)]
enum Pixels {
    /// Per pixel column the position in `cols`, per pixel row in `rows`.
    Separable {
        cols: Vec<Option<usize>>,
        rows: Vec<Option<usize>>,
    },
    /// Per pixel, row by row, the positions in `rows` and `cols`.
    Each(Vec<Option<(u32, u32)>>),
}

impl Sampling {
    /// Pixel centres at longitudes `lons` (columns) and latitudes `lats`
    /// (rows) on `grid`.
    pub fn new(grid: &GeoGrid, lons: &[f64], lats: &[f64]) -> Self {
        match &grid.crs {
            Crs::Crs84 => {
                let (pixel_cols, cols) = positions(lons.iter().map(|&l| grid.x_cell(l)));
                let (pixel_rows, rows) = positions(lats.iter().map(|&l| grid.y.cell(l)));
                Self {
                    cols,
                    rows,
                    pixels: Pixels::Separable {
                        cols: pixel_cols,
                        rows: pixel_rows,
                    },
                }
            }
            Crs::Projected(_) => Self::projected(grid, lons, lats),
        }
    }

    fn projected(grid: &GeoGrid, lons: &[f64], lats: &[f64]) -> Self {
        let cells: Vec<Option<(u64, u64)>> = lats
            .iter()
            .flat_map(|&lat| lons.iter().map(move |&lon| (lon, lat)))
            .map(|(lon, lat)| match grid.cell(lon, lat) {
                (Some(c), Some(r)) => Some((r, c)),
                _ => None,
            })
            .collect();
        let (at_rows, rows) = positions(cells.iter().map(|c| c.map(|(r, _)| r)));
        let (at_cols, cols) = positions(cells.iter().map(|c| c.map(|(_, c)| c)));
        let cells = at_rows
            .into_iter()
            .zip(at_cols)
            .map(|(r, c)| Some((r? as u32, c? as u32)))
            .collect();
        Self {
            cols,
            rows,
            pixels: Pixels::Each(cells),
        }
    }

    /// Whether no pixel lies on the grid.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty() || self.rows.is_empty()
    }

    /// For each pixel, row by row, the index of its cell in the values
    /// of the sampled rows and columns laid out row by row (`row_major`)
    /// or column by column; `u32::MAX` for a pixel off the grid.
    pub fn cell_indices(&self, row_major: bool) -> Vec<u32> {
        const OFF: u32 = u32::MAX;
        let (n_rows, n_cols) = (self.rows.len() as u32, self.cols.len() as u32);
        let at = |r: u32, c: u32| if row_major { r * n_cols + c } else { c * n_rows + r };
        match &self.pixels {
            Pixels::Separable { cols, rows } => {
                // Where each pixel column and pixel row start: one
                // multiplication a row, an addition a pixel.
                let col_at: Vec<u32> = cols.iter().map(|c| c.map_or(OFF, |c| at(0, c as u32))).collect();
                let mut out = Vec::with_capacity(rows.len() * cols.len());
                for row in rows {
                    match row {
                        None => out.extend(std::iter::repeat_n(OFF, cols.len())),
                        Some(r) => {
                            let start = at(*r as u32, 0);
                            out.extend(col_at.iter().map(|&c| if c == OFF { OFF } else { start + c }));
                        }
                    }
                }
                out
            }
            Pixels::Each(cells) => cells.iter().map(|c| c.map_or(OFF, |(r, c)| at(r, c))).collect(),
        }
    }
}

/// Each item's position among the distinct items (sorted), and those.
fn positions(cells: impl Iterator<Item = Option<u64>>) -> (Vec<Option<usize>>, Vec<u64>) {
    let cells: Vec<Option<u64>> = cells.collect();
    let mut distinct: Vec<u64> = cells.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let at = cells
        .into_iter()
        .map(|c| c.map(|c| distinct.binary_search(&c).expect("listed")))
        .collect();
    (at, distinct)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info<'a>(name: &'a str, attributes: &'a Value, values: &'a [f64]) -> DimInfo<'a> {
        DimInfo {
            name: Some(name),
            attributes: Some(attributes),
            values: Some(values),
            is_time: false,
        }
    }

    #[test]
    fn roles_follow_cf_order() {
        let none = json!({});
        assert_eq!(role(&info("lon", &none, &[])), Some(Role::X));
        assert_eq!(role(&info("LATITUDE", &none, &[])), Some(Role::Y));
        assert_eq!(role(&info("a", &json!({"axis": "X"}), &[])), Some(Role::X));
        // axis beats the name, standard_name beats units.
        assert_eq!(role(&info("lat", &json!({"axis": "x"}), &[])), Some(Role::X));
        let both = json!({"standard_name": "latitude", "units": "degrees_east"});
        assert_eq!(role(&info("q", &both, &[])), Some(Role::Y));
        assert_eq!(role(&info("q", &json!({"units": "degreeN"}), &[])), Some(Role::Y));
        assert_eq!(role(&info("lev", &json!({"positive": "down"}), &[])), Some(Role::Z));
        assert_eq!(
            role(&info("p", &json!({"standard_name": "air_pressure"}), &[])),
            Some(Role::Z)
        );
        assert_eq!(role(&info("station", &none, &[])), None);
    }

    #[test]
    fn cells_take_the_larger_index_on_a_shared_edge() {
        let up = CellAxis::from_centres(&[0.0, 1.0, 2.0, 4.0], "X").unwrap();
        assert_eq!(up.extent(), (-0.5, 5.0));
        assert_eq!(up.cell(0.5), Some(1));
        assert_eq!(up.cell(0.49), Some(0));
        assert_eq!(up.cell(3.0), Some(3));
        assert_eq!(up.cell(-0.5), Some(0));
        assert_eq!(up.cell(5.0), None);
        assert_eq!(up.cell(-0.6), None);
        let down = CellAxis::from_centres(&[80.0, 70.0, 60.0], "Y").unwrap();
        assert_eq!(down.cell(75.0), Some(1));
        assert_eq!(down.cell(85.0), Some(0));
        assert_eq!(down.cell(84.9), Some(0));
        assert_eq!(down.cell(55.0), None);
        assert_eq!(down.cell(65.0), Some(2));
        assert!(CellAxis::from_centres(&[1.0], "X").is_err());
        assert!(CellAxis::from_centres(&[1.0, 1.0], "X").is_err());
    }

    #[test]
    fn longitudes_wrap_and_bounds_cross_the_antimeridian() {
        let lons: Vec<f64> = (0..360).map(f64::from).collect();
        let lats = [-1.0, 0.0, 1.0];
        let deg = json!({"units": "degrees_east"});
        let north = json!({"units": "degrees_north"});
        let dims = [info("lat", &north, &lats), info("lon", &deg, &lons)];
        let grid = GeoGrid::detect(&dims, &CrsSources::default()).unwrap();
        assert_eq!((grid.x_dim, grid.y_dim), (1, 0));
        assert_eq!(grid.x_cell(-90.0), Some(270));
        assert_eq!(grid.x_cell(179.9), Some(180));
        assert_eq!(grid.bounds(), [-180.0, -1.5, 180.0, 1.5]);
        let pacific: Vec<f64> = (170..=190).map(f64::from).collect();
        let dims = [info("lat", &north, &lats), info("lon", &deg, &pacific)];
        let grid = GeoGrid::detect(&dims, &CrsSources::default()).unwrap();
        assert_eq!(grid.bounds(), [169.5, -1.5, -169.5, 1.5]);
        assert_eq!(grid.x_cell(-175.0), Some(15));
        let err = GeoGrid::detect(&[info("a", &deg, &lons)], &CrsSources::default()).unwrap_err();
        assert!(err.to_string().contains("not a geo variable"), "{err}");
    }

    #[test]
    fn sampling_lists_each_cell_once() {
        let lons: Vec<f64> = (0..10).map(|i| f64::from(i) * 10.0).collect();
        let lats = [10.0, 0.0, -10.0];
        let deg = json!({"units": "degrees_east"});
        let north = json!({"units": "degrees_north"});
        let dims = [info("lat", &north, &lats), info("lon", &deg, &lons)];
        let grid = GeoGrid::detect(&dims, &CrsSources::default()).unwrap();
        let s = Sampling::new(&grid, &[-20.0, 1.0, 4.0, 5.0, 94.0, 96.0], &[16.0, 14.0, -4.0]);
        assert_eq!(s.cols, vec![0, 1, 9]);
        assert_eq!(s.rows, vec![0, 1]);
        let cols = [None, Some(0), Some(0), Some(1), Some(2), None];
        let rows = [None, Some(0), Some(1)];
        const OFF: u32 = u32::MAX;
        let want = |row_major: bool| -> Vec<u32> {
            rows.iter()
                .flat_map(|r| {
                    cols.iter().map(move |c| match (r, c) {
                        (Some(r), Some(c)) if row_major => r * 3 + c,
                        (Some(r), Some(c)) => c * 2 + r,
                        _ => OFF,
                    })
                })
                .collect()
        };
        assert_eq!(s.cell_indices(true), want(true));
        assert_eq!(s.cell_indices(false), want(false));
    }

    /// UTM zone 33N, 100 km cells around its central meridian (15°E).
    fn utm_grid(x_attrs: &Value) -> Result<GeoGrid> {
        let xs = [400_000.0, 500_000.0, 600_000.0];
        let ys = [100_000.0, 0.0];
        let dims = [info("y", x_attrs, &ys), info("x", x_attrs, &xs)];
        GeoGrid::detect(
            &dims,
            &CrsSources {
                proj_code: Some("EPSG:32633"),
                ..Default::default()
            },
        )
    }

    #[test]
    fn projected_grids_sample_each_pixel() {
        let metres = json!({"units": "m"});
        let grid = utm_grid(&metres).unwrap();
        assert!(matches!(grid.crs, Crs::Projected(_)));
        // 15°E on the equator is x = 500 km, y = 0: column 1, and row 1
        // (the edge between rows 0 and 1 is at 50 km, north of it).
        assert_eq!(grid.cell(15.0, 0.0), (Some(1), Some(1)));
        assert_eq!(grid.cell(15.0, 0.9), (Some(1), Some(0)));
        assert_eq!(grid.cell(40.0, 0.0), (None, Some(1)));
        let s = Sampling::new(&grid, &[14.0, 15.0, 30.0], &[1.0, 0.0]);
        assert_eq!((s.cols.clone(), s.rows.clone()), (vec![0, 1], vec![0, 1]));
        // Rows 0, 1 and columns 0, 1 read: cells 0..4 row by row, or column by column.
        assert_eq!(s.cell_indices(true), vec![0, 1, u32::MAX, 2, 3, u32::MAX]);
        assert_eq!(s.cell_indices(false), vec![0, 2, u32::MAX, 1, 3, u32::MAX]);
        let ((x, y), lonlat) = grid.centre(1, 1);
        assert_eq!((x, y), (500_000.0, 0.0));
        let (lon, lat) = lonlat.unwrap();
        assert!((lon - 15.0).abs() < 1e-9 && lat.abs() < 1e-9, "{lon} {lat}");
        let [w, s_, e, n] = grid.bounds();
        assert!(
            w > 13.0 && w < 13.7 && e > 16.3 && e < 17.0 && s_ < -0.4 && n > 1.3,
            "{:?}",
            grid.bounds()
        );
        // 100 km cells are about 0.9 degrees.
        assert!((grid.smallest_cell_degrees() - 0.898).abs() < 0.001);
        // Metres without a CRS: not a geo variable, saying why.
        let xs = [0.0, 1.0];
        let err = GeoGrid::detect(
            &[info("y", &metres, &xs), info("x", &metres, &xs)],
            &CrsSources::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no CRS"), "{err}");
        // Degrees win over a CRS that names a projection.
        let (east, north) = (json!({"units": "degrees_east"}), json!({"units": "degrees_north"}));
        let dims = [info("y", &north, &xs), info("x", &east, &xs)];
        let sources = CrsSources {
            proj_code: Some("EPSG:32633"),
            ..Default::default()
        };
        assert_eq!(GeoGrid::detect(&dims, &sources).unwrap().crs, Crs::Crs84);
    }
}
