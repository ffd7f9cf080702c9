//! Geographic arrays (contract 3.2): which dimensions of an array are X, Y,
//! T and Z, the cells of its horizontal grid, which cell holds a point, and
//! the rows and columns of the grid that a map raster's pixels sample.
//!
//! A *geo variable* has two horizontal dimensions with 1-D coordinates
//! (cell centres) in degrees: CRS84 longitude and latitude. Each
//! coordinate's role comes from, in order: its `axis` attribute; its
//! `standard_name`; its `units`; else its name. Cell edges are the midpoints
//! between neighbouring centres, the outer ones mirrored; latitude may
//! descend and longitudes may run 0..360 (seen from a map as −180..180). A
//! point takes the cell that contains it, and on a shared edge the cell
//! with the larger index. For a lat/lon grid on Web Mercator or CRS84 the
//! sampling is separable: one lookup per pixel column and one per pixel row.

use serde_json::Value;

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

    /// The centre of cell `i`.
    pub fn centre(&self, i: u64) -> f64 {
        (self.edges[i as usize] + self.edges[i as usize + 1]) / 2.0
    }
}

/// A geo variable's horizontal grid in CRS84 degrees.
#[derive(Debug, Clone, PartialEq)]
pub struct GeoGrid {
    /// The X (longitude) dimension and its cells.
    pub x_dim: usize,
    /// The Y (latitude) dimension.
    pub y_dim: usize,
    /// Longitude cells.
    pub x: CellAxis,
    /// Latitude cells.
    pub y: CellAxis,
    /// The T and Z dimensions, if any.
    pub t_dim: Option<usize>,
    /// The vertical dimension, if any.
    pub z_dim: Option<usize>,
}

impl GeoGrid {
    /// The grid of an array whose dimensions are described by `dims`;
    /// `attributes` are the array's own (its `grid_mapping`).
    pub fn detect(dims: &[DimInfo], attributes: &Value) -> Result<Self> {
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
        if let Some(mapping) = attributes.get("grid_mapping").and_then(Value::as_str) {
            if !mapping.is_empty() && !degrees(&dims[x_dim]) {
                return Err(Error::InvalidRequest(format!(
                    "not a geo variable here: its grid_mapping '{mapping}' is a projected CRS, which this \
                     server does not draw yet (only longitude/latitude grids in degrees)"
                )));
            }
        }
        let values = |d: usize, what: &str| {
            dims[d].values.ok_or_else(|| {
                Error::InvalidRequest(format!(
                    "not a geo variable: its {what} dimension has no numeric coordinate"
                ))
            })
        };
        Ok(Self {
            x: CellAxis::from_centres(values(x_dim, "X")?, "X")?,
            y: CellAxis::from_centres(values(y_dim, "Y")?, "Y")?,
            x_dim,
            y_dim,
            t_dim: find(Role::T),
            z_dim: find(Role::Z),
        })
    }

    /// The X cell holding longitude `lon` (−180..180), trying it as it is
    /// and a turn either way (grids in 0..360 or past ±180).
    pub fn x_cell(&self, lon: f64) -> Option<u64> {
        [lon, lon + 360.0, lon - 360.0].into_iter().find_map(|l| self.x.cell(l))
    }

    /// The Y cell holding latitude `lat`.
    pub fn y_cell(&self, lat: f64) -> Option<u64> {
        self.y.cell(lat)
    }

    /// `[west, south, east, north]` of the grid's outer cell edges in
    /// CRS84, longitudes in −180..180 (west > east when the grid crosses
    /// the antimeridian; −180..180 when it goes all the way round).
    pub fn bounds(&self) -> [f64; 4] {
        let (w, e) = self.x.extent();
        let (s, n) = self.y.extent();
        let (s, n) = (s.max(-90.0), n.min(90.0));
        if e - w >= 360.0 {
            return [-180.0, s, 180.0, n];
        }
        let wrap = |l: f64| (l + 180.0).rem_euclid(360.0) - 180.0;
        let (w, e) = (wrap(w), wrap(e));
        // An east edge exactly on the antimeridian is 180, not −180.
        let e = if e == -180.0 { 180.0 } else { e };
        [w, s, e, n]
    }
}

/// Whether a coordinate is in degrees (by units or standard name).
fn degrees(info: &DimInfo) -> bool {
    matches!(attr(info, "units"), Some(u) if DEGREES_EAST.contains(&u) || DEGREES_NORTH.contains(&u))
        || matches!(attr(info, "standard_name"), Some("longitude" | "latitude"))
}

/// An OGC 2D tile matrix set of 256-pixel tiles (OGC 17-083r4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileMatrixSet {
    /// `WebMercatorQuad`: EPSG:3857, one tile at zoom 0.
    WebMercatorQuad,
    /// `WorldCRS84Quad`: CRS84, two tiles (west, east) at zoom 0.
    WorldCrs84Quad,
}

/// Pixels a tile side.
pub const TILE_SIZE: u32 = 256;

/// The Web Mercator sphere's radius (EPSG:3857), metres.
const EARTH_RADIUS: f64 = 6_378_137.0;

impl TileMatrixSet {
    /// Every set served.
    pub const ALL: [TileMatrixSet; 2] = [TileMatrixSet::WebMercatorQuad, TileMatrixSet::WorldCrs84Quad];

    /// The set named `id`.
    pub fn named(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Its OGC identifier.
    pub fn id(self) -> &'static str {
        match self {
            Self::WebMercatorQuad => "WebMercatorQuad",
            Self::WorldCrs84Quad => "WorldCRS84Quad",
        }
    }

    /// The deepest zoom (matrix identifier).
    pub fn max_zoom(self) -> u8 {
        match self {
            Self::WebMercatorQuad => 24,
            Self::WorldCrs84Quad => 23,
        }
    }

    /// `(columns, rows)` of the matrix at `zoom`.
    pub fn matrix_size(self, zoom: u8) -> (u64, u64) {
        let n = 1u64 << zoom;
        match self {
            Self::WebMercatorQuad => (n, n),
            Self::WorldCrs84Quad => (2 * n, n),
        }
    }

    /// The side of a pixel at `zoom` at the equator, in degrees of longitude.
    pub fn pixel_degrees(self, zoom: u8) -> f64 {
        let cols = self.matrix_size(zoom).0 as f64;
        360.0 / (cols * f64::from(TILE_SIZE))
    }

    /// A pixel's size at `zoom` in the set's CRS units (metres or degrees).
    pub fn cell_size(self, zoom: u8) -> f64 {
        match self {
            Self::WebMercatorQuad => {
                2.0 * std::f64::consts::PI * EARTH_RADIUS / f64::from(TILE_SIZE) / (1u64 << zoom) as f64
            }
            Self::WorldCrs84Quad => 180.0 / f64::from(TILE_SIZE) / (1u64 << zoom) as f64,
        }
    }

    /// The OGC scale denominator at `zoom` (0.28 mm pixels).
    pub fn scale_denominator(self, zoom: u8) -> f64 {
        let metres_per_unit = match self {
            Self::WebMercatorQuad => 1.0,
            Self::WorldCrs84Quad => 2.0 * std::f64::consts::PI * EARTH_RADIUS / 360.0,
        };
        self.cell_size(zoom) * metres_per_unit / 0.000_28
    }

    /// Whether tile (`zoom`, `row`, `col`) exists.
    pub fn contains(self, zoom: u8, row: u64, col: u64) -> bool {
        let (cols, rows) = self.matrix_size(zoom);
        zoom <= self.max_zoom() && row < rows && col < cols
    }

    /// The longitudes of the centres of the pixel columns of tile column
    /// `col` at `zoom`.
    pub fn column_longitudes(self, zoom: u8, col: u64) -> Vec<f64> {
        let pixels = self.matrix_size(zoom).0 as f64 * f64::from(TILE_SIZE);
        (0..u64::from(TILE_SIZE))
            .map(|j| -180.0 + ((col * u64::from(TILE_SIZE) + j) as f64 + 0.5) * 360.0 / pixels)
            .collect()
    }

    /// The latitudes of the centres of the pixel rows of tile row `row`.
    pub fn row_latitudes(self, zoom: u8, row: u64) -> Vec<f64> {
        let pixels = self.matrix_size(zoom).1 as f64 * f64::from(TILE_SIZE);
        (0..u64::from(TILE_SIZE))
            .map(|i| {
                let t = ((row * u64::from(TILE_SIZE) + i) as f64 + 0.5) / pixels;
                match self {
                    Self::WebMercatorQuad => (std::f64::consts::PI * (1.0 - 2.0 * t)).sinh().atan().to_degrees(),
                    Self::WorldCrs84Quad => 90.0 - 180.0 * t,
                }
            })
            .collect()
    }

    /// The first zoom whose pixel at the equator is no larger than `cell`
    /// degrees (at most the deepest zoom).
    pub fn zoom_for(self, cell: f64) -> u8 {
        (0..=self.max_zoom())
            .find(|&z| self.pixel_degrees(z) <= cell)
            .unwrap_or(self.max_zoom())
    }
}

/// What a raster's pixels sample: per pixel column the grid column, per
/// pixel row the grid row (`None`: outside the grid), and the distinct grid
/// rows and columns to read, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// Per pixel column, the position in `cols` of its grid column.
    pub pixel_cols: Vec<Option<usize>>,
    /// Per pixel row, the position in `rows`.
    pub pixel_rows: Vec<Option<usize>>,
    /// Grid columns to read, ascending.
    pub cols: Vec<u64>,
    /// Grid rows to read, ascending.
    pub rows: Vec<u64>,
}

impl Sampling {
    /// Pixel centres at `lons` (columns) and `lats` (rows) on `grid`.
    pub fn new(grid: &GeoGrid, lons: &[f64], lats: &[f64]) -> Self {
        let (pixel_cols, cols) = positions(lons.iter().map(|&l| grid.x_cell(l)));
        let (pixel_rows, rows) = positions(lats.iter().map(|&l| grid.y_cell(l)));
        Self {
            pixel_cols,
            pixel_rows,
            cols,
            rows,
        }
    }

    /// Whether no pixel lies on the grid.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty() || self.rows.is_empty()
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
        let grid = GeoGrid::detect(&dims, &json!({})).unwrap();
        assert_eq!((grid.x_dim, grid.y_dim), (1, 0));
        assert_eq!(grid.x_cell(-90.0), Some(270));
        assert_eq!(grid.x_cell(179.9), Some(180));
        assert_eq!(grid.bounds(), [-180.0, -1.5, 180.0, 1.5]);
        let pacific: Vec<f64> = (170..=190).map(f64::from).collect();
        let dims = [info("lat", &north, &lats), info("lon", &deg, &pacific)];
        let grid = GeoGrid::detect(&dims, &json!({})).unwrap();
        assert_eq!(grid.bounds(), [169.5, -1.5, -169.5, 1.5]);
        assert_eq!(grid.x_cell(-175.0), Some(15));
        let err = GeoGrid::detect(&[info("a", &deg, &lons)], &json!({})).unwrap_err();
        assert!(err.to_string().contains("not a geo variable"), "{err}");
    }

    #[test]
    fn tile_matrix_sets_match_ogc() {
        let wm = TileMatrixSet::WebMercatorQuad;
        assert_eq!(wm.matrix_size(3), (8, 8));
        assert!((wm.scale_denominator(0) - 559_082_264.028_717_2).abs() < 1e-3);
        assert!((wm.cell_size(0) - 156_543.033_928_041).abs() < 1e-6);
        let lons = wm.column_longitudes(0, 0);
        assert!((lons[0] - (-180.0 + 360.0 / 512.0)).abs() < 1e-12);
        let lats = wm.row_latitudes(0, 0);
        assert!((lats[0] - 85.0).abs() < 1.0 && lats[0] > 84.0, "{}", lats[0]);
        assert!((lats[127] + lats[128]).abs() < 1e-9);
        let crs84 = TileMatrixSet::WorldCrs84Quad;
        assert_eq!(crs84.matrix_size(0), (2, 1));
        assert!((crs84.scale_denominator(0) - 279_541_132.014_358).abs() < 1e-3);
        assert_eq!(crs84.row_latitudes(0, 0)[0], 90.0 - 180.0 / 512.0);
        assert_eq!(crs84.column_longitudes(0, 1)[0], 180.0 / 512.0);
        assert!(crs84.contains(1, 1, 3) && !crs84.contains(1, 2, 0) && !crs84.contains(24, 0, 0));
        // 1-degree cells: WebMercatorQuad's pixel is 360/256/2^z degrees.
        assert_eq!(wm.zoom_for(1.0), 1);
        assert_eq!(crs84.zoom_for(1.0), 0);
    }

    #[test]
    fn sampling_lists_each_cell_once() {
        let lons: Vec<f64> = (0..10).map(|i| f64::from(i) * 10.0).collect();
        let lats = [10.0, 0.0, -10.0];
        let deg = json!({"units": "degrees_east"});
        let north = json!({"units": "degrees_north"});
        let dims = [info("lat", &north, &lats), info("lon", &deg, &lons)];
        let grid = GeoGrid::detect(&dims, &json!({})).unwrap();
        let s = Sampling::new(&grid, &[-20.0, 1.0, 4.0, 5.0, 94.0, 96.0], &[16.0, 14.0, -4.0]);
        assert_eq!(s.cols, vec![0, 1, 9]);
        assert_eq!(s.pixel_cols, vec![None, Some(0), Some(0), Some(1), Some(2), None]);
        assert_eq!(s.rows, vec![0, 1]);
        assert_eq!(s.pixel_rows, vec![None, Some(0), Some(1)]);
    }
}
