//! The text DAP2 answers: the DDS (the dataset's shape, constrained), the
//! DAS (attributes, typed as contract 3.4 says) and the names of the
//! ASCII answer's arrays (their values: [`crate::encode::ascii`]).

use std::fmt::Write as _;

use serde_json::Value;

use super::constraint::{Leaf, Member, Projection};
use super::model::{DapDataset, Variable};
use crate::encode::ascii::float_text;
pub(super) use crate::encode::ascii::quoted;
use crate::encode::xdr::DapType;
use crate::engine::{attribute_number, DataType};
use crate::http::opendap::typed_as_variable;

/// Four spaces a level, as libdap indents.
const INDENT: &str = "    ";

/// The DDS of what `projection` picks.
pub(super) fn dds(dataset: &DapDataset, projection: &Projection) -> String {
    let mut out = String::from("Dataset {\n");
    for member in &projection.members {
        match member {
            Member::Plain(leaf) => declare(&mut out, INDENT, dataset, leaf),
            Member::Grid { var, leaves } => {
                out.push_str(&format!("{INDENT}Grid {{\n{INDENT}  ARRAY:\n"));
                declare(&mut out, "        ", dataset, &leaves[0]);
                out.push_str(&format!("{INDENT}  MAPS:\n"));
                for leaf in &leaves[1..] {
                    declare(&mut out, "        ", dataset, leaf);
                }
                let _ = writeln!(out, "{INDENT}}} {};", dap_name(&dataset.variables[*var].name));
            }
            Member::Structure { var, leaves } => {
                out.push_str(&format!("{INDENT}Structure {{\n"));
                for leaf in leaves {
                    declare(&mut out, "        ", dataset, leaf);
                }
                let _ = writeln!(out, "{INDENT}}} {};", dap_name(&dataset.variables[*var].name));
            }
        }
    }
    let _ = writeln!(out, "}} {};", dap_name(&dataset.name));
    out
}

/// `Float32 t[time = 2][lat = 3];`
fn declare(out: &mut String, indent: &str, dataset: &DapDataset, leaf: &Leaf) {
    let var = &dataset.variables[leaf.var];
    let _ = write!(out, "{indent}{} {}", var.dap.name(), dap_name(&var.name));
    for ((dim, _), slice) in var.dims.iter().zip(&leaf.slices) {
        let _ = write!(out, "[{} = {}]", dap_name(dim), slice.count);
    }
    out.push_str(";\n");
}

/// A name as DAP2 writes identifiers: characters other than letters,
/// digits and `_ - ! ~ * '` percent-escaped (so `.` never reads as a
/// grid component).
pub(super) fn dap_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"_-!~*'".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The DAS: each variable's attributes, then the group's as `NC_GLOBAL`.
pub(super) fn das(dataset: &DapDataset) -> String {
    let mut out = String::from("Attributes {\n");
    for var in &dataset.variables {
        let _ = writeln!(out, "{INDENT}{} {{", dap_name(&var.name));
        for line in variable_attributes(var) {
            let _ = writeln!(out, "{INDENT}{INDENT}{line}");
        }
        let _ = writeln!(out, "{INDENT}}}");
    }
    let _ = writeln!(out, "{INDENT}NC_GLOBAL {{");
    if let Some(map) = dataset.attributes.as_object() {
        for (name, value) in map.iter().filter(|(name, _)| !name.is_empty()) {
            if let Some(line) = attribute(name, value) {
                let _ = writeln!(out, "{INDENT}{INDENT}{line}");
            }
        }
    }
    out.push_str(&format!("{INDENT}}}\n}}\n"));
    out
}

/// Attributes the DDS already says (xarray's dimension names) or that a
/// datetime's CF units replace.
fn hidden(var: &Variable, name: &str) -> bool {
    let time = matches!(var.data_type, DataType::DateTime64(_) | DataType::TimeDelta64(_));
    name == "_ARRAY_DIMENSIONS" || (time && matches!(name, "units" | "calendar"))
}

/// One variable's attribute lines.
fn variable_attributes(var: &Variable) -> Vec<String> {
    let mut lines = Vec::new();
    let map = var.attributes.as_object();
    for (name, value) in map.into_iter().flatten() {
        if name.is_empty() || hidden(var, name) {
            continue;
        }
        let line = match typed_as_variable(name) {
            true => typed_attribute(var, name, value),
            false => attribute(name, value),
        };
        lines.extend(line);
    }
    let has = |name: &str| map.is_some_and(|m| m.contains_key(name));
    if !has("_FillValue") && !var.v2_fill.is_null() {
        lines.extend(typed_attribute(var, "_FillValue", &var.v2_fill));
    }
    match var.data_type {
        DataType::DateTime64(unit) => {
            lines.push(format!("String units \"{} since 1970-01-01\";", unit.cf_unit()));
            lines.push("String calendar \"proleptic_gregorian\";".into());
        }
        DataType::TimeDelta64(unit) => lines.push(format!("String units \"{}\";", unit.cf_unit())),
        // Text is UTF-8: xarray decodes netCDF-C's characters by it.
        DataType::String | DataType::FixedUtf32(_) if !has("_Encoding") => {
            lines.push("String _Encoding \"utf-8\";".into())
        }
        // Not uint64: it is sent as Float64, which has no sign to reinterpret.
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 if !has("_Unsigned") => {
            lines.push("String _Unsigned \"true\";".into())
        }
        _ => {}
    }
    lines
}

/// A fill or valid value in the variable's own DAP type (left out when it
/// is not a value of that type; datetimes have none).
fn typed_attribute(var: &Variable, name: &str, value: &Value) -> Option<String> {
    if matches!(var.data_type, DataType::DateTime64(_) | DataType::TimeDelta64(_)) {
        return None;
    }
    let items = match value {
        Value::Array(items) if !items.is_empty() => items.iter().collect(),
        Value::Array(_) | Value::Null => return None,
        one => vec![one],
    };
    let texts: Option<Vec<String>> = match var.dap {
        DapType::String => items.iter().map(|v| v.as_str().map(quoted)).collect(),
        dap => items
            .iter()
            .map(|v| typed_number(dap, attribute_number(v, var.data_type)?))
            .collect(),
    };
    Some(format!("{} {} {};", var.dap.name(), dap_name(name), texts?.join(", ")))
}

/// `v` as a value of `dap` (`None` when it is not one).
fn typed_number(dap: DapType, v: f64) -> Option<String> {
    let integer = |min: f64, max: f64| (v.fract() == 0.0 && (min..=max).contains(&v)).then(|| format!("{}", v as i64));
    match dap {
        DapType::Byte => integer(0.0, 255.0),
        DapType::Int16 => integer(i16::MIN.into(), i16::MAX.into()),
        DapType::UInt16 => integer(0.0, u16::MAX.into()),
        DapType::Int32 => integer(i32::MIN.into(), i32::MAX.into()),
        DapType::UInt32 => integer(0.0, u32::MAX.into()),
        DapType::Float32 => Some(float_text(f64::from(v as f32), true)),
        DapType::Float64 => Some(float_text(v, false)),
        DapType::String => None,
    }
}

/// An untyped attribute: integers `Int32` (else `Float64`), other numbers
/// `Float64`, strings `String`, lists of one kind as several values;
/// anything else left out.
fn attribute(name: &str, value: &Value) -> Option<String> {
    let items: Vec<&Value> = match value {
        Value::Array(items) if !items.is_empty() => items.iter().collect(),
        Value::Array(_) => return None,
        one => vec![one],
    };
    let (dap, texts) = if items.iter().all(|v| v.is_string()) {
        let texts = items.iter().map(|v| quoted(v.as_str().unwrap_or(""))).collect();
        (DapType::String, texts)
    } else if items.iter().all(|v| v.is_number()) {
        let ints: Option<Vec<i32>> = items
            .iter()
            .map(|v| v.as_i64().and_then(|i| i32::try_from(i).ok()))
            .collect();
        match ints {
            Some(ints) => (DapType::Int32, ints.iter().map(i32::to_string).collect()),
            None => {
                let floats: Option<Vec<String>> =
                    items.iter().map(|v| v.as_f64().map(|f| float_text(f, false))).collect();
                (DapType::Float64, floats?)
            }
        }
    } else {
        return None;
    };
    Some(format!("{} {} {};", dap.name(), dap_name(name), texts.join(", ")))
}

/// What comes between the DDS and the values of an ASCII answer.
pub(super) const ASCII_RULE: &str = "---------------------------------------------\n";

/// The name an array's ASCII values are given under: `grid.component`
/// for grids' and structures' members.
pub(super) fn ascii_names(dataset: &DapDataset, projection: &Projection) -> Vec<String> {
    let mut names = Vec::new();
    for member in &projection.members {
        let prefix = match member {
            Member::Plain(_) => String::new(),
            Member::Grid { var, .. } | Member::Structure { var, .. } => {
                format!("{}.", dap_name(&dataset.variables[*var].name))
            }
        };
        for leaf in member.leaves() {
            names.push(format!("{prefix}{}", dap_name(&dataset.variables[leaf.var].name)));
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn var(data_type: DataType, attributes: Value, v2_fill: Value) -> Variable {
        Variable {
            name: "v".into(),
            path: "v".into(),
            data_type,
            dap: DapType::of(data_type).unwrap(),
            dims: vec![("x".into(), 2)],
            maps: vec![],
            attributes,
            v2_fill,
            node: std::sync::Arc::new(crate::engine::Node::new("v", None, None)),
        }
    }

    #[test]
    fn attributes_are_typed_as_the_contract_says() {
        let v = var(
            DataType::UInt8,
            json!({"_FillValue": 255, "valid_range": [0, 200], "scale": 0.5, "n": 3, "big": 5_000_000_000i64,
                   "names": ["a", "b\"c"], "flag": true, "mixed": [1, "a"], "_ARRAY_DIMENSIONS": ["x"]}),
            Value::Null,
        );
        assert_eq!(
            variable_attributes(&v),
            vec![
                "Byte _FillValue 255;",
                "Byte valid_range 0, 200;",
                "Float64 scale 0.5;",
                "Int32 n 3;",
                "Float64 big 5000000000.0;",
                "String names \"a\", \"b\\\"c\";",
                "String _Unsigned \"true\";",
            ]
        );
    }

    #[test]
    fn fill_values_from_v2_and_xarray_forms() {
        let f = var(DataType::Float32, json!({}), json!("NaN"));
        assert_eq!(variable_attributes(&f), vec!["Float32 _FillValue NaN;"]);
        // xarray on Zarr v3 writes a float's fill as base64 of its bytes
        let f = var(DataType::Float32, json!({"_FillValue": "AAAAAAAA+H8="}), Value::Null);
        assert_eq!(variable_attributes(&f), vec!["Float32 _FillValue NaN;"]);
        let t = var(
            DataType::DateTime64(crate::engine::TimeUnit::parse("s").unwrap()),
            json!({"units": "x", "_FillValue": 0}),
            Value::Null,
        );
        assert_eq!(
            variable_attributes(&t),
            vec![
                "String units \"seconds since 1970-01-01\";",
                "String calendar \"proleptic_gregorian\";"
            ]
        );
    }

    #[test]
    fn names_escape_what_dap_would_misread() {
        assert_eq!(dap_name("a.b c"), "a%2Eb%20c");
        assert_eq!(dap_name("t_2m-x"), "t_2m-x");
    }
}
