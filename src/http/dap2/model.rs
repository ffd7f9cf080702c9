//! The DAP2 dataset of a group (contract 3.4): its readable arrays as DAP
//! variables, each a scalar, an `Array`, or a `Grid` whose maps are the
//! group's 1-D coordinates of its dimensions.

use std::sync::Arc;

use serde_json::Value;

use crate::encode::xdr::DapType;
use crate::engine::{DataType, Dataset, Error, Node};

/// One variable: an array of the group.
#[derive(Debug, Clone)]
pub(in crate::http) struct Variable {
    /// The array's name.
    pub name: String,
    /// The array's path in the dataset.
    pub path: String,
    pub data_type: DataType,
    pub dap: DapType,
    /// Each dimension's name (`dim_K` when unnamed) and length.
    pub dims: Vec<(String, u64)>,
    /// For a `Grid`, the variable index of each dimension's map.
    pub maps: Vec<usize>,
    /// Its stored attributes.
    pub attributes: Value,
    /// A Zarr v2 array's `fill_value` (null otherwise).
    pub v2_fill: Value,
    /// The node this variable was made from: reads are planned on it, so
    /// what is sent always matches what the DDS says.
    pub node: Arc<Node>,
}

impl Variable {
    pub(super) fn is_grid(&self) -> bool {
        !self.maps.is_empty()
    }

    /// Whether it is a coordinate: 1-D, named as its dimension.
    fn is_coordinate(&self) -> bool {
        matches!(self.dims.as_slice(), [(dim, _)] if *dim == self.name)
    }
}

/// The DAP2 dataset of one group.
#[derive(Debug)]
pub(in crate::http) struct DapDataset {
    /// The name after the DDS's closing brace.
    pub name: String,
    /// The variables, by name (byte order).
    pub variables: Vec<Variable>,
    /// The group's attributes (`NC_GLOBAL`).
    pub attributes: Value,
}

impl DapDataset {
    /// The dataset of the group at `path`: 404 when there is none, 400
    /// when it is an array.
    pub(super) async fn load(dataset: &Dataset, path: &str) -> Result<Self, Error> {
        let group = dataset.node(path).await?;
        if group.node_type() == "array" {
            return Err(Error::InvalidRequest(format!(
                "'/{path}' is an array; a DAP2 dataset is a group (use the URL of its group)"
            )));
        }
        let mut variables = Vec::new();
        for child in dataset.children(path).await? {
            if child.node_type != "array" {
                continue;
            }
            let node = dataset.node(&child.path).await?;
            variables.extend(variable(&child.name, node));
        }
        distinct_dimensions(&mut variables);
        find_grids(&mut variables);
        let name = match path.rsplit('/').next() {
            Some(last) if !last.is_empty() => last.to_string(),
            _ => dataset.name.to_string(),
        };
        Ok(Self {
            name,
            variables,
            attributes: group.attributes().cloned().unwrap_or(Value::Null),
        })
    }

    /// The variable named `name`.
    pub(super) fn index_of(&self, name: &str) -> Option<usize> {
        self.variables.iter().position(|v| v.name == name)
    }
}

/// The variable of a readable array of a type DAP2 carries.
fn variable(name: &str, node: Arc<Node>) -> Option<Variable> {
    let meta = node.array().ok()?;
    let dap = DapType::of(meta.data_type)?;
    let dims = crate::http::opendap::dimensions(meta);
    let source = node.metadata.as_ref()?;
    let v2_fill = node.v2_fill_value();
    Some(Variable {
        name: name.to_string(),
        path: node.path.clone(),
        data_type: meta.data_type,
        dap,
        dims,
        maps: Vec::new(),
        attributes: source.attributes().clone(),
        v2_fill,
        node: node.clone(),
    })
}

/// Give each dimension name one length across the dataset (see
/// [`crate::http::opendap::distinct_dimensions`]).
fn distinct_dimensions(variables: &mut [Variable]) {
    let arrays = variables.iter_mut().map(|v| (v.is_coordinate(), &mut v.dims)).collect();
    crate::http::opendap::distinct_dimensions(arrays);
}

/// Make a `Grid` of each variable all of whose dimensions have a
/// coordinate in the group (coordinates themselves stay arrays).
fn find_grids(variables: &mut [Variable]) {
    for i in 0..variables.len() {
        let var = &variables[i];
        // netCDF-C cannot take a grid with two maps of one name.
        let repeated = (1..var.dims.len()).any(|d| var.dims[..d].iter().any(|(n, _)| *n == var.dims[d].0));
        if var.dims.is_empty() || var.is_coordinate() || repeated {
            continue;
        }
        let maps: Option<Vec<usize>> = var
            .dims
            .iter()
            .map(|dim| {
                variables
                    .iter()
                    .position(|c| c.is_coordinate() && c.dims[0] == *dim && c.dap != DapType::String)
            })
            .collect();
        if let Some(maps) = maps {
            variables[i].maps = maps;
        }
    }
}
