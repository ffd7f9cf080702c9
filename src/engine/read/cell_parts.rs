//! A cell read cut into parts small enough to hold, in the order an answer
//! writes its values: step-major (T, Z, Y, X: each parameter's values in
//! turn, or CSV rows a step at a time) or cell-major (each cell with every
//! time and level: a GeoJSON feature a cell). Concatenated, the parts'
//! values are the whole read's in that order, so an answer streams from
//! them as it would from the whole.

use std::ops::Range;

use crate::engine::read::geo::CellRead;

/// How many values a part holds: about `most`, and up to `longest` to end
/// at a chunk boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSize {
    /// The values a part holds at most, unless it can end at a chunk
    /// boundary by holding more.
    pub most: u64,
    /// The values a part holds at most to end at a chunk boundary.
    pub longest: u64,
}

/// A part of a [`CellRead`]: ranges of positions into its times, levels,
/// rows and columns (`0..1` along an axis the read does not pick);
/// [`CellRead::part`] is the read of just those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellPart {
    /// Positions into the whole read's times.
    pub times: Range<usize>,
    /// Positions into its levels.
    pub levels: Range<usize>,
    /// Positions into its rows.
    pub rows: Range<usize>,
    /// Positions into its columns.
    pub cols: Range<usize>,
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

    /// The read in parts of about `size.most` values, step-major: each
    /// part's values, T, Z, Y, X, follow the previous part's in the whole
    /// read's T, Z, Y, X order. Parts end at chunk boundaries (`chunks`: the
    /// extents of a chunk along T, Z, Y and X): at the last within `most`
    /// values, else at the next if the part then holds at most
    /// `size.longest` (one chunk's extent along the axis it is cut on, so
    /// that no two parts along that axis decode the same chunk), else at
    /// `most`.
    pub fn parts_by_step(&self, size: PartSize, chunks: [u64; 4]) -> Vec<CellPart> {
        let (t, z, y, x) = self.lens();
        let lists = [
            self.times.as_deref(),
            self.levels.as_deref(),
            Some(&self.rows[..]),
            Some(&self.cols[..]),
        ];
        let boundary = |axis: usize, pos: usize| at_boundary(lists[axis], chunks[axis], pos);
        cut(&[t, z, y, x], size, &boundary)
            .into_iter()
            .map(|r| CellPart {
                times: r[0].clone(),
                levels: r[1].clone(),
                rows: r[2].clone(),
                cols: r[3].clone(),
            })
            .collect()
    }

    /// The read in parts of whole cells (every time and level of each),
    /// about `size.most` values each (at least one cell), cell-major: the
    /// parts' cells, row by row, are the whole read's. Parts end at chunk
    /// boundaries of Y and X (`chunks`) as [`CellRead::parts_by_step`]'s do.
    pub fn parts_by_cell(&self, size: PartSize, chunks: [u64; 4]) -> Vec<CellPart> {
        let (t, z, y, x) = self.lens();
        let steps = (t * z).max(1) as u64;
        let cells = PartSize {
            most: (size.most / steps).max(1),
            longest: (size.longest / steps).max(1),
        };
        let lists = [&self.rows[..], &self.cols[..]];
        let boundary = |axis: usize, pos: usize| at_boundary(Some(lists[axis]), chunks[axis + 2], pos);
        cut(&[y, x], cells, &boundary)
            .into_iter()
            .map(|r| CellPart {
                times: 0..t,
                levels: 0..z,
                rows: r[0].clone(),
                cols: r[1].clone(),
            })
            .collect()
    }

    /// The read of `part` of this read.
    pub fn part(&self, part: &CellPart) -> CellRead {
        let pick = |p: &Option<Vec<u64>>, r: &Range<usize>| p.as_ref().map(|list| list[r.clone()].to_vec());
        CellRead {
            cols: self.cols[part.cols.clone()].to_vec(),
            rows: self.rows[part.rows.clone()].to_vec(),
            times: pick(&self.times, &part.times),
            levels: pick(&self.levels, &part.levels),
        }
    }
}

/// Whether a cut before position `pos` of `list` (array indices, in any
/// order; `None`: the axis is not picked) falls between chunks `chunk`
/// long: the indices either side lie in different chunks.
fn at_boundary(list: Option<&[u64]>, chunk: u64, pos: usize) -> bool {
    match list {
        Some(list) => list[pos] / chunk.max(1) != list[pos - 1] / chunk.max(1),
        None => true,
    }
}

/// Ranges along each axis of a C-order block of `lens` (the last fastest)
/// cutting it into parts of about `size.most` elements, in order: a run
/// along one axis of whole spans of the axes after it, at one position of
/// each axis before it. A run ends where `boundary(axis, position)` holds:
/// the last such position within `most`, else the first beyond if the part
/// holds at most `size.longest` there, else at `most` (at least one
/// position). Nothing for an empty block.
fn cut(lens: &[usize], size: PartSize, boundary: &dyn Fn(usize, usize) -> bool) -> Vec<Vec<Range<usize>>> {
    if lens.contains(&0) {
        return Vec::new();
    }
    let most = size.most.max(1);
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
    let longest = (size.longest / inner[axis + 1]).max(run as u64) as usize;
    // The runs along it: as long as allowed, ended at the last boundary
    // in reach, or at the first within the longest run (a chunk's extent
    // read whole), or at the reach.
    let len = lens[axis];
    let mut runs = Vec::new();
    let mut start = 0;
    while start < len {
        let reach = (start + run).min(len);
        let limit = start.saturating_add(longest);
        let end = if reach == len {
            len
        } else if let Some(e) = (start + 1..=reach).rev().find(|&e| boundary(axis, e)) {
            e
        } else if let Some(e) = (reach + 1..=limit.min(len - 1)).find(|&e| boundary(axis, e)) {
            e
        } else if limit >= len {
            len
        } else {
            reach
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

    /// About `most`, up to twice that to end at a chunk boundary.
    fn size(most: u64) -> PartSize {
        PartSize {
            most,
            longest: 2 * most,
        }
    }

    impl CellRead {
        fn parts_by_step_(&self, most: u64) -> Vec<CellPart> {
            self.parts_by_step(size(most), UNCHUNKED)
        }

        fn parts_by_cell_(&self, most: u64) -> Vec<CellPart> {
            self.parts_by_cell(size(most), UNCHUNKED)
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
                assert_eq!(p.values(), r.part(p).values());
                got.extend(whole_positions(&r.part(p)));
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
                assert_eq!(r.part(p).times, r.times);
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
                let read = r.part(p);
                for &y in &read.rows {
                    for &x in &read.cols {
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
                .map(|p| {
                    let rows = r.part(p).rows;
                    rows[0]..rows[rows.len() - 1] + 1
                })
                .collect::<Vec<_>>()
        };
        // 25 rows in reach: cut at 64, then at 80 (the next run could reach 89).
        assert_eq!(
            rows(r.parts_by_step(size(250), [1, 1, 16, 1])),
            vec![50..64, 64..80, 80..90]
        );
        // 10 rows in reach, no boundary within them: on to the next one,
        // within 20 rows.
        assert_eq!(
            rows(r.parts_by_step(size(100), [1, 1, 16, 1])),
            vec![50..64, 64..80, 80..90]
        );
        // No boundary within 20 rows of 64: cut at the reach; the last run
        // takes the rest, which is within 20 rows.
        assert_eq!(
            rows(r.parts_by_step(size(100), [1, 1, 64, 1])),
            vec![50..64, 64..74, 74..90]
        );
        assert_eq!(
            rows(r.parts_by_cell(size(250), [1, 1, 16, 1])),
            vec![50..64, 64..80, 80..90]
        );
        // Indices with gaps, or descending: boundaries where the chunk changes.
        let mut gap = read(None, None, 6, 1);
        gap.rows = vec![0, 1, 2, 10, 11, 12];
        let ranges = |parts: Vec<CellPart>| parts.into_iter().map(|p| p.rows).collect::<Vec<_>>();
        assert_eq!(ranges(gap.parts_by_step(size(5), [1, 1, 4, 1])), vec![0..5, 5..6]);
        gap.rows = vec![9, 8, 7, 6, 5, 4];
        assert_eq!(ranges(gap.parts_by_step(size(3), [1, 1, 4, 1])), vec![0..2, 2..6]);
    }
}
