//! DAP4 constraint expressions (`dap4.ce`, the DAP4 specification volume
//! 1, section 8): projections and hyperslabs only.
//!
//! Clauses separated by `;`: a variable `/g/v` (a name without the leading
//! `/` is the dataset's), with a hyperslab per dimension or none,
//! `[i]`, `[start:stop]`, `[start:stride:stop]` (stop inclusive),
//! `[start:]`, `[start:stride:]` or `[]` (the whole dimension); and
//! shared dimension constraints `/g/d=[start:stride:stop]`, which apply to
//! every projected variable's dimension `d` without its own hyperslab. No
//! variable clause projects every variable. Functions, filters and
//! structure projections are refused.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::model::Dap4Dataset;

pub(super) use crate::http::opendap::Slice;

/// One projected variable and its positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pick {
    pub var: usize,
    pub slices: Vec<Slice>,
    /// Every dimension picked as the response declares it (whole, or as
    /// its shared dimension constraint): the variable keeps its shared
    /// dimensions; else its dimensions are anonymous.
    pub shared: bool,
}

/// What a constraint picks, in the dataset's order.
#[derive(Debug)]
pub(super) struct Projection {
    pub picks: Vec<Pick>,
    /// Shared dimension constraints: (group, dimension) to its slice.
    pub dims: HashMap<(usize, usize), Slice>,
    /// No clause named a variable: everything, every group shown.
    pub all: bool,
}

impl Projection {
    /// What `ce` (percent-decoded) picks from `dataset`.
    pub(super) fn parse(ce: &str, dataset: &Dap4Dataset) -> Result<Self, String> {
        let mut dims = HashMap::new();
        let mut named: Vec<(usize, Option<Vec<Option<Slice>>>)> = Vec::new();
        for clause in split_clauses(ce)?.into_iter().filter(|c| !c.is_empty()) {
            if clause.contains(['|', '(', '{']) {
                return Err(format!(
                    "'{clause}': functions, filters and structure projections are not supported; this server answers projections and hyperslabs"
                ));
            }
            match clause.split_once('=') {
                Some((name, slice)) => {
                    let fqn = qualified(name.trim());
                    let (g, d) = dataset
                        .dimension(&fqn)
                        .ok_or_else(|| format!("'{fqn}' is not a shared dimension of the dataset"))?;
                    let size = dataset.groups[g].dims[d].size;
                    let slices = hyperslabs(slice.trim(), &[size])?;
                    let slice = slices
                        .first()
                        .copied()
                        .flatten()
                        .filter(|_| slices.len() == 1)
                        .ok_or_else(|| format!("'{clause}': a dimension constraint is one hyperslab"))?;
                    dims.insert((g, d), slice);
                }
                None => {
                    let (name, rest) = clause.split_at(clause.find('[').unwrap_or(clause.len()));
                    let fqn = qualified(name.trim());
                    let var = dataset
                        .variable(&fqn)
                        .ok_or_else(|| format!("'{fqn}' is not a variable of the dataset"))?;
                    let sizes: Vec<u64> = dataset.dims_of(var).map(|(_, _, size)| size).collect();
                    let slices = match rest.trim() {
                        "" => None,
                        rest => Some(hyperslabs(rest, &sizes).map_err(|e| format!("'{fqn}': {e}"))?),
                    };
                    if named.iter().any(|(v, _)| *v == var) {
                        return Err(format!("'{fqn}' is projected twice; name each variable once"));
                    }
                    named.push((var, slices));
                }
            }
        }
        let all = named.is_empty();
        if all {
            named = (0..dataset.variables.len()).map(|v| (v, None)).collect();
        }
        named.sort_by_key(|(v, _)| *v);
        let picks = named
            .into_iter()
            .map(|(var, slices)| pick(dataset, &dims, var, slices))
            .collect();
        Ok(Self { picks, dims, all })
    }

    /// The projection as text, equal for equal projections (for ETags).
    pub(super) fn key(&self, dataset: &Dap4Dataset) -> String {
        let mut out = String::new();
        for pick in &self.picks {
            out.push_str(&dataset.variable_fqn(pick.var));
            out.extend(pick.slices.iter().map(Slice::text));
            out.push(if pick.shared { ';' } else { ',' });
        }
        let mut dims: Vec<_> = self.dims.iter().collect();
        dims.sort_by_key(|(at, _)| **at);
        for ((g, d), slice) in dims {
            let _ = write!(out, "{g}.{d}={};", slice.text());
        }
        out
    }

    /// The size of a shared dimension in the response.
    pub(super) fn dim_size(&self, dataset: &Dap4Dataset, group: usize, dim: usize) -> u64 {
        match self.dims.get(&(group, dim)) {
            Some(slice) => slice.count,
            None => dataset.groups[group].dims[dim].size,
        }
    }

    /// Whether `var` is projected with its shared dimensions.
    pub(super) fn shared(&self, var: usize) -> bool {
        self.picks.iter().any(|p| p.var == var && p.shared)
    }
}

/// The pick of `var`: its own hyperslabs, else each dimension's
/// constraint, else whole.
fn pick(
    dataset: &Dap4Dataset,
    dims: &HashMap<(usize, usize), Slice>,
    var: usize,
    own: Option<Vec<Option<Slice>>>,
) -> Pick {
    let mut shared = true;
    let slices = dataset
        .dims_of(var)
        .enumerate()
        .map(|(i, (g, d, size))| {
            let declared = dims.get(&(g, d)).copied().unwrap_or(Slice::whole(size));
            match own.as_ref().and_then(|own| own[i]) {
                Some(slice) => {
                    shared &= slice == declared;
                    slice
                }
                None => declared,
            }
        })
        .collect();
    Pick { var, slices, shared }
}

/// A name as a fully qualified one: a leading `/` added when missing.
fn qualified(name: &str) -> String {
    match name.starts_with('/') {
        true => name.to_string(),
        false => format!("/{name}"),
    }
}

/// The clauses of `ce`: split at `;` outside brackets.
fn split_clauses(ce: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in ce.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ';' if depth == 0 => {
                out.push(ce[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in the constraint '{ce}'"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced brackets in the constraint '{ce}'"));
    }
    out.push(ce[start..].trim());
    Ok(out)
}

/// `[..][..]...`, one per dimension of `sizes`; `[]` (whole, or the shared
/// dimension's constraint) is `None`.
fn hyperslabs(text: &str, sizes: &[u64]) -> Result<Vec<Option<Slice>>, String> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let body = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .ok_or_else(|| format!("'{text}' is not a list of hyperslabs [start:stride:stop]"))?;
        let size = *sizes.get(out.len()).ok_or_else(|| {
            format!(
                "{} hyperslabs for {} dimensions",
                text.matches('[').count(),
                sizes.len()
            )
        })?;
        out.push(slice(body.0.trim(), size)?);
        rest = body.1.trim_start();
    }
    if out.len() != sizes.len() {
        return Err(format!("{} hyperslabs for {} dimensions", out.len(), sizes.len()));
    }
    Ok(out)
}

/// One hyperslab's body against a dimension of `size`.
fn slice(body: &str, size: u64) -> Result<Option<Slice>, String> {
    if body.is_empty() {
        return Ok(None);
    }
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("'{s}' in [{body}] is not an index (a non-negative integer)"))
    };
    let parts: Vec<&str> = body.split(':').collect();
    let last = size.checked_sub(1);
    let (start, stride, stop) = match parts.as_slice() {
        [i] => (number(i)?, 1, Some(number(i)?)),
        [a, b] => (
            number(a)?,
            1,
            (!b.trim().is_empty()).then(|| number(b)).transpose()?.or(last),
        ),
        [a, s, b] => (
            number(a)?,
            number(s)?,
            (!b.trim().is_empty()).then(|| number(b)).transpose()?.or(last),
        ),
        _ => return Err(format!("[{body}] is not a hyperslab [start:stride:stop]")),
    };
    if size == 0 {
        // Nothing to pick: what a client asks of an empty dimension (pydap
        // asks [0:1:2^63-2]) picks nothing, from 0.
        return match start {
            0 => Ok(Some(Slice {
                start: 0,
                stride: stride.max(1),
                count: 0,
            })),
            _ => Err(format!("[{body}] is outside a dimension of size 0")),
        };
    }
    let Some(stop) = stop else {
        return Err(format!("[{body}] is outside a dimension of size 0"));
    };
    if stride == 0 {
        return Err(format!("[{body}]: the stride must be at least 1"));
    }
    if start > stop || stop >= size {
        return Err(format!(
            "[{body}] is outside the dimension (size {size}): 0 <= start <= stop < size"
        ));
    }
    Ok(Some(Slice {
        start,
        stride,
        count: (stop - start) / stride + 1,
    }))
}

/// The groups and variables the fuzz property parses against: the root's
/// `lat[3]`, `lon[4]`, `t[lat][lon]` (mapped), `e[none]` of an empty
/// dimension, a scalar `s`; group `g`'s `x[x]`.
fn small_dataset() -> Dap4Dataset {
    use super::model::{Dimension, Group, Variable};
    let dim = |name: &str, size| Dimension {
        name: name.into(),
        size,
    };
    let var = |name: &str, group, dims: Vec<usize>, maps: Vec<usize>| Variable {
        name: name.into(),
        group,
        data_type: crate::engine::DataType::Float32,
        dap: crate::encode::dap4::Dap4Type::Float32,
        dims,
        maps,
        attributes: serde_json::Value::Null,
        v2_fill: serde_json::Value::Null,
        node: std::sync::Arc::new(crate::engine::Node::new(name, None, None)),
    };
    let group = |name: &str, fqn: &str, dims, variables, groups| Group {
        name: name.into(),
        fqn: fqn.into(),
        dims,
        variables,
        groups,
        attributes: serde_json::Value::Null,
    };
    Dap4Dataset {
        name: "d".into(),
        groups: vec![
            group(
                "",
                "/",
                vec![dim("lat", 3), dim("lon", 4), dim("none", 0)],
                vec![0, 1, 2, 3, 4],
                vec![1],
            ),
            group("g", "/g", vec![dim("x", 5)], vec![5], vec![]),
        ],
        variables: vec![
            var("lat", 0, vec![0], vec![]),
            var("lon", 0, vec![1], vec![]),
            var("t", 0, vec![0, 1], vec![0, 1]),
            var("e", 0, vec![2], vec![]),
            var("s", 0, vec![], vec![]),
            var("x", 1, vec![0], vec![]),
        ],
    }
}

/// The fuzz property of [`Projection::parse`] (`fuzz/`, and the committed
/// corpus in the tests): on [`small_dataset`], any `dap4.ce` picks known
/// variables once each, in the dataset's order, at positions inside each
/// dimension (shared dimension constraints too), and its DMR is written;
/// or it is an error.
pub(crate) fn check_dap4_constraint(ce: &str) {
    let dataset = small_dataset();
    let Ok(projection) = Projection::parse(ce, &dataset) else {
        return;
    };
    let inside = |slice: &Slice, size: u64| {
        let (_, stop, _) = slice.strided();
        slice.stride > 0 && (slice.count == 0 || stop <= size)
    };
    let mut last = None;
    for pick in &projection.picks {
        assert!(last < Some(pick.var), "{ce:?}: order or twice");
        last = Some(pick.var);
        let sizes: Vec<u64> = dataset.dims_of(pick.var).map(|(_, _, size)| size).collect();
        assert_eq!(pick.slices.len(), sizes.len(), "{ce:?}");
        for (slice, size) in pick.slices.iter().zip(sizes) {
            assert!(inside(slice, size), "{ce:?}: {slice:?} of {size}");
        }
    }
    for (&(g, d), slice) in &projection.dims {
        assert!(inside(slice, dataset.groups[g].dims[d].size), "{ce:?}: {slice:?}");
    }
    let dmr = super::dmr::dmr(&dataset, &projection);
    assert!(dmr.starts_with("<?xml") && dmr.ends_with("</Dataset>"), "{ce:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperslabs_are_inclusive_and_checked() {
        let s = |b: &str| slice(b, 10);
        assert_eq!(
            s("2:3:8"),
            Ok(Some(Slice {
                start: 2,
                stride: 3,
                count: 3
            }))
        );
        assert_eq!(
            s("4"),
            Ok(Some(Slice {
                start: 4,
                stride: 1,
                count: 1
            }))
        );
        assert_eq!(
            s("4:"),
            Ok(Some(Slice {
                start: 4,
                stride: 1,
                count: 6
            }))
        );
        assert_eq!(
            s("1:2:"),
            Ok(Some(Slice {
                start: 1,
                stride: 2,
                count: 5
            }))
        );
        assert_eq!(s(""), Ok(None));
        assert!(s("3:10").is_err());
        assert!(s("5:2").is_err());
        assert!(s("0:0:4").is_err());
        assert!(s("-1").is_err());
        assert!(s("a:b").is_err());
        let empty = slice("0:1:9223372036854775806", 0);
        assert_eq!(
            empty,
            Ok(Some(Slice {
                start: 0,
                stride: 1,
                count: 0
            }))
        );
        assert!(slice("1", 0).is_err());
        assert!(hyperslabs("[0][1]", &[3]).is_err());
        assert!(hyperslabs("[0]", &[3, 4]).is_err());
        assert_eq!(hyperslabs("[0] [1:2]", &[3, 4]).unwrap().len(), 2);
    }

    #[test]
    fn the_fuzz_property_holds_on_what_clients_send() {
        for ce in [
            "",
            "/t[0:1:2][0:2:3]",
            "/lat=[1:2];/t;/lat",
            "t[][];/g/x[4]",
            "/e[0:1:9223372036854775806]",
            "/s",
        ] {
            check_dap4_constraint(ce);
            assert!(Projection::parse(ce, &small_dataset()).is_ok(), "{ce}");
        }
        let p = Projection::parse("/lat=[1:2];/t;/lat", &small_dataset()).unwrap();
        assert!(p.picks.iter().all(|pick| pick.shared) && p.picks.len() == 2);
        for ce in [
            "/t[0]",
            "/nosuch",
            "/t[3][0]",
            "/lat;/lat",
            "max(/t)",
            "/t|t>1",
            "/lat=[0];x",
        ] {
            check_dap4_constraint(ce);
            assert!(Projection::parse(ce, &small_dataset()).is_err(), "{ce}");
        }
    }

    #[test]
    fn clauses_split_outside_brackets_only() {
        assert_eq!(split_clauses("/a[0:1];b;/g/c").unwrap(), ["/a[0:1]", "b", "/g/c"]);
        assert!(split_clauses("/a[0;1").is_err());
        assert!(split_clauses("/a]0[").is_err());
    }
}
