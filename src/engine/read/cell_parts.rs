//! A cell read cut into parts small enough to hold, in the order an answer
//! writes its values: step-major (T, Z, Y, X: each parameter's values in
//! turn, or CSV rows a step at a time) or cell-major (each cell with every
//! time and level: a GeoJSON feature a cell). Concatenated, the parts'
//! values are the whole read's in that order, so an answer streams from
//! them as it would from the whole.

use std::ops::Range;

use crate::engine::read::geo::CellRead;

/// A part of a [`CellRead`]: ranges of positions into its times, levels,
/// rows and columns (`0..1` along an axis the read does not pick), and
/// the read of just those.
#[derive(Debug, Clone, PartialEq)]
pub struct CellPart {
    /// Positions into the whole read's times.
    pub times: Range<usize>,
    /// Positions into its levels.
    pub levels: Range<usize>,
    /// Positions into its rows.
    pub rows: Range<usize>,
    /// Positions into its columns.
    pub cols: Range<usize>,
    /// The part as a read of its own.
    pub read: CellRead,
}

impl CellPart {
    /// Its values: cells times steps.
    pub fn values(&self) -> u64 {
        [&self.times, &self.levels, &self.rows, &self.cols]
            .iter()
            .map(|r| r.len() as u64)
            .product()
    }
}

impl CellRead {
    /// Its values (per variable): cells times steps.
    pub fn values(&self) -> u64 {
        let (t, z, y, x) = self.lens();
        (t * z * y * x) as u64
    }

    fn lens(&self) -> (usize, usize, usize, usize) {
        let len = |p: &Option<Vec<u64>>| p.as_ref().map_or(1, Vec::len);
        (len(&self.times), len(&self.levels), self.rows.len(), self.cols.len())
    }

    /// The read in parts of about `most` values, step-major: each part's
    /// values, T, Z, Y, X, follow the previous part's in the whole read's
    /// T, Z, Y, X order. Parts end at chunk boundaries (`chunks`: the
    /// extents of a chunk along T, Z, Y and X): at the last within `most`
    /// values, else the next (a part then holds one chunk's extent along
    /// the axis it is cut on), so that no two parts along that axis read
    /// the same chunk, as a region read's slabs hold whole chunk rows.
    pub fn parts_by_step(&self, most: u64, chunks: [u64; 4]) -> Vec<CellPart> {
        let (t, z, y, x) = self.lens();
        let lists = [
            self.times.as_deref(),
            self.levels.as_deref(),
            Some(&self.rows[..]),
            Some(&self.cols[..]),
        ];
        let boundary = |axis: usize, pos: usize| at_boundary(lists[axis], chunks[axis], pos);
        cut(&[t, z, y, x], most, &boundary)
            .into_iter()
            .map(|r| self.part(r[0].clone(), r[1].clone(), r[2].clone(), r[3].clone()))
            .collect()
    }

    /// The read in parts of whole cells (every time and level of each),
    /// about `most` values each (at least one cell), cell-major: the
    /// parts' cells, row by row, are the whole read's. Parts end at chunk
    /// boundaries of Y and X (`chunks`) as [`CellRead::parts_by_step`]'s do.
    pub fn parts_by_cell(&self, most: u64, chunks: [u64; 4]) -> Vec<CellPart> {
        let (t, z, y, x) = self.lens();
        let cells = (most / (t * z).max(1) as u64).max(1);
        let lists = [&self.rows[..], &self.cols[..]];
        let boundary = |axis: usize, pos: usize| at_boundary(Some(lists[axis]), chunks[axis + 2], pos);
        cut(&[y, x], cells, &boundary)
            .into_iter()
            .map(|r| self.part(0..t, 0..z, r[0].clone(), r[1].clone()))
            .collect()
    }

    fn part(&self, times: Range<usize>, levels: Range<usize>, rows: Range<usize>, cols: Range<usize>) -> CellPart {
        let pick = |p: &Option<Vec<u64>>, r: &Range<usize>| p.as_ref().map(|list| list[r.clone()].to_vec());
        let read = CellRead {
            cols: self.cols[cols.clone()].to_vec(),
            rows: self.rows[rows.clone()].to_vec(),
            times: pick(&self.times, &times),
            levels: pick(&self.levels, &levels),
        };
        CellPart {
            times,
            levels,
            rows,
            cols,
            read,
        }
    }
}

/// Whether a cut before position `pos` of `list` (array indices; `None`:
/// the axis is not picked) falls on a boundary of chunks `chunk` long: the
/// index there starts a chunk, or does not follow the one before.
fn at_boundary(list: Option<&[u64]>, chunk: u64, pos: usize) -> bool {
    match list {
        Some(list) => list[pos] % chunk.max(1) == 0 || list[pos] != list[pos - 1] + 1,
        None => true,
    }
}

/// Ranges along each axis of a C-order block of `lens` (the last fastest)
/// cutting it into parts of about `most` elements, in order: a run along
/// one axis of whole spans of the axes after it, at one position of each
/// axis before it. A run ends where `boundary(axis, position)` holds: the
/// last such position within `most`, else the first beyond (so a part may
/// hold more than `most`: one chunk's extent along the axis). Nothing for
/// an empty block.
fn cut(lens: &[usize], most: u64, boundary: &dyn Fn(usize, usize) -> bool) -> Vec<Vec<Range<usize>>> {
    if lens.contains(&0) {
        return Vec::new();
    }
    let most = most.max(1);
    let rank = lens.len();
    // inner[d]: elements of one position of axis d - 1 (the axes from d on).
    let mut inner = vec![1u64; rank + 1];
    for d in (0..rank).rev() {
        inner[d] = inner[d + 1].saturating_mul(lens[d] as u64);
    }
    if inner[0] <= most {
        return vec![lens.iter().map(|&n| 0..n).collect()];
    }
    // The outermost axis whose positions each fit: cut runs along it.
    let axis = (0..rank).find(|&d| inner[d + 1] <= most).unwrap_or(rank - 1);
    let run = (most / inner[axis + 1]).max(1) as usize;
    // The runs along it: as long as allowed, ended at the last boundary
    // in reach, or at the first beyond it (a chunk's extent is read whole).
    let len = lens[axis];
    let mut runs = Vec::new();
    let mut start = 0;
    while start < len {
        let reach = (start + run).min(len);
        let end = match reach == len {
            true => len,
            false => (start + 1..=reach)
                .rev()
                .find(|&e| boundary(axis, e))
                .or_else(|| (reach + 1..len).find(|&e| boundary(axis, e)))
                .unwrap_or(len),
        };
        runs.push(start..end);
        start = end;
    }
    let mut out = Vec::new();
    let mut outer = vec![0usize; axis];
    loop {
        for span in &runs {
            let mut ranges: Vec<Range<usize>> = outer.iter().map(|&i| i..i + 1).collect();
            ranges.push(span.clone());
            ranges.extend(lens[axis + 1..].iter().map(|&n| 0..n));
            out.push(ranges);
        }
        // The next position of the outer axes (the last fastest).
        let mut d = axis;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            outer[d] += 1;
            if outer[d] < lens[d] {
                break;
            }
            outer[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNCHUNKED: [u64; 4] = [1, 1, 1, 1];

    impl CellRead {
        fn parts_by_step_(&self, most: u64) -> Vec<CellPart> {
            self.parts_by_step(most, UNCHUNKED)
        }

        fn parts_by_cell_(&self, most: u64) -> Vec<CellPart> {
            self.parts_by_cell(most, UNCHUNKED)
        }
    }

    fn read(t: Option<u64>, z: Option<u64>, y: u64, x: u64) -> CellRead {
        CellRead {
            cols: (100..100 + x).collect(),
            rows: (50..50 + y).collect(),
            times: t.map(|n| (10..10 + n).collect()),
            levels: z.map(|n| (0..n).rev().collect()),
        }
    }

    /// Every (t, z, y, x) of the whole read, in its order.
    fn whole_positions(r: &CellRead) -> Vec<(u64, u64, u64, u64)> {
        let ts = r.times.clone().unwrap_or(vec![u64::MAX]);
        let zs = r.levels.clone().unwrap_or(vec![u64::MAX]);
        let mut out = Vec::new();
        for &t in &ts {
            for &z in &zs {
                for &y in &r.rows {
                    for &x in &r.cols {
                        out.push((t, z, y, x));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn step_parts_concatenate_to_the_whole_read() {
        for (r, most) in [
            (read(Some(7), Some(3), 5, 4), 1),
            (read(Some(7), Some(3), 5, 4), 13),
            (read(Some(7), Some(3), 5, 4), 20),
            (read(Some(7), Some(3), 5, 4), 61),
            (read(Some(7), Some(3), 5, 4), 420),
            (read(None, None, 9, 11), 30),
            (read(Some(2), None, 1, 1), 1),
            (read(None, Some(4), 3, 3), 1_000_000),
        ] {
            let parts = r.parts_by_step_(most);
            let mut got = Vec::new();
            for p in &parts {
                assert!(p.values() <= most.max(1), "{p:?} above {most}");
                assert_eq!(p.values(), p.read.values());
                got.extend(whole_positions(&p.read));
            }
            assert_eq!(got, whole_positions(&r), "most {most}");
            if r.values() <= most {
                assert_eq!(parts.len(), 1);
            }
        }
    }

    #[test]
    fn step_parts_are_as_large_as_allowed() {
        // 7 x 3 x 5 x 4: a step (20 values) fits 61 three times, a time (60) once.
        let r = read(Some(7), Some(3), 5, 4);
        assert_eq!(r.parts_by_step_(61).len(), 7);
        assert_eq!(r.parts_by_step_(60).len(), 7);
        assert_eq!(r.parts_by_step_(59).len(), 7 * 2);
        // Rows of 4: a step of 5 rows is cut into runs of 2, 2 and 1 rows.
        let parts = r.parts_by_step_(9);
        assert_eq!(parts.len(), 7 * 3 * 3);
        assert_eq!(parts[2].rows, 4..5);
        assert!(r.parts_by_step_(0).iter().all(|p| p.values() == 1));
    }

    #[test]
    fn cell_parts_hold_whole_cells_in_row_order() {
        let r = read(Some(6), Some(2), 5, 4);
        for most in [1, 12, 13, 48, 100, 240, 1 << 20] {
            let parts = r.parts_by_cell_(most);
            for p in &parts {
                assert_eq!((p.times.clone(), p.levels.clone()), (0..6, 0..2));
                assert_eq!(p.read.times, r.times);
                assert!(p.values() <= most.max(12), "{p:?} above {most}");
            }
            // Row by row, as a single part would list them.
            let mut want = Vec::new();
            for &y in &r.rows {
                for &x in &r.cols {
                    want.push((y, x));
                }
            }
            let mut ordered = Vec::new();
            for p in &parts {
                for &y in &p.read.rows {
                    for &x in &p.read.cols {
                        ordered.push((y, x));
                    }
                }
            }
            assert_eq!(ordered, want, "most {most}");
        }
    }

    #[test]
    fn an_empty_read_has_no_parts() {
        assert!(read(Some(0), None, 3, 3).parts_by_step_(10).is_empty());
        assert!(read(None, None, 0, 3).parts_by_cell_(10).is_empty());
    }

    #[test]
    fn parts_end_at_chunk_boundaries_within_reach() {
        // Rows 50..90 in chunks of 16 rows: boundaries before rows 64 and 80.
        let r = read(None, None, 40, 10);
        let rows = |parts: Vec<CellPart>| {
            parts
                .iter()
                .map(|p| p.read.rows[0]..p.read.rows.last().unwrap() + 1)
                .collect::<Vec<_>>()
        };
        // 25 rows in reach: cut at 64, then at 80 (the next run could reach 89).
        assert_eq!(rows(r.parts_by_step(250, [1, 1, 16, 1])), vec![50..64, 64..80, 80..90]);
        // 10 rows in reach, no boundary within them: on to the next one.
        assert_eq!(rows(r.parts_by_step(100, [1, 1, 16, 1])), vec![50..64, 64..80, 80..90]);
        assert_eq!(rows(r.parts_by_step(100, [1, 1, 64, 1])), vec![50..64, 64..90]);
        assert_eq!(rows(r.parts_by_cell(250, [1, 1, 16, 1])), vec![50..64, 64..80, 80..90]);
        // A gap in the indices is a boundary too.
        let mut gap = read(None, None, 6, 1);
        gap.rows = vec![0, 1, 2, 10, 11, 12];
        assert_eq!(rows(gap.parts_by_step(5, [1, 1, 1000, 1])), vec![0..3, 10..13]);
    }
}
