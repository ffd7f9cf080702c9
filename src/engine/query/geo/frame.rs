//! A map's frame: the longitude of each pixel column's centre and the
//! latitude of each pixel row's, for a bounding box in one of the map CRSs
//! (what WMS `GetMap` and `GetFeatureInfo` draw on; tiles have theirs from
//! [`super::TileMatrixSet`]).

use super::tile_matrix_set::{mercator_latitude, EARTH_RADIUS};

/// The CRSs a map's bounding box may be given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapCrs {
    /// Longitude, latitude (`CRS:84`).
    Crs84,
    /// EPSG:4326 with its axis order: latitude first.
    Epsg4326,
    /// Web Mercator (EPSG:3857) metres.
    WebMercator,
}

impl MapCrs {
    /// The CRS of a WMS `CRS`/`SRS` name (case-insensitive).
    pub fn named(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "CRS:84" | "OGC:CRS84" => Some(Self::Crs84),
            "EPSG:4326" => Some(Self::Epsg4326),
            "EPSG:3857" | "EPSG:900913" => Some(Self::WebMercator),
            _ => None,
        }
    }
}

/// The pixel centres of a map, top row first.
#[derive(Debug, Clone, PartialEq)]
pub struct MapFrame {
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// Longitude of each column (wrapped into -180..180).
    pub lons: Vec<f64>,
    /// Latitude of each row, top to bottom.
    pub lats: Vec<f64>,
    /// A pixel's width in degrees of longitude.
    pub pixel_degrees: f64,
}

impl MapFrame {
    /// The frame of `bbox` (min x, min y, max x, max y in `crs`'s axis
    /// order) drawn `width` by `height` pixels (each at least 1). `None`
    /// when the box is not one: a side not finite or not positive.
    pub fn new(crs: MapCrs, bbox: [f64; 4], width: u32, height: u32) -> Option<Self> {
        let [x0, y0, x1, y1] = bbox;
        let ordered = |lo: f64, hi: f64| (hi - lo).is_finite() && lo < hi;
        if width == 0 || height == 0 || !ordered(x0, x1) || !ordered(y0, y1) {
            return None;
        }
        let (lons, lats) = match crs {
            MapCrs::Crs84 => (spread(x0, x1, width), down(y0, y1, height)),
            MapCrs::Epsg4326 => (spread(y0, y1, width), down(x0, x1, height)),
            MapCrs::WebMercator => (
                spread(x0, x1, width)
                    .into_iter()
                    .map(|x| (x / EARTH_RADIUS).to_degrees())
                    .collect(),
                down(y0, y1, height)
                    .into_iter()
                    .map(|y| mercator_latitude(y / EARTH_RADIUS))
                    .collect(),
            ),
        };
        let pixel_degrees = match lons.as_slice() {
            [first, .., last] => (last - first).abs() / f64::from(width - 1),
            _ => 0.0,
        };
        // Longitudes past ±180 (a map panned round the world) wrap.
        let lons = lons.into_iter().map(super::wrap_longitude).collect();
        Some(Self {
            width,
            height,
            lons,
            lats,
            pixel_degrees,
        })
    }
}

/// The centres of `n` equal steps from `lo` to `hi`. The step comes first:
/// a span near `f64::MAX` times a pixel index would overflow.
fn spread(lo: f64, hi: f64, n: u32) -> Vec<f64> {
    let step = (hi - lo) / f64::from(n);
    (0..n).map(|k| lo + (f64::from(k) + 0.5) * step).collect()
}

/// [`spread`] from `hi` down to `lo` (map rows run north to south).
fn down(lo: f64, hi: f64, n: u32) -> Vec<f64> {
    let step = (hi - lo) / f64::from(n);
    (0..n).map(|k| hi - (f64::from(k) + 0.5) * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_each_crs() {
        let f = MapFrame::new(MapCrs::Crs84, [-180.0, -90.0, 180.0, 90.0], 4, 2).unwrap();
        assert_eq!(f.lons, [-135.0, -45.0, 45.0, 135.0]);
        assert_eq!(f.lats, [45.0, -45.0]);
        assert_eq!(f.pixel_degrees, 90.0);
        // Latitude first.
        let g = MapFrame::new(MapCrs::Epsg4326, [-90.0, -180.0, 90.0, 180.0], 4, 2).unwrap();
        assert_eq!((g.lons, g.lats), (f.lons, f.lats));
        // The whole Web Mercator square: the equator in the middle row.
        let half = std::f64::consts::PI * EARTH_RADIUS;
        let m = MapFrame::new(MapCrs::WebMercator, [-half, -half, half, half], 2, 3).unwrap();
        assert!((m.lons[0] + 90.0).abs() < 1e-9 && (m.lons[1] - 90.0).abs() < 1e-9);
        // The top row's centre is 2/3 of the way up: y = 2π/3 radii, whose
        // latitude is 2·atan(e^y) - π/2 (the same, written otherwise).
        let top = (2.0 * (2.0 * std::f64::consts::PI / 3.0).exp().atan() - std::f64::consts::FRAC_PI_2).to_degrees();
        assert!(
            m.lats[1].abs() < 1e-9 && (m.lats[0] - top).abs() < 1e-9,
            "{:?} {top}",
            m.lats
        );
        assert!((m.lats[0] - 75.96).abs() < 0.01);
        // Panned round the world: wrapped.
        let w = MapFrame::new(MapCrs::Crs84, [170.0, 0.0, 190.0, 1.0], 2, 1).unwrap();
        assert_eq!(w.lons, [175.0, -175.0]);
    }

    #[test]
    fn boxes_that_are_not_boxes() {
        for bbox in [
            [1.0, 0.0, 1.0, 1.0],
            [0.0, 0.0, f64::INFINITY, 1.0],
            [-1e308, 0.0, 1e308, 1.0],
        ] {
            assert_eq!(MapFrame::new(MapCrs::Crs84, bbox, 2, 2), None, "{bbox:?}");
        }
        assert_eq!(MapFrame::new(MapCrs::Crs84, [0.0, 0.0, 1.0, 1.0], 0, 2), None);
        // A span near f64::MAX stays finite.
        let f = MapFrame::new(MapCrs::Crs84, [-0.0, -1.0, 1e308, 1.0], 41, 1).unwrap();
        assert!(f.lons.iter().all(|l| l.is_finite()));
    }
}
