//! DAP2 constraint expressions (projections only) and what they pick: the
//! variables and components of a response with the positions of each.
//!
//! `a,b`, `a[start:stride:stop]` (stop inclusive), `a[i]`,
//! `a[start:stop]`, `grid.array`, `grid.map`; a hyperslab on a `Grid`
//! applies to its array and maps. Trailing dimensions without a hyperslab
//! are whole. Selection clauses (`&...`) and functions are refused.

use super::model::{DapDataset, Variable};

pub(super) use crate::http::opendap::Slice;

/// One array a response carries: a variable (or a grid's component, the
/// array or a map, which are variables too) with its positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Leaf {
    /// The variable read.
    pub var: usize,
    pub slices: Vec<Slice>,
}

/// One top-level member of a response, in the dataset's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Member {
    /// A scalar or an `Array`.
    Plain(Leaf),
    /// A whole `Grid` (its array, then its maps).
    Grid { var: usize, leaves: Vec<Leaf> },
    /// Some of a grid's components, as libdap answers them.
    Structure { var: usize, leaves: Vec<Leaf> },
}

impl Member {
    /// The arrays it carries, in the order their data is sent.
    pub(super) fn leaves(&self) -> &[Leaf] {
        match self {
            Member::Plain(leaf) => std::slice::from_ref(leaf),
            Member::Grid { leaves, .. } | Member::Structure { leaves, .. } => leaves,
        }
    }
}

/// What a constraint expression picks, in the dataset's order.
#[derive(Debug)]
pub(super) struct Projection {
    pub members: Vec<Member>,
}

impl Projection {
    /// The members `query` (the URL's query string, percent-encoded)
    /// picks from `dataset`; an empty expression picks everything.
    pub(super) fn parse(query: Option<&str>, dataset: &DapDataset) -> Result<Self, String> {
        let text = percent_encoding::percent_decode_str(query.unwrap_or(""))
            .decode_utf8()
            .map_err(|_| "the constraint expression is not UTF-8 once percent-decoded".to_string())?;
        let mut clauses = text.split('&');
        let projection = clauses.next().unwrap_or("").trim();
        if let Some(clause) = clauses.find(|c| !c.trim().is_empty()) {
            return Err(format!(
                "selection clauses are not supported ('&{clause}'): this server answers projections only"
            ));
        }
        // Per variable: the positions of each component (0 the array, k map k-1).
        let mut picked: Vec<Vec<Option<Vec<Slice>>>> =
            dataset.variables.iter().map(|v| vec![None; 1 + v.maps.len()]).collect();
        if projection.is_empty() {
            for (i, var) in dataset.variables.iter().enumerate() {
                pick_whole(dataset, i, &whole(var), &mut picked[i])?;
            }
        }
        for item in split_outside_brackets(projection, ',')?
            .into_iter()
            .filter(|s| !s.is_empty())
        {
            let (i, component, slices) = resolve(item, dataset)?;
            match component {
                None => pick_whole(dataset, i, &slices, &mut picked[i])?,
                Some(c) => pick(&mut picked[i][c], slices, item)?,
            }
        }
        let members = picked
            .into_iter()
            .enumerate()
            .filter_map(|(i, components)| member(dataset, i, components))
            .collect();
        Ok(Self { members })
    }

    /// The projection as text, equal for equal projections (for ETags).
    pub(super) fn key(&self, dataset: &DapDataset) -> String {
        let mut out = String::new();
        for member in &self.members {
            let kind = match member {
                Member::Plain(_) => "p",
                Member::Grid { .. } => "g",
                Member::Structure { .. } => "s",
            };
            out.push_str(kind);
            for leaf in member.leaves() {
                out.push_str(&dataset.variables[leaf.var].path);
                out.extend(leaf.slices.iter().map(Slice::text));
                out.push(';');
            }
        }
        out
    }
}

/// Every position of every dimension of `var`.
fn whole(var: &Variable) -> Vec<Slice> {
    var.dims.iter().map(|(_, len)| Slice::whole(*len)).collect()
}

/// Pick a variable as a whole: for a grid, its array and each map along
/// the array's positions.
fn pick_whole(
    dataset: &DapDataset,
    i: usize,
    slices: &[Slice],
    components: &mut [Option<Vec<Slice>>],
) -> Result<(), String> {
    let var = &dataset.variables[i];
    pick(&mut components[0], slices.to_vec(), &var.name)?;
    for (k, slice) in slices.iter().enumerate().take(var.maps.len()) {
        pick(&mut components[1 + k], vec![*slice], &var.name)?;
    }
    Ok(())
}

/// Record one component's positions; the same component twice must pick
/// the same positions.
fn pick(slot: &mut Option<Vec<Slice>>, slices: Vec<Slice>, item: &str) -> Result<(), String> {
    match slot {
        Some(existing) if *existing != slices => Err(format!("'{item}' is projected twice with different hyperslabs")),
        _ => {
            *slot = Some(slices);
            Ok(())
        }
    }
}

/// The member a variable's picked components make, if any: a whole grid
/// when the array and every map are picked along the same positions,
/// else a structure of the picked ones.
fn member(dataset: &DapDataset, i: usize, components: Vec<Option<Vec<Slice>>>) -> Option<Member> {
    let var = &dataset.variables[i];
    if !var.is_grid() {
        let slices = components.into_iter().next().flatten()?;
        return Some(Member::Plain(Leaf { var: i, slices }));
    }
    let is_grid = match &components[0] {
        Some(array) => components[1..]
            .iter()
            .enumerate()
            .all(|(k, map)| map.as_deref() == Some(&array[k..k + 1])),
        None => false,
    };
    let mut leaves = Vec::new();
    for (c, slices) in components.into_iter().enumerate() {
        if let Some(slices) = slices {
            let var = if c == 0 { i } else { var.maps[c - 1] };
            leaves.push(Leaf { var, slices });
        }
    }
    match (leaves.is_empty(), is_grid) {
        (true, _) => None,
        (false, true) => Some(Member::Grid { var: i, leaves }),
        (false, false) => Some(Member::Structure { var: i, leaves }),
    }
}

/// One projected item: the variable, the grid component (0 the array, k
/// map k-1) when one is named, and the positions.
fn resolve(item: &str, dataset: &DapDataset) -> Result<(usize, Option<usize>, Vec<Slice>), String> {
    if item.contains('(') {
        return Err(format!("functions are not supported ('{item}')"));
    }
    let unknown = |name: &str| {
        format!(
            "'{name}' is not a variable of this dataset (its variables: {})",
            dataset
                .variables
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    // The whole item first: a name may hold a `.` (the DDS escapes it as
    // `%2E`; a client may send it either way).
    let (whole_name, hyperslabs) = component(item)?;
    if let Some(i) = dataset.index_of(&unescape(whole_name)) {
        let slices = slices_of(&dataset.variables[i], &hyperslabs, item)?;
        return Ok((i, None, slices));
    }
    match split_outside_brackets(item, '.')?.as_slice() {
        [_] => Err(unknown(&unescape(whole_name))),
        [grid, part] => {
            let (grid_name, on_grid) = component(grid)?;
            let (name, hyperslabs) = component(part)?;
            let (grid_name, name) = (unescape(grid_name), unescape(name));
            if !on_grid.is_empty() {
                return Err(format!(
                    "'{item}': give the hyperslab on the component ('{grid_name}.{name}[...]')"
                ));
            }
            let g = dataset.index_of(&grid_name).ok_or_else(|| unknown(&grid_name))?;
            let var = &dataset.variables[g];
            let c = match name == var.name {
                true => Some(0),
                false => var
                    .maps
                    .iter()
                    .position(|&m| dataset.variables[m].name == name)
                    .map(|k| k + 1),
            };
            let c = c
                .filter(|_| var.is_grid())
                .ok_or_else(|| format!("'{item}': '{grid_name}' is not a Grid with a component '{name}'"))?;
            let target = if c == 0 {
                var
            } else {
                &dataset.variables[var.maps[c - 1]]
            };
            let slices = slices_of(target, &hyperslabs, item)?;
            Ok((g, Some(c), slices))
        }
        _ => Err(format!("'{item}' names no variable or grid component")),
    }
}

/// A name as a constraint gives it, its DAP escapes (`%2E`) undone.
fn unescape(name: &str) -> String {
    percent_encoding::percent_decode_str(name)
        .decode_utf8_lossy()
        .into_owned()
}

/// A component's name and its hyperslabs' texts.
fn component(text: &str) -> Result<(&str, Vec<&str>), String> {
    let (name, mut rest) = text.split_at(text.find('[').unwrap_or(text.len()));
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("'{text}' has no variable name"));
    }
    let mut hyperslabs = Vec::new();
    while !rest.is_empty() {
        let close = rest
            .find(']')
            .filter(|_| rest.starts_with('['))
            .ok_or_else(|| format!("'{text}': a hyperslab is [start], [start:stop] or [start:stride:stop]"))?;
        hyperslabs.push(&rest[1..close]);
        rest = &rest[close + 1..];
    }
    Ok((name, hyperslabs))
}

/// The positions `hyperslabs` pick along the dimensions of `var`: 400
/// when one is malformed or out of range.
fn slices_of(var: &Variable, hyperslabs: &[&str], item: &str) -> Result<Vec<Slice>, String> {
    if hyperslabs.len() > var.dims.len() {
        return Err(format!(
            "'{item}' has {} hyperslabs; '{}' has {} dimensions",
            hyperslabs.len(),
            var.name,
            var.dims.len()
        ));
    }
    let mut slices = whole(var);
    for (d, text) in hyperslabs.iter().enumerate() {
        let (dim, len) = &var.dims[d];
        let numbers: Option<Vec<u64>> = text.split(':').map(|n| n.trim().parse().ok()).collect();
        let bad = |why: &str| format!("'{item}': hyperslab [{text}] on dimension '{dim}' (length {len}): {why}");
        let (start, stride, stop) = match numbers.as_deref() {
            Some([i]) => (*i, 1, *i),
            Some([a, b]) => (*a, 1, *b),
            Some([a, s, b]) => (*a, *s, *b),
            _ => {
                return Err(bad(
                    "expected [start], [start:stop] or [start:stride:stop] of whole numbers",
                ))
            }
        };
        if stride == 0 {
            return Err(bad("the stride must be at least 1"));
        }
        if start > stop {
            return Err(bad("start is after stop"));
        }
        if stop >= *len {
            return Err(bad("out of range (stop is inclusive)"));
        }
        slices[d] = Slice {
            start,
            stride,
            count: (stop - start) / stride + 1,
        };
    }
    Ok(slices)
}

/// `text` split at `separator` outside brackets.
fn split_outside_brackets(text: &str, separator: char) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            c if c == separator && depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in '{text}'"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced brackets in '{text}'"));
    }
    parts.push(text[start..].trim());
    Ok(parts)
}

/// A float32 variable `name` of dimensions `dims` and grid maps `maps`.
fn float_variable(name: &str, dims: &[(&str, u64)], maps: Vec<usize>) -> Variable {
    Variable {
        name: name.into(),
        path: name.into(),
        data_type: crate::engine::DataType::Float32,
        dap: crate::encode::xdr::DapType::Float32,
        dims: dims.iter().map(|(n, l)| (n.to_string(), *l)).collect(),
        maps,
        attributes: serde_json::Value::Null,
        v2_fill: serde_json::Value::Null,
        node: std::sync::Arc::new(crate::engine::Node::new(name, None, None)),
    }
}

/// lat[3], lon[4], t[lat][lon] a grid, s a scalar: what the fuzz property
/// and the tests parse against.
fn small_dataset() -> DapDataset {
    DapDataset {
        name: "d".into(),
        variables: vec![
            float_variable("lat", &[("lat", 3)], vec![]),
            float_variable("lon", &[("lon", 4)], vec![]),
            float_variable("s", &[], vec![]),
            float_variable("t", &[("lat", 3), ("lon", 4)], vec![0, 1]),
        ],
        attributes: serde_json::Value::Null,
    }
}

/// The fuzz property of [`Projection::parse`] (`fuzz/`, and the committed
/// corpus in the tests): on [`small_dataset`], any query picks known
/// variables and positions inside each dimension, or is an error.
pub(crate) fn check_projection(query: &str) {
    let dataset = small_dataset();
    let Ok(projection) = Projection::parse(Some(query), &dataset) else {
        return;
    };
    for leaf in projection.members.iter().flat_map(Member::leaves) {
        let var = &dataset.variables[leaf.var];
        assert_eq!(leaf.slices.len(), var.dims.len(), "{query:?}");
        for (slice, (_, len)) in leaf.slices.iter().zip(&var.dims) {
            assert!(slice.stride > 0, "{query:?}");
            let (_, stop, _) = slice.strided();
            assert!(slice.count == 0 || stop <= *len, "{query:?}: {slice:?} of {len}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset() -> DapDataset {
        small_dataset()
    }

    fn parse(ce: &str) -> Result<Projection, String> {
        Projection::parse(Some(ce), &dataset())
    }

    #[test]
    fn empty_expression_picks_everything_in_order() {
        let p = Projection::parse(None, &dataset()).unwrap();
        assert_eq!(p.members.len(), 4);
        assert!(matches!(&p.members[3], Member::Grid { leaves, .. } if leaves.len() == 3));
    }

    #[test]
    fn hyperslabs_are_inclusive_and_apply_to_maps() {
        let p = parse("t[0:1:2][1:2:3]").unwrap();
        let Member::Grid { leaves, .. } = &p.members[0] else {
            panic!()
        };
        assert_eq!(
            leaves[0].slices[0],
            Slice {
                start: 0,
                stride: 1,
                count: 3
            }
        );
        assert_eq!(
            leaves[0].slices[1],
            Slice {
                start: 1,
                stride: 2,
                count: 2
            }
        );
        assert_eq!(
            leaves[2].slices,
            vec![Slice {
                start: 1,
                stride: 2,
                count: 2
            }]
        );
        assert_eq!(leaves[0].slices[1].strided(), (1, 4, 2));
    }

    #[test]
    fn components_make_a_structure_in_grid_order() {
        let p = parse("t.lon[1],t.t[0][0:3]").unwrap();
        let Member::Structure { leaves, .. } = &p.members[0] else {
            panic!()
        };
        assert_eq!((leaves[0].var, leaves[1].var), (3, 1));
        assert_eq!(
            leaves[1].slices,
            vec![Slice {
                start: 1,
                stride: 1,
                count: 1
            }]
        );
        // every component, consistently: a grid again
        let p = parse("t.t[1][2],t.lat[1],t.lon[2]").unwrap();
        assert!(matches!(p.members[0], Member::Grid { .. }));
    }

    #[test]
    fn percent_encoded_and_several_variables() {
        let p = parse("lat%5B0:1%5D,%20lon,s").unwrap();
        assert_eq!(p.members.len(), 3);
        assert_eq!(p.members[0].leaves()[0].slices[0].count, 2);
    }

    #[test]
    fn refusals() {
        for bad in [
            "t[0:3]",
            "t[2:1]",
            "t[0:0:1]",
            "x",
            "t.x",
            "lat.lat",
            "t[0].t",
            "t[0][0][0]",
            "s[0]",
            "t&t>1",
            "mean(t)",
            "t[0",
            "t[a]",
            "t,t[1]",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
        assert!(parse("t&").is_ok());
    }
}
