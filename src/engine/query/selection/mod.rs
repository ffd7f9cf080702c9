//! NumPy basic and orthogonal indexing, and point (vectorized) selection:
//! parsing `select` expressions and resolving them against an array shape.
//!
//! Grammar (api.md): comma-separated items, one per dimension: `i`,
//! `start:stop`, `start:stop:step`, `:`, `::step`, `[i,j,...]` (an index
//! list: zarr's `get_orthogonal_selection`), negative values counted from
//! the end, at most one `...`; fewer items than dimensions mean the rest
//! are `:`; the whole may be wrapped in `[` `]` (only when the `[` at its
//! start closes at its very end). Slices clamp like NumPy; an integer out
//! of range is an error.

use crate::engine::error::{Error, Result};

mod dim;
pub use dim::DimSelection;
pub(crate) use dim::{output_shape, ChunkSpan};

/// One parsed item of a selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SelectItem {
    /// An integer index (drops the dimension).
    Index(i64),
    /// `start:stop:step`, each optional.
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `...`
    Ellipsis,
    /// `[i, j, ...]`: these positions, in this order.
    List(Vec<i64>),
}

/// A parsed selection, not yet bound to a shape: `select` items, or points.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    items: Vec<SelectItem>,
    /// Vectorized selection: one position per dimension for each point.
    points: Option<Vec<Vec<i64>>>,
}

impl Selection {
    /// `start:stop` along each dimension.
    pub(crate) fn of_ranges(ranges: &[(u64, u64)]) -> Self {
        let slice = |&(a, b): &(u64, u64)| SelectItem::Slice(Some(a as i64), Some(b as i64), None);
        Self {
            items: ranges.iter().map(slice).collect(),
            points: None,
        }
    }

    /// `start:stop:step` along each dimension (`stop` exclusive), as a
    /// protocol's hyperslabs give them.
    pub fn of_strided(slices: &[(u64, u64, u64)]) -> Self {
        let slice = |&(a, b, s): &(u64, u64, u64)| SelectItem::Slice(Some(a as i64), Some(b as i64), Some(s as i64));
        Self {
            items: slices.iter().map(slice).collect(),
            points: None,
        }
    }

    /// The positions `dim` selects, as a 1-D selection (of a coordinate).
    pub(crate) fn of_dim(dim: &DimSelection) -> Self {
        let item = match (&dim.list, dim.step) {
            (None, step) if step > 0 && dim.len > 0 => {
                let stop = dim.index(dim.len - 1) + 1;
                SelectItem::Slice(Some(dim.start as i64), Some(stop as i64), Some(step))
            }
            (None, _) if dim.len == 0 => SelectItem::Slice(Some(0), Some(0), None),
            _ => SelectItem::List((0..dim.len).map(|k| dim.index(k) as i64).collect()),
        };
        Self {
            items: vec![item],
            points: None,
        }
    }

    /// Points (NumPy `vindex`): one position per dimension for each.
    pub fn points(points: Vec<Vec<i64>>) -> Self {
        Self {
            items: Vec::new(),
            points: Some(points),
        }
    }

    /// The points, for a vectorized selection.
    pub(crate) fn point_list(&self) -> Option<&[Vec<i64>]> {
        self.points.as_deref()
    }

    /// A selection of one item per dimension, from the start: integers,
    /// `"start:stop:step"` strings, `"..."` or integer lists (the JSON form).
    pub fn from_items(items: Vec<SelectValue>) -> Result<Self> {
        let mut parsed = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            parsed.push(match item {
                SelectValue::Index(i) => SelectItem::Index(i),
                SelectValue::List(list) => SelectItem::List(list),
                SelectValue::Text(text) => {
                    let one = Self::parse(&text).map_err(|e| Error::InvalidRequest(format!("select[{i}]: {e}")))?;
                    match one.items.as_slice() {
                        [item @ (SelectItem::Slice(..) | SelectItem::Ellipsis)] => item.clone(),
                        _ => {
                            return Err(Error::InvalidRequest(format!(
                                "select[{i}] '{text}' is not a slice or '...'"
                            )))
                        }
                    }
                }
            });
        }
        if parsed.iter().filter(|i| **i == SelectItem::Ellipsis).count() > 1 {
            return Err(Error::InvalidRequest("select has more than one '...'".into()));
        }
        Ok(Self {
            items: parsed,
            points: None,
        })
    }

    /// Whether some dimension is picked by an integer (or list) item, or
    /// the items cover dimension `dim` (so `sel` may not pick it).
    pub fn constrains(&self, dim: usize, rank: usize) -> bool {
        match self.items.iter().position(|i| *i == SelectItem::Ellipsis) {
            // Items after the ellipsis count from the end.
            Some(e) => {
                let after = self.items.len() - e - 1;
                let item = if dim < e {
                    Some(&self.items[dim])
                } else if dim >= rank.saturating_sub(after) {
                    self.items.get(e + 1 + dim - (rank - after))
                } else {
                    None
                };
                item.is_some_and(|i| *i != SelectItem::Slice(None, None, None))
            }
            None => self
                .items
                .get(dim)
                .is_some_and(|i| *i != SelectItem::Slice(None, None, None)),
        }
    }

    /// The selection with dimension `dim` (of `rank`) replaced by `item`,
    /// for label selection (`sel`), which picks dimensions `select` leaves
    /// as `:`.
    pub(crate) fn with_dim(&self, dim: usize, rank: usize, item: DimPick) -> Self {
        let mut items = self.expanded(rank);
        items[dim] = match item {
            DimPick::Index(i) => SelectItem::Index(i as i64),
            DimPick::List(list) => SelectItem::List(list.into_iter().map(|i| i as i64).collect()),
            DimPick::Range(start, stop) => SelectItem::Slice(Some(start as i64), Some(stop as i64), None),
        };
        Self { items, points: None }
    }

    /// One item per dimension (ellipsis expanded, missing trailing items `:`).
    fn expanded(&self, rank: usize) -> Vec<SelectItem> {
        let explicit = self.items.iter().filter(|i| **i != SelectItem::Ellipsis).count();
        let mut out = Vec::with_capacity(rank);
        for item in &self.items {
            if *item == SelectItem::Ellipsis {
                for _ in 0..rank.saturating_sub(explicit) {
                    out.push(SelectItem::Slice(None, None, None));
                }
            } else {
                out.push(item.clone());
            }
        }
        out.resize(rank.max(out.len()), SelectItem::Slice(None, None, None));
        out
    }

    /// Parse a `select` expression.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidRequest(format!("invalid select '{text}': {why}"));
        let mut body = text.trim();
        if body.starts_with('[') && closing_bracket(body) == Some(body.len() - 1) {
            body = body[1..body.len() - 1].trim();
        }
        if body.is_empty() {
            return Ok(Self::default());
        }
        let mut items = Vec::new();
        for raw in split_top_level(body).map_err(bad)? {
            let item = raw.trim();
            let parsed = if let Some(inner) = item.strip_prefix('[') {
                let inner = inner
                    .strip_suffix(']')
                    .ok_or_else(|| bad(format!("'{item}' is not a list")))?;
                let list = if inner.trim().is_empty() {
                    Vec::new()
                } else {
                    inner
                        .split(',')
                        .map(|v| {
                            parse_int(v.trim())
                                .ok_or_else(|| bad(format!("'{}' in {item} is not an integer", v.trim())))
                        })
                        .collect::<Result<_>>()?
                };
                SelectItem::List(list)
            } else if item == "..." {
                if items.contains(&SelectItem::Ellipsis) {
                    return Err(bad("more than one '...'".into()));
                }
                SelectItem::Ellipsis
            } else if item.contains(':') {
                let parts: Vec<&str> = item.split(':').collect();
                if parts.len() > 3 {
                    return Err(bad(format!("'{item}' has more than two ':'")));
                }
                let num = |i: usize| -> Result<Option<i64>> {
                    match parts.get(i).map(|s| s.trim()) {
                        None | Some("") => Ok(None),
                        Some(s) => parse_int(s)
                            .map(Some)
                            .ok_or_else(|| bad(format!("'{s}' is not an integer"))),
                    }
                };
                let step = num(2)?;
                if step == Some(0) {
                    return Err(bad("slice step cannot be zero".into()));
                }
                SelectItem::Slice(num(0)?, num(1)?, step)
            } else {
                let i = parse_int(item).ok_or_else(|| bad(format!("'{item}' is not an integer, a slice or '...'")))?;
                SelectItem::Index(i)
            };
            items.push(parsed);
        }
        Ok(Self { items, points: None })
    }

    /// Resolve against `shape`: one [`DimSelection`] per dimension.
    pub fn resolve(&self, shape: &[u64]) -> Result<Vec<DimSelection>> {
        let explicit = self.items.iter().filter(|i| **i != SelectItem::Ellipsis).count();
        if explicit > shape.len() {
            return Err(Error::InvalidRequest(format!(
                "select has {explicit} items but the array has {} dimensions",
                shape.len()
            )));
        }
        self.expanded(shape.len())
            .iter()
            .zip(shape)
            .enumerate()
            .map(|(d, (item, &n))| DimSelection::new(item, n, d))
            .collect()
    }

    /// Resolve the points against `shape`: each point's positions, checked.
    pub(crate) fn resolve_points(&self, shape: &[u64]) -> Result<Vec<Vec<u64>>> {
        let points = self.points.as_deref().unwrap_or(&[]);
        points
            .iter()
            .enumerate()
            .map(|(p, point)| {
                if point.len() != shape.len() {
                    return Err(Error::InvalidRequest(format!(
                        "points[{p}] has {} positions but the array has {} dimensions",
                        point.len(),
                        shape.len()
                    )));
                }
                point
                    .iter()
                    .zip(shape)
                    .enumerate()
                    .map(|(d, (&i, &n))| {
                        normalize(i, n).ok_or_else(|| {
                            Error::InvalidRequest(format!(
                                "points[{p}][{d}] = {i} is out of bounds for dimension {d} with size {n}"
                            ))
                        })
                    })
                    .collect()
            })
            .collect()
    }
}

/// An item of the JSON form of `select`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectValue {
    /// An integer.
    Index(i64),
    /// `"start:stop:step"` or `"..."`.
    Text(String),
    /// An index list.
    List(Vec<i64>),
}

/// A dimension picked by labels: one position (dropped) or several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DimPick {
    /// One position; the dimension is dropped.
    Index(u64),
    /// These positions, in order.
    List(Vec<u64>),
    /// The positions `start..stop`.
    Range(u64, u64),
}

/// `i` counted from the end when negative, if inside `0..n`.
fn normalize(i: i64, n: u64) -> Option<u64> {
    let idx = if i < 0 { i + n as i64 } else { i };
    (0..n as i64).contains(&idx).then_some(idx as u64)
}

/// Where the `[` at the start of `text` closes.
fn closing_bracket(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `text` split at the commas outside brackets; brackets must balance and
/// not nest more than one level.
fn split_top_level(text: &str) -> std::result::Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err("lists cannot nest".into()),
            ']' if depth == 1 => depth = 0,
            ']' => return Err("']' without '['".into()),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("'[' without a closing ']'".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::chunk_grid::Axis;
    use proptest::prelude::*;

    /// Reference: Python semantics by enumeration.
    fn reference(item: &SelectItem, n: i64) -> Option<Vec<i64>> {
        match *item {
            SelectItem::Index(i) => {
                let idx = if i < 0 { i + n } else { i };
                (0..n).contains(&idx).then(|| vec![idx])
            }
            SelectItem::Slice(start, stop, step) => {
                let step = step.unwrap_or(1);
                let norm = |v: i64| if v < 0 { v + n } else { v };
                let mut out = Vec::new();
                if step > 0 {
                    let s = start.map(norm).unwrap_or(0).clamp(0, n);
                    let e = stop.map(norm).unwrap_or(n).clamp(0, n);
                    let mut i = s;
                    while i < e {
                        out.push(i);
                        i += step;
                    }
                } else {
                    let s = start.map(norm).unwrap_or(n - 1).clamp(-1, n - 1);
                    let e = stop.map(norm).unwrap_or(-1).clamp(-1, n - 1);
                    let mut i = s;
                    while i > e {
                        out.push(i);
                        i += step;
                    }
                }
                Some(out)
            }
            SelectItem::Ellipsis | SelectItem::List(_) => None,
        }
    }

    fn item_text(item: &SelectItem) -> String {
        let o = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        match item {
            SelectItem::Index(i) => i.to_string(),
            SelectItem::Slice(a, b, None) => format!("{}:{}", o(*a), o(*b)),
            SelectItem::Slice(a, b, c) => format!("{}:{}:{}", o(*a), o(*b), o(*c)),
            SelectItem::Ellipsis => "...".into(),
            SelectItem::List(l) => format!("[{}]", l.iter().map(i64::to_string).collect::<Vec<_>>().join(",")),
        }
    }

    fn item_strategy() -> impl Strategy<Value = SelectItem> {
        let v = -25i64..25;
        prop_oneof![
            v.clone().prop_map(SelectItem::Index),
            (
                proptest::option::of(v.clone()),
                proptest::option::of(v),
                proptest::option::of(prop_oneof![-7i64..=-1, 1i64..=7])
            )
                .prop_map(|(a, b, c)| SelectItem::Slice(a, b, c)),
        ]
    }

    proptest! {
        #[test]
        fn resolve_matches_reference(n in 0u64..20, item in item_strategy(), chunk in 1u64..7) {
            let sel = Selection::parse(&item_text(&item)).unwrap();
            let expected = reference(&item, n as i64);
            match sel.resolve(&[n]) {
                Err(_) => prop_assert!(expected.is_none()),
                Ok(dims) => {
                    let d = dims[0].clone();
                    let got: Vec<i64> = (0..d.len).map(|k| d.index(k) as i64).collect();
                    prop_assert_eq!(Some(got.clone()), expected);
                    prop_assert_eq!(span_positions(&d, chunk), got);
                }
            }
        }

        #[test]
        fn lists_resolve_and_span_like_numpy(
            n in 1u64..30,
            list in proptest::collection::vec(-30i64..30, 0..12),
            chunk in 1u64..7,
        ) {
            let text = format!("[[{}]]", list.iter().map(i64::to_string).collect::<Vec<_>>().join(","));
            let sel = Selection::parse(&text).unwrap();
            let expected: Option<Vec<i64>> = list
                .iter()
                .map(|&i| { let j = if i < 0 { i + n as i64 } else { i }; (0..n as i64).contains(&j).then_some(j) })
                .collect();
            match sel.resolve(&[n]) {
                Err(_) => prop_assert!(expected.is_none()),
                Ok(dims) => {
                    let d = dims[0].clone();
                    prop_assert_eq!(d.len as usize, list.len());
                    prop_assert_eq!(span_positions(&d, chunk), expected.unwrap());
                }
            }
        }
    }

    /// Every position the chunk spans cover, in output order, each checked
    /// to lie inside its chunk and the spans to tile the output; the same
    /// over irregular chunks (lengths 1, 3, 2, 5 over and over).
    fn span_positions(d: &DimSelection, chunk: u64) -> Vec<i64> {
        let mut starts = vec![0u64];
        while *starts.last().unwrap() < 200 {
            let len = [1, 3, 2, 5][starts.len() % 4];
            starts.push(starts.last().unwrap() + len);
        }
        let irregular = Axis::Edges(starts.clone().into());
        let regular = positions(d, &Axis::Regular(chunk), |c| c * chunk);
        assert_eq!(positions(d, &irregular, |c| starts[c as usize]), regular);
        regular
    }

    fn positions(d: &DimSelection, axis: &Axis, start: impl Fn(u64) -> u64) -> Vec<i64> {
        let mut flat = Vec::new();
        let mut next_out = 0;
        for s in d.chunk_spans(axis, 0..d.len) {
            assert_eq!(s.out_start, next_out);
            assert_ne!(s.step, 0);
            next_out += s.count;
            for k in 0..s.count {
                let within = s.start_in_chunk as i64 + k as i64 * s.step;
                assert!((0..axis.len(s.chunk) as i64).contains(&within));
                flat.push(start(s.chunk) as i64 + within);
            }
        }
        flat
    }

    #[test]
    fn lists_and_wrapping() {
        let shape = [10u64, 20];
        let dims = Selection::parse("[3,1],[0,-1]").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![2, 2]);
        assert_eq!((dims[1].index(0), dims[1].index(1)), (0, 19));
        // Wrapped only when the opening '[' closes at the very end.
        let dims = Selection::parse("[[3,1,3]]").unwrap().resolve(&[5]).unwrap();
        assert_eq!(output_shape(&dims), vec![3]);
        let dims = Selection::parse("[[2], 1:4]").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![1, 3]);
        let dims = Selection::parse("[],...").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![0, 20]);
        for bad in ["[[1,[2]]]", "[[1,x]]", "[1", "[[1]"] {
            assert!(Selection::parse(bad).is_err(), "{bad}");
        }
        let err = Selection::parse("[[0,10]]")
            .unwrap()
            .resolve(&[10])
            .unwrap_err()
            .to_string();
        assert!(err.contains("10") && err.contains("out of bounds"), "{err}");
    }

    #[test]
    fn points_resolve_and_check_bounds() {
        let sel = Selection::points(vec![vec![0, -1], vec![9, 3]]);
        assert_eq!(sel.resolve_points(&[10, 4]).unwrap(), vec![vec![0, 3], vec![9, 3]]);
        let err = Selection::points(vec![vec![10, 0]])
            .resolve_points(&[10, 4])
            .unwrap_err();
        assert!(err.to_string().contains("points[0][0]"), "{err}");
        assert!(Selection::points(vec![vec![1]]).resolve_points(&[10, 4]).is_err());
    }

    #[test]
    fn sel_may_pick_only_free_dimensions() {
        let sel = Selection::parse("1:3,...,0").unwrap();
        assert!(sel.constrains(0, 4) && !sel.constrains(1, 4) && !sel.constrains(2, 4) && sel.constrains(3, 4));
        let sel = Selection::parse(":,2").unwrap();
        assert!(!sel.constrains(0, 3) && sel.constrains(1, 3) && !sel.constrains(2, 3));
    }

    #[test]
    fn parses_the_contract_forms() {
        let shape = [10u64, 20, 30];
        let dims = Selection::parse("[1:5, ::-2]").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![4, 10, 30]);
        let dims = Selection::parse("...,3").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![10, 20]);
        let dims = Selection::parse("-1,...,2:2").unwrap().resolve(&shape).unwrap();
        assert_eq!(output_shape(&dims), vec![20, 0]);
        let dims = Selection::parse("").unwrap().resolve(&[]).unwrap();
        assert!(dims.is_empty());
        assert!(Selection::parse("...").unwrap().resolve(&[]).is_ok());
    }

    #[test]
    fn rejects_malformed() {
        for bad in ["a", "1:2:3:4", "::0", "...,...", "1]", "1.5", "1,,2", "--1", " : x"] {
            assert!(matches!(Selection::parse(bad), Err(Error::InvalidRequest(_))), "{bad}");
        }
        let err = Selection::parse("10").unwrap().resolve(&[10]).unwrap_err().to_string();
        assert!(err.contains("out of bounds"), "{err}");
        assert!(Selection::parse("1,2,3,4").unwrap().resolve(&[5, 5, 5]).is_err());
    }
}
