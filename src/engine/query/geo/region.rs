//! The cells of a grid inside a region (api.md 3.5): a polygon with holes
//! (even–odd rule on cell centres), a circle of great-circle radius, a
//! bounding box. Regions are in CRS84 degrees; a cell is tested at its
//! centre's longitude and latitude, its longitude also a turn either way,
//! so grids in 0..360 and regions written past ±180 meet.

use super::{Crs, GeoGrid};

/// The Earth's mean radius (IUGG), in kilometres.
pub const MEAN_EARTH_RADIUS_KM: f64 = 6371.0088;

/// A window of a grid (its columns west to east, a window across the
/// antimeridian wrapping round; its rows in order) and, row by row,
/// whether each of its cells is in the region.
#[derive(Debug, Clone, PartialEq)]
pub struct CellWindow {
    /// The columns.
    pub cols: Vec<u64>,
    /// The rows.
    pub rows: Vec<u64>,
    /// Per cell of the window, row-major: inside the region.
    pub inside: CellMask,
}

/// A bit per cell of a window, row-major: which cells lie in a region (a
/// window of a hundred million cells takes 12 MiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellMask {
    words: Vec<u64>,
    len: usize,
}

impl CellMask {
    /// `len` cells, none set.
    pub fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Its cells.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no cell.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether cell `i` is set.
    pub fn get(&self, i: usize) -> bool {
        debug_assert!(i < self.len);
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Set cell `i`.
    pub fn set(&mut self, i: usize) {
        debug_assert!(i < self.len);
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// The bits, 64 cells a word (the first cell the lowest bit).
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// Whether (`x`, `y`) is inside the polygon of `rings` (an outer ring and
/// its holes, or several polygons' rings): the even–odd rule, so a point
/// in a hole is outside.
pub fn in_rings(rings: &[Vec<(f64, f64)>], x: f64, y: f64) -> bool {
    let mut inside = false;
    for ring in rings {
        let n = ring.len();
        for i in 0..n {
            let (xi, yi) = ring[i];
            let (xj, yj) = ring[(i + n - 1) % n];
            if (yi > y) != (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi {
                inside = !inside;
            }
        }
    }
    inside
}

/// The great-circle distance in kilometres between two points in degrees
/// (haversine, on a sphere of the Earth's mean radius).
pub fn great_circle_km((lon1, lat1): (f64, f64), (lon2, lat2): (f64, f64)) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let (dp, dl) = ((lat2 - lat1).to_radians(), (lon2 - lon1).to_radians());
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * MEAN_EARTH_RADIUS_KM * a.sqrt().min(1.0).asin()
}

/// The box (west, south, east, north, CRS84) holding every circle of
/// great-circle radius `km` around `centres`: a circle's reach in latitude
/// is its angle r, in longitude asin(sin r / cos lat); all the way round
/// when that is 1 or more (a circle over a pole) or the box spans a turn.
/// A hair wider than exact, so cells on the edge are looked at.
pub fn circles_bbox(centres: &[(f64, f64)], km: f64) -> [f64; 4] {
    let r = km / MEAN_EARTH_RADIUS_KM;
    let dlat = r.to_degrees() * 1.000_001;
    let (mut w, mut s, mut e, mut n) = (180.0f64, 90.0f64, -180.0f64, -90.0f64);
    let mut round = false;
    for &(x, y) in centres {
        let reach = r.sin() / y.to_radians().cos();
        round |= reach >= 1.0 || reach.is_nan() || r >= std::f64::consts::FRAC_PI_2;
        let dlon = reach.min(1.0).asin().to_degrees() * 1.000_001;
        (w, e) = (w.min(x - dlon), e.max(x + dlon));
        (s, n) = (s.min(y - dlat), n.max(y + dlat));
    }
    match round || n >= 90.0 || s <= -90.0 || e - w >= 360.0 {
        true => [-540.0, s.max(-90.0), 540.0, n.min(90.0)],
        false => [w, s, e, n],
    }
}

impl GeoGrid {
    /// The cells within `km` (great-circle) of any of `centres`, as
    /// [`GeoGrid::cells_within`] finds them.
    pub fn cells_within_km(&self, centres: &[(f64, f64)], km: f64, max_cells: u64) -> Result<Option<CellWindow>, u64> {
        self.cells_within(circles_bbox(centres, km), max_cells, |lon, lat| {
            centres.iter().any(|&c| great_circle_km(c, (lon, lat)) <= km)
        })
    }
}

impl GeoGrid {
    /// The cells whose centres satisfy `inside(lon, lat)`, looked for
    /// among those whose centres lie in `[west, south, east, north]`
    /// (CRS84; west may exceed east across the antimeridian); `Ok(None)`
    /// when there is none. More than `max_cells` cells to look at is
    /// `Err` with their number, before any is looked at.
    pub fn cells_within(
        &self,
        bbox: [f64; 4],
        max_cells: u64,
        inside: impl Fn(f64, f64) -> bool,
    ) -> Result<Option<CellWindow>, u64> {
        let [west, south, east, north] = bbox;
        let in_lon = |lon: f64| {
            [lon, lon + 360.0, lon - 360.0].iter().any(|&l| match west <= east {
                true => (west..=east).contains(&l),
                false => l >= west || l <= east,
            })
        };
        let (nx, ny) = (self.x.len() as u64, self.y.len() as u64);
        let (cols, rows): (Vec<u64>, Vec<u64>) = match &self.crs {
            Crs::Crs84 => (
                (0..nx).filter(|&c| in_lon(self.x.centre(c))).collect(),
                (0..ny)
                    .filter(|&r| (south..=north).contains(&self.y.centre(r)))
                    .collect(),
            ),
            Crs::Projected(p) => {
                let (xs, ys) = self.projected_candidates(p, bbox);
                (
                    (0..nx).filter(|&c| xs.contains(&self.x.centre(c))).collect(),
                    (0..ny).filter(|&r| ys.contains(&self.y.centre(r))).collect(),
                )
            }
        };
        let candidates = cols.len() as u64 * rows.len() as u64;
        if candidates > max_cells {
            return Err(candidates);
        }
        let lonlat = |c: u64, r: u64| match &self.crs {
            Crs::Crs84 => Some((self.x.centre(c), self.y.centre(r))),
            Crs::Projected(p) => p.inverse(self.x.centre(c), self.y.centre(r)),
        };
        // Which candidate cells are inside: one bit each, no list of them.
        let mut hit = CellMask::new(cols.len() * rows.len());
        let mut col_hit = vec![false; cols.len()];
        let (mut r0, mut r1) = (u64::MAX, 0);
        for (i, &r) in rows.iter().enumerate() {
            for (j, &c) in cols.iter().enumerate() {
                let Some((lon, lat)) = lonlat(c, r) else { continue };
                let near = in_lon(lon) && (south..=north).contains(&lat);
                if near && [lon, lon + 360.0, lon - 360.0].iter().any(|&l| inside(l, lat)) {
                    hit.set(i * cols.len() + j);
                    col_hit[j] = true;
                    (r0, r1) = (r0.min(r), r1.max(r));
                }
            }
        }
        let found: Vec<u64> = cols
            .iter()
            .zip(&col_hit)
            .filter(|(_, h)| **h)
            .map(|(c, _)| *c)
            .collect();
        if found.is_empty() {
            return Ok(None);
        }
        // Every column between the first and last found, or, when the
        // found ones wrap round the antimeridian, those that do.
        let wraps = self.crs == Crs::Crs84 && self.x.extent().1 - self.x.extent().0 >= 359.0;
        let window_cols: Vec<u64> = match wraps {
            false => (found[0]..=found[found.len() - 1]).collect(),
            true => {
                let gap = found.windows(2).enumerate().max_by_key(|(_, w)| w[1] - w[0]);
                let wrap_gap = found[0] + nx - found[found.len() - 1];
                match gap {
                    Some((i, w)) if w[1] - w[0] > wrap_gap => (found[i + 1]..nx).chain(0..=found[i]).collect(),
                    _ => (found[0]..=found[found.len() - 1]).collect(),
                }
            }
        };
        let window_rows: Vec<u64> = (r0..=r1).collect();
        let width = window_cols.len();
        let mut at_column = vec![usize::MAX; nx as usize];
        for (k, &c) in window_cols.iter().enumerate() {
            at_column[c as usize] = k;
        }
        let mut mask = CellMask::new(width * window_rows.len());
        for (i, &r) in rows.iter().enumerate() {
            for (j, &c) in cols.iter().enumerate() {
                if hit.get(i * cols.len() + j) {
                    mask.set((r - r0) as usize * width + at_column[c as usize]);
                }
            }
        }
        let (cols, rows) = (window_cols, window_rows);
        Ok(Some(CellWindow {
            cols,
            rows,
            inside: mask,
        }))
    }

    /// The projected x and y ranges (a cell wider each way) of a CRS84
    /// box, from points along its outline; the whole grid when the outline
    /// does not project or the box holds a pole or goes all the way round.
    fn projected_candidates(
        &self,
        p: &super::Projection,
        [west, south, east, north]: [f64; 4],
    ) -> (std::ops::RangeInclusive<f64>, std::ops::RangeInclusive<f64>) {
        let everything = (f64::NEG_INFINITY..=f64::INFINITY, f64::NEG_INFINITY..=f64::INFINITY);
        let east = if east < west { east + 360.0 } else { east };
        if east - west >= 360.0 || north >= 90.0 || south <= -90.0 {
            return everything;
        }
        const STEPS: usize = 64;
        let along = |a: f64, b: f64| (0..=STEPS).map(move |i| a + (b - a) * i as f64 / STEPS as f64);
        let outline = along(west, east)
            .flat_map(|lon| [(lon, south), (lon, north)])
            .chain(along(south, north).flat_map(|lat| [(west, lat), (east, lat)]));
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for (lon, lat) in outline {
            let Some((x, y)) = p.forward(lon, lat) else {
                return everything;
            };
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        let (dx, dy) = (self.x.largest_cell(), self.y.largest_cell());
        (x0 - dx..=x1 + dx, y0 - dy..=y1 + dy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circles_reach_further_in_longitude_towards_the_poles() {
        // 1 degree of a great circle is about 111.2 km.
        let km = MEAN_EARTH_RADIUS_KM * 1f64.to_radians();
        let [w, s, e, n] = circles_bbox(&[(10.0, 0.0)], km);
        assert!((w - 9.0).abs() < 1e-4 && (e - 11.0).abs() < 1e-4, "{w} {e}");
        assert!((s + 1.0).abs() < 1e-4 && (n - 1.0).abs() < 1e-4, "{s} {n}");
        // At 60 degrees a degree of latitude reaches about two of longitude.
        let [w, _, e, _] = circles_bbox(&[(0.0, 60.0)], km);
        assert!((e - w - 4.0).abs() < 0.01, "{w} {e}");
        // Over a pole, or wider than the Earth: every longitude.
        assert_eq!(circles_bbox(&[(0.0, 89.5)], km)[0], -540.0);
        assert_eq!(circles_bbox(&[(0.0, 0.0)], 1e12), [-540.0, -90.0, 540.0, 90.0]);
        // Two circles: the box of both.
        let [w, _, e, _] = circles_bbox(&[(-20.0, 0.0), (20.0, 0.0)], km);
        assert!((w + 21.0).abs() < 1e-4 && (e - 21.0).abs() < 1e-4);
    }

    #[test]
    fn holes_are_outside_and_distances_are_great_circles() {
        let outer = vec![(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0), (0.0, 0.0)];
        let hole = vec![(4.0, 4.0), (6.0, 4.0), (6.0, 6.0), (4.0, 6.0)];
        let rings = vec![outer, hole];
        assert!(in_rings(&rings, 1.0, 1.0));
        assert!(!in_rings(&rings, 5.0, 5.0));
        assert!(!in_rings(&rings, 11.0, 5.0));
        // A quarter of the equator, and one degree of latitude.
        let quarter = great_circle_km((0.0, 0.0), (90.0, 0.0));
        assert!((quarter - MEAN_EARTH_RADIUS_KM * std::f64::consts::FRAC_PI_2).abs() < 1e-6);
        assert!((great_circle_km((10.0, 50.0), (10.0, 51.0)) - 111.195).abs() < 0.01);
    }
}
