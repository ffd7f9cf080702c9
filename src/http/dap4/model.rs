//! The DAP4 dataset of a group (contract 4.5): the hierarchy below it as
//! DAP4 `Group`s, each with its shared dimensions and its variables (the
//! readable arrays of DAP4 types), a variable's `Map`s the coordinates of
//! its dimensions.

use std::sync::Arc;

use serde_json::Value;

use crate::encode::dap4::Dap4Type;
use crate::engine::{DataType, Dataset, Error, Node};

/// One variable: an array of a group.
#[derive(Debug, Clone)]
pub(in crate::http) struct Variable {
    /// The array's name.
    pub name: String,
    /// Its group's index in [`Dap4Dataset::groups`].
    pub group: usize,
    pub data_type: DataType,
    pub dap: Dap4Type,
    /// Each dimension: its index in the group's dimensions.
    pub dims: Vec<usize>,
    /// The variable index of each dimension's coordinate, when all have one.
    pub maps: Vec<usize>,
    /// Its stored attributes.
    pub attributes: Value,
    /// A Zarr v2 array's `fill_value` (null otherwise).
    pub v2_fill: Value,
    /// The node it was made from: reads are planned on it, so what is sent
    /// always matches what the DMR says.
    pub node: Arc<Node>,
}

/// A shared dimension of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::http) struct Dimension {
    pub name: String,
    pub size: u64,
}

/// One group: its dimensions, variables and subgroups.
#[derive(Debug)]
pub(in crate::http) struct Group {
    pub name: String,
    /// Its fully qualified name: `/` for the dataset's, else `/a/b`.
    pub fqn: String,
    pub dims: Vec<Dimension>,
    /// Its variables' indices, in name order.
    pub variables: Vec<usize>,
    /// Its subgroups' indices, in name order.
    pub groups: Vec<usize>,
    pub attributes: Value,
}

impl Group {
    /// A member's fully qualified name. Names are joined as they are: no
    /// Structures are served, so a `.` is never a field separator, and pydap
    /// matches names without unescaping them (a Zarr name has no `/`; a
    /// dimension's `/` is made `_`).
    pub(super) fn member_fqn(&self, name: &str) -> String {
        match self.fqn.as_str() {
            "/" => format!("/{name}"),
            fqn => format!("{fqn}/{name}"),
        }
    }
}

/// The DAP4 dataset of one group and everything below it.
#[derive(Debug)]
pub(in crate::http) struct Dap4Dataset {
    /// The dataset's name (its group's, or the dataset's for the root).
    pub name: String,
    /// Group 0 is the dataset; each group's subgroups follow it in turn.
    pub groups: Vec<Group>,
    /// Every variable, in the order a `.dap` answer sends them: a group's
    /// own, then its subgroups' (depth first).
    pub variables: Vec<Variable>,
}

impl Dap4Dataset {
    /// The dataset of the group at `path`: 404 when there is none, 400
    /// when it is an array.
    pub(super) async fn load(dataset: &Dataset, path: &str) -> Result<Self, Error> {
        let node = dataset.node(path).await?;
        if node.node_type() == "array" {
            return Err(Error::InvalidRequest(format!(
                "'/{path}' is an array; a DAP4 dataset is a group (use the URL of its group)"
            )));
        }
        let name = match path.rsplit('/').next() {
            Some(last) if !last.is_empty() => last.to_string(),
            _ => dataset.name.to_string(),
        };
        let mut out = Self {
            name,
            groups: Vec::new(),
            variables: Vec::new(),
        };
        // Depth first, so that a group's variables come before its
        // subgroups' in `variables`, as a `.dap` answer sends them.
        out.add_group(dataset, node, String::new(), "/".into()).await?;
        Ok(out)
    }

    fn add_group<'a>(
        &'a mut self,
        dataset: &'a Dataset,
        node: Arc<Node>,
        name: String,
        fqn: String,
    ) -> futures::future::BoxFuture<'a, Result<usize, Error>> {
        Box::pin(async move {
            let index = self.groups.len();
            self.groups.push(Group {
                name,
                fqn: fqn.clone(),
                dims: Vec::new(),
                variables: Vec::new(),
                groups: Vec::new(),
                attributes: node.attributes().cloned().unwrap_or(Value::Null),
            });
            let children = dataset.children(&node.path).await?;
            let mut arrays = Vec::new();
            for child in children.iter().filter(|c| c.node_type == "array") {
                let array = dataset.node(&child.path).await?;
                arrays.extend(Array::of(&child.name, array));
            }
            let groups: Vec<&str> = children
                .iter()
                .filter(|c| c.node_type == "group")
                .map(|c| c.name.as_str())
                .collect();
            self.add_variables(index, arrays, &groups);
            for child in children.iter().filter(|c| c.node_type == "group") {
                let group = dataset.node(&child.path).await?;
                let fqn = self.groups[index].member_fqn(&child.name);
                let sub = self.add_group(dataset, group, child.name.clone(), fqn).await?;
                self.groups[index].groups.push(sub);
            }
            Ok(index)
        })
    }

    /// The variables of group `group`, their dimensions shared by name (one
    /// size a name: see [`distinct_dimensions`]), their maps found.
    fn add_variables(&mut self, group: usize, mut arrays: Vec<Array>, subgroups: &[&str]) {
        distinct_dimensions(&mut arrays, subgroups);
        let first = self.variables.len();
        let dims = &mut self.groups[group].dims;
        for array in arrays {
            let indices = array
                .dims
                .iter()
                .map(|(name, size)| match dims.iter().position(|d| d.name == *name) {
                    Some(i) => i,
                    None => {
                        dims.push(Dimension {
                            name: name.clone(),
                            size: *size,
                        });
                        dims.len() - 1
                    }
                })
                .collect();
            self.variables.push(Variable {
                name: array.name,
                group,
                data_type: array.data_type,
                dap: array.dap,
                dims: indices,
                maps: Vec::new(),
                attributes: array.attributes,
                v2_fill: array.v2_fill,
                node: array.node,
            });
        }
        let own: Vec<usize> = (first..self.variables.len()).collect();
        find_maps(&mut self.variables[first..], &self.groups[group].dims, first);
        self.groups[group].variables = own;
    }

    /// The variable whose fully qualified name is `fqn`.
    pub(super) fn variable(&self, fqn: &str) -> Option<usize> {
        (0..self.variables.len()).find(|&i| self.variable_fqn(i) == fqn)
    }

    /// The group and index of the dimension whose fully qualified name is `fqn`.
    pub(super) fn dimension(&self, fqn: &str) -> Option<(usize, usize)> {
        self.groups.iter().enumerate().find_map(|(g, group)| {
            let d = group.dims.iter().position(|d| group.member_fqn(&d.name) == fqn)?;
            Some((g, d))
        })
    }

    pub(super) fn variable_fqn(&self, var: usize) -> String {
        let var = &self.variables[var];
        self.groups[var.group].member_fqn(&var.name)
    }

    /// A variable's dimensions: their group, index and size.
    pub(super) fn dims_of(&self, var: usize) -> impl Iterator<Item = (usize, usize, u64)> + '_ {
        let var = &self.variables[var];
        let group = &self.groups[var.group];
        var.dims.iter().map(move |&d| (var.group, d, group.dims[d].size))
    }
}

/// A readable array of a type DAP4 carries, before its dimensions are shared.
struct Array {
    name: String,
    data_type: DataType,
    dap: Dap4Type,
    /// Each dimension's name (`dim_K` when unnamed) and size.
    dims: Vec<(String, u64)>,
    attributes: Value,
    v2_fill: Value,
    node: Arc<Node>,
}

impl Array {
    fn of(name: &str, node: Arc<Node>) -> Option<Self> {
        let meta = node.array().ok()?;
        let dap = Dap4Type::of(meta.data_type)?;
        // netCDF-C refuses a dimension name with `/`, and it would read as
        // a group in a fully qualified name.
        let dims = crate::http::opendap::dimensions(meta)
            .into_iter()
            .map(|(name, len)| (name.replace('/', "_"), len))
            .collect();
        Some(Self {
            name: name.to_string(),
            data_type: meta.data_type,
            dap,
            dims,
            attributes: node.metadata.as_ref()?.attributes().clone(),
            v2_fill: node.v2_fill_value(),
            node,
        })
    }

    /// 1-D and named as its dimension.
    fn is_coordinate(&self) -> bool {
        matches!(self.dims.as_slice(), [(dim, _)] if *dim == self.name)
    }
}

/// Give each dimension name one size in a group, as a shared dimension
/// has: where arrays use a name with different sizes, the coordinate's
/// (else the first array's) keeps the name and the others become
/// `{name}_{size}` (with `_1`, `_2`... should that be taken too). A name
/// of one of the group's `subgroups` becomes `{name}_dim` first: netCDF-C
/// would look for the dimension inside that group.
fn distinct_dimensions(arrays: &mut [Array], subgroups: &[&str]) {
    for array in arrays.iter_mut() {
        for (name, _) in array.dims.iter_mut() {
            while subgroups.contains(&name.as_str()) {
                name.push_str("_dim");
            }
        }
    }
    let arrays = arrays.iter_mut().map(|a| (a.is_coordinate(), &mut a.dims)).collect();
    crate::http::opendap::distinct_dimensions(arrays);
}

/// Give each variable of a group all of whose dimensions have a
/// coordinate (a 1-D variable named as its dimension, not text) those
/// coordinates as its maps; `variables` are the group's, `first` the
/// dataset index of `variables[0]`.
fn find_maps(variables: &mut [Variable], dims: &[Dimension], first: usize) {
    let coordinate = |dim: usize| {
        variables
            .iter()
            .position(|c| c.dims == [dim] && c.name == dims[dim].name && c.dap != Dap4Type::String)
    };
    let maps: Vec<Vec<usize>> = variables
        .iter()
        .map(|var| {
            let is_coordinate =
                var.dims.len() == 1 && coordinate(var.dims[0]).is_some_and(|c| variables[c].name == var.name);
            let maps: Option<Vec<usize>> = var.dims.iter().map(|&d| coordinate(d).map(|c| first + c)).collect();
            match (is_coordinate, maps) {
                (false, Some(maps)) => maps,
                _ => Vec::new(),
            }
        })
        .collect();
    for (var, maps) in variables.iter_mut().zip(maps) {
        var.maps = maps;
    }
}
