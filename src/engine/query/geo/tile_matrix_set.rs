//! The OGC 2D tile matrix sets served (OGC 17-083r4, as `morecantile`
//! defines them): `WebMercatorQuad` and `WorldCRS84Quad`, 256-pixel tiles,
//! and the longitudes and latitudes of a tile's pixel centres.

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
pub const EARTH_RADIUS: f64 = 6_378_137.0;

/// Metres in a degree of longitude at the equator of that sphere.
pub const METRES_PER_DEGREE: f64 = 2.0 * std::f64::consts::PI * EARTH_RADIUS / 360.0;

/// Half the side of the Web Mercator square (EPSG:3857), metres.
pub const MERCATOR_HALF: f64 = 20_037_508.342_789_244;

/// The latitude of the Web Mercator square's edges, degrees.
pub const MERCATOR_LATITUDE: f64 = 85.051_128_779_806_59;

/// Longitude and latitude (degrees) in Web Mercator metres, latitudes
/// clamped to the square's edges.
pub fn to_mercator(lon: f64, lat: f64) -> [f64; 2] {
    let lat = lat.clamp(-MERCATOR_LATITUDE, MERCATOR_LATITUDE).to_radians();
    let x = lon.to_radians() * EARTH_RADIUS;
    let y = (std::f64::consts::FRAC_PI_4 + lat / 2.0).tan().ln() * EARTH_RADIUS;
    [x, y]
}

/// The latitude (degrees) of Web Mercator `y` given in earth radii.
pub(crate) fn mercator_latitude(y: f64) -> f64 {
    y.sinh().atan().to_degrees()
}

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
            Self::WebMercatorQuad => 360.0 * METRES_PER_DEGREE / f64::from(TILE_SIZE) / (1u64 << zoom) as f64,
            Self::WorldCrs84Quad => 180.0 / f64::from(TILE_SIZE) / (1u64 << zoom) as f64,
        }
    }

    /// The OGC scale denominator at `zoom` (0.28 mm pixels).
    pub fn scale_denominator(self, zoom: u8) -> f64 {
        let metres_per_unit = match self {
            Self::WebMercatorQuad => 1.0,
            Self::WorldCrs84Quad => METRES_PER_DEGREE,
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
                    Self::WebMercatorQuad => mercator_latitude(std::f64::consts::PI * (1.0 - 2.0 * t)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
