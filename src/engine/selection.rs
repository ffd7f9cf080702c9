//! NumPy basic indexing: parsing `select` expressions and resolving them
//! against an array shape.
//!
//! Grammar (api.md): comma-separated items, one per dimension: `i`,
//! `start:stop`, `start:stop:step`, `:`, `::step`, negative values counted
//! from the end, at most one `...`; fewer items than dimensions mean the rest
//! are `:`; the whole may be wrapped in `[` `]`. Slices clamp like NumPy; an
//! integer out of range is an error.

use super::error::{Error, Result};

/// One parsed item of a selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SelectItem {
    /// An integer index (drops the dimension).
    Index(i64),
    /// `start:stop:step`, each optional.
    Slice(Option<i64>, Option<i64>, Option<i64>),
    /// `...`
    Ellipsis,
}

/// A parsed `select` expression, not yet bound to a shape.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    items: Vec<SelectItem>,
}

impl Selection {
    /// `start:stop` along each dimension.
    pub(crate) fn of_ranges(ranges: &[(u64, u64)]) -> Self {
        let slice = |&(a, b): &(u64, u64)| SelectItem::Slice(Some(a as i64), Some(b as i64), None);
        Self {
            items: ranges.iter().map(slice).collect(),
        }
    }

    /// Parse a `select` expression.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidRequest(format!("invalid select '{text}': {why}"));
        let mut body = text.trim();
        if let Some(inner) = body.strip_prefix('[') {
            body = inner
                .strip_suffix(']')
                .ok_or_else(|| bad("'[' without a closing ']'".into()))?
                .trim();
        }
        if body.is_empty() {
            return Ok(Self::default());
        }
        let mut items = Vec::new();
        for raw in body.split(',') {
            let item = raw.trim();
            let parsed = if item == "..." {
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
        Ok(Self { items })
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
        let mut out = Vec::with_capacity(shape.len());
        for item in &self.items {
            if *item == SelectItem::Ellipsis {
                for _ in 0..shape.len() - explicit {
                    out.push(SelectItem::Slice(None, None, None));
                }
            } else {
                out.push(item.clone());
            }
        }
        out.resize(shape.len(), SelectItem::Slice(None, None, None));
        out.iter()
            .zip(shape)
            .enumerate()
            .map(|(d, (item, &n))| DimSelection::new(item, n, d))
            .collect()
    }
}

fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The positions selected along one dimension: `len` indices `start + k*step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DimSelection {
    /// First index (meaningless when `len == 0`).
    pub start: u64,
    /// Step between indices; negative walks backwards.
    pub(crate) step: i64,
    /// Number of indices.
    pub len: u64,
    /// Whether an integer index selected it (the dimension is dropped).
    pub dropped: bool,
}

impl DimSelection {
    fn new(item: &SelectItem, n: u64, dim: usize) -> Result<Self> {
        let n_i = n as i64;
        match *item {
            SelectItem::Index(i) => {
                let idx = if i < 0 { i + n_i } else { i };
                if idx < 0 || idx >= n_i {
                    return Err(Error::InvalidRequest(format!(
                        "index {i} is out of bounds for dimension {dim} with size {n}"
                    )));
                }
                Ok(Self {
                    start: idx as u64,
                    step: 1,
                    len: 1,
                    dropped: true,
                })
            }
            SelectItem::Slice(start, stop, step) => {
                let step = step.unwrap_or(1);
                // Python's slice.indices().
                let (lower, upper) = if step < 0 { (-1, n_i - 1) } else { (0, n_i) };
                let clamp = |v: Option<i64>, default: i64| match v {
                    None => default,
                    Some(v) if v < 0 => (v.saturating_add(n_i)).max(lower),
                    Some(v) => v.min(upper),
                };
                let start = clamp(start, if step < 0 { upper } else { lower });
                let stop = clamp(stop, if step < 0 { lower } else { upper });
                let len = if step > 0 {
                    if stop > start {
                        (stop - start - 1) / step + 1
                    } else {
                        0
                    }
                } else if start > stop {
                    (start - stop - 1) / (-step) + 1
                } else {
                    0
                };
                Ok(Self {
                    start: if len == 0 { 0 } else { start as u64 },
                    step,
                    len: len as u64,
                    dropped: false,
                })
            }
            SelectItem::Ellipsis => unreachable!("expanded by resolve"),
        }
    }

    /// The `k`-th selected index.
    pub fn index(&self, k: u64) -> u64 {
        (self.start as i64 + k as i64 * self.step) as u64
    }
}

/// The shape of the result: selected lengths of the dimensions not dropped.
pub(super) fn output_shape(dims: &[DimSelection]) -> Vec<u64> {
    dims.iter().filter(|d| !d.dropped).map(|d| d.len).collect()
}

/// A contiguous run of output positions that fall in one chunk along one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkSpan {
    /// The chunk's index along the dimension.
    pub chunk: u64,
    /// First index within the chunk.
    pub(crate) start_in_chunk: u64,
    /// First output position.
    pub(crate) out_start: u64,
    /// Number of positions.
    pub count: u64,
}

impl DimSelection {
    /// Split the positions `out_range` of this selection by chunks of `chunk_len`.
    pub(crate) fn chunk_spans(&self, chunk_len: u64, out_range: std::ops::Range<u64>) -> Vec<ChunkSpan> {
        let mut spans = Vec::new();
        let mut k = out_range.start;
        while k < out_range.end {
            let idx = self.index(k);
            let chunk = idx / chunk_len;
            let within = idx % chunk_len;
            // How many further positions stay in this chunk.
            let room = if self.step > 0 {
                (chunk_len - 1 - within) / self.step as u64 + 1
            } else {
                within / self.step.unsigned_abs() + 1
            };
            let count = room.min(out_range.end - k);
            spans.push(ChunkSpan {
                chunk,
                start_in_chunk: within,
                out_start: k,
                count,
            });
            k += count;
        }
        spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            SelectItem::Ellipsis => None,
        }
    }

    fn item_text(item: &SelectItem) -> String {
        let o = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        match item {
            SelectItem::Index(i) => i.to_string(),
            SelectItem::Slice(a, b, None) => format!("{}:{}", o(*a), o(*b)),
            SelectItem::Slice(a, b, c) => format!("{}:{}:{}", o(*a), o(*b), o(*c)),
            SelectItem::Ellipsis => "...".into(),
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
                    let d = dims[0];
                    let got: Vec<i64> = (0..d.len).map(|k| d.index(k) as i64).collect();
                    prop_assert_eq!(Some(got.clone()), expected);
                    // Chunk spans cover every position once, in order, inside their chunk.
                    let mut flat = Vec::new();
                    for s in d.chunk_spans(chunk, 0..d.len) {
                        for k in 0..s.count {
                            let within = s.start_in_chunk as i64 + k as i64 * d.step;
                            prop_assert!((0..chunk as i64).contains(&within));
                            flat.push((s.chunk * chunk) as i64 + within);
                        }
                    }
                    prop_assert_eq!(flat, got);
                }
            }
        }
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
        for bad in ["a", "1:2:3:4", "::0", "...,...", "[1", "1.5", "1,,2", "--1", " : x"] {
            assert!(matches!(Selection::parse(bad), Err(Error::InvalidRequest(_))), "{bad}");
        }
        let err = Selection::parse("10").unwrap().resolve(&[10]).unwrap_err().to_string();
        assert!(err.contains("out of bounds"), "{err}");
        assert!(Selection::parse("1,2,3,4").unwrap().resolve(&[5, 5, 5]).is_err());
    }
}
