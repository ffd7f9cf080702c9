//! The DMR (DAP4 metadata response) of a DAP4 dataset as a projection
//! constrains it, and the DSR (its services).
//!
//! Groups nest as `Group`s; each declares the shared `Dimension`s its
//! projected variables use (a constrained dimension at its constrained
//! size); a variable names its dimensions by their fully qualified names
//! (`<Dim name="/g/lat"/>`), or gives anonymous sizes when a hyperslab of
//! its own cut them; `Map`s name its projected coordinates. Every
//! attribute is typed: fill and valid values as the variable, integers
//! `Int32` (else `Int64`, `UInt64`), other numbers `Float64`, text
//! `String`, lists as several `Value`s; anything else is left out.

use std::fmt::Write as _;

use serde_json::Value;

use super::constraint::Projection;
use super::model::{Dap4Dataset, Variable};
use crate::encode::dap4::Dap4Type;
use crate::encode::xml::escape;
use crate::engine::DataType;
use crate::http::opendap::typed_as_variable;

/// DAP4's XML namespace.
const NAMESPACE: &str = "http://xml.opendap.org/ns/DAP/4.0#";

/// The DMR of what `projection` picks.
pub(super) fn dmr(dataset: &Dap4Dataset, projection: &Projection) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<Dataset xmlns=\"{NAMESPACE}\" dapVersion=\"4.0\" dmrVersion=\"1.0\" name=\"{}\">",
        escape(&dataset.name)
    );
    group_body(&mut out, dataset, projection, 0, 1);
    out.push_str("</Dataset>");
    out
}

/// Whether group `g` (or a group below it) holds a projected variable.
fn shown(dataset: &Dap4Dataset, projection: &Projection, g: usize) -> bool {
    projection.all
        || projection.picks.iter().any(|p| dataset.variables[p.var].group == g)
        || dataset.groups[g].groups.iter().any(|&s| shown(dataset, projection, s))
}

fn group_body(out: &mut String, dataset: &Dap4Dataset, projection: &Projection, g: usize, depth: usize) {
    let pad = "  ".repeat(depth);
    let group = &dataset.groups[g];
    let picks: Vec<_> = projection
        .picks
        .iter()
        .filter(|p| dataset.variables[p.var].group == g)
        .collect();
    for (d, dim) in group.dims.iter().enumerate() {
        let used = picks
            .iter()
            .any(|p| p.shared && dataset.variables[p.var].dims.contains(&d));
        if used {
            let size = projection.dim_size(dataset, g, d);
            let _ = writeln!(out, "{pad}<Dimension name=\"{}\" size=\"{size}\"/>", escape(&dim.name));
        }
    }
    for pick in &picks {
        let var = &dataset.variables[pick.var];
        let _ = writeln!(out, "{pad}<{} name=\"{}\">", var.dap.name(), escape(&var.name));
        for (&d, slice) in var.dims.iter().zip(&pick.slices) {
            match pick.shared {
                true => {
                    let fqn = group.member_fqn(&group.dims[d].name);
                    let _ = writeln!(out, "{pad}  <Dim name=\"{}\"/>", escape(&fqn));
                }
                false => {
                    let _ = writeln!(out, "{pad}  <Dim size=\"{}\"/>", slice.count);
                }
            }
        }
        for line in variable_attributes(var) {
            let _ = writeln!(out, "{pad}  {line}");
        }
        if pick.shared {
            for &map in var.maps.iter().filter(|&&m| projection.shared(m)) {
                let _ = writeln!(out, "{pad}  <Map name=\"{}\"/>", escape(&dataset.variable_fqn(map)));
            }
        }
        let _ = writeln!(out, "{pad}</{}>", var.dap.name());
    }
    for &s in group.groups.iter().filter(|&&s| shown(dataset, projection, s)) {
        let _ = writeln!(out, "{pad}<Group name=\"{}\">", escape(&dataset.groups[s].name));
        group_body(out, dataset, projection, s, depth + 1);
        let _ = writeln!(out, "{pad}</Group>");
    }
    if let Some(map) = group.attributes.as_object() {
        for (name, value) in map.iter().filter(|(name, _)| !name.is_empty() && !reserved(name)) {
            if let Some(element) = attribute(name, value) {
                let _ = writeln!(out, "{pad}{element}");
            }
        }
    }
}

/// Attributes the DMR already says (xarray's dimension names), that a
/// datetime's CF units replace, or that clients keep for themselves.
fn hidden(var: &Variable, name: &str) -> bool {
    let time = is_time(var.data_type);
    name == "_ARRAY_DIMENSIONS"
        || reserved(name)
        || (time && matches!(name, "units" | "calendar" | "_FillValue" | "missing_value"))
}

fn is_time(data_type: DataType) -> bool {
    matches!(data_type, DataType::DateTime64(_) | DataType::TimeDelta64(_))
}

/// Names clients reserve: DAP4's own (netCDF-C compares a
/// `_DAP4_Checksum_CRC32` with the data's; pydap reads the DMR differently
/// when the root has `_DAP4_Little_Endian` or `_dap4.ce`) and netCDF-4's,
/// which netCDF-C refuses to define.
fn reserved(name: &str) -> bool {
    name.starts_with("_DAP4_")
        || name.starts_with("_dap4")
        || name.starts_with("_Netcdf4")
        || matches!(name, "_NCProperties" | "_IsNetcdf4" | "_SuperblockVersion" | "_Format")
}

/// One variable's `Attribute` elements.
pub(super) fn variable_attributes(var: &Variable) -> Vec<String> {
    let mut out = Vec::new();
    let map = var.attributes.as_object();
    for (name, value) in map.into_iter().flatten() {
        if name.is_empty() || hidden(var, name) {
            continue;
        }
        out.extend(match typed_as_variable(name) {
            // netCDF-C takes one fill value, not a list.
            true if name == "_FillValue" && value.as_array().is_some_and(|a| a.len() != 1) => None,
            true => typed_attribute(var, name, value),
            false => attribute(name, value),
        });
    }
    let has = |name: &str| map.is_some_and(|m| m.contains_key(name));
    if !has("_FillValue") && !var.v2_fill.is_null() && !is_time(var.data_type) {
        out.extend(typed_attribute(var, "_FillValue", &var.v2_fill));
    }
    let text = |name: &str, value: &str| element(name, "String", &[escape(value)]);
    match var.data_type {
        DataType::DateTime64(unit) => {
            out.push(text("units", &format!("{} since 1970-01-01", unit.cf_unit())));
            out.push(text("calendar", "proleptic_gregorian"));
            // NaT, so that CF readers see it missing.
            out.push(element("_FillValue", "Int64", &[crate::engine::NAT.to_string()]));
        }
        DataType::TimeDelta64(unit) => {
            out.push(text("units", unit.cf_unit()));
            out.push(element("_FillValue", "Int64", &[crate::engine::NAT.to_string()]));
        }
        _ => {}
    }
    out
}

/// `<Attribute name=".." type=".."><Value>..</Value>...</Attribute>`.
fn element(name: &str, dap: &str, values: &[String]) -> String {
    let mut out = format!("<Attribute name=\"{}\" type=\"{dap}\">", escape(name));
    for value in values {
        let _ = write!(out, "<Value>{value}</Value>");
    }
    out.push_str("</Attribute>");
    out
}

/// The items of an attribute's value (a list's, or the one value).
fn items(value: &Value) -> Option<Vec<&Value>> {
    match value {
        Value::Array(items) if !items.is_empty() => Some(items.iter().collect()),
        Value::Array(_) | Value::Null => None,
        one => Some(vec![one]),
    }
}

/// A fill or valid value in the variable's own DAP4 type (left out when it
/// is not a value of that type).
fn typed_attribute(var: &Variable, name: &str, value: &Value) -> Option<String> {
    let values: Option<Vec<String>> = match var.dap {
        Dap4Type::String => items(value)?.iter().map(|v| v.as_str().map(escape)).collect(),
        dap => items(value)?
            .iter()
            .map(|v| typed_number(dap, v, var.data_type))
            .collect(),
    };
    Some(element(name, var.dap.name(), &values?))
}

/// `v` as a value of `dap` (`None` when it is not one).
fn typed_number(dap: Dap4Type, v: &Value, data_type: DataType) -> Option<String> {
    // Integers as JSON has them (exact beyond 2^53), else as the number.
    let exact = v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from));
    let number = crate::engine::attribute_number(v, data_type)?;
    let integer = |min: i128, max: i128| {
        let n = exact.or_else(|| (number.fract() == 0.0 && number.abs() < 2e38).then_some(number as i128))?;
        (min..=max).contains(&n).then(|| n.to_string())
    };
    match dap {
        Dap4Type::Byte | Dap4Type::UInt8 => integer(0, u8::MAX.into()),
        Dap4Type::Int8 => integer(i8::MIN.into(), i8::MAX.into()),
        Dap4Type::Int16 => integer(i16::MIN.into(), i16::MAX.into()),
        Dap4Type::UInt16 => integer(0, u16::MAX.into()),
        Dap4Type::Int32 => integer(i32::MIN.into(), i32::MAX.into()),
        Dap4Type::UInt32 => integer(0, u32::MAX.into()),
        Dap4Type::Int64 => integer(i64::MIN.into(), i64::MAX.into()),
        Dap4Type::UInt64 => integer(0, u64::MAX.into()),
        Dap4Type::Float32 => Some(float_text(f64::from(number as f32), true)),
        Dap4Type::Float64 => Some(float_text(number, false)),
        Dap4Type::String => None,
    }
}

/// A float as text every client parses: `NaN`, `Infinity`, `-Infinity`,
/// or the shortest form that reads back the same.
fn float_text(v: f64, single: bool) -> String {
    match v {
        v if v.is_nan() => "NaN".into(),
        v if v.is_infinite() => if v > 0.0 { "Infinity" } else { "-Infinity" }.into(),
        v => crate::encode::ascii::float_text(v, single),
    }
}

/// An untyped attribute: integers `Int32` (else `Int64`, else `UInt64`),
/// other numbers `Float64`, strings `String`, lists of one kind as several
/// values; anything else left out.
fn attribute(name: &str, value: &Value) -> Option<String> {
    let items = items(value)?;
    if items.iter().all(|v| v.is_string()) {
        let values: Vec<String> = items.iter().map(|v| escape(v.as_str().unwrap_or(""))).collect();
        return Some(element(name, "String", &values));
    }
    if !items.iter().all(|v| v.is_number()) {
        return None;
    }
    let fits = |f: fn(&Value) -> bool| items.iter().all(|v| f(v));
    let dap = if fits(|v| v.as_i64().is_some_and(|i| i32::try_from(i).is_ok())) {
        "Int32"
    } else if fits(|v| v.as_i64().is_some()) {
        "Int64"
    } else if fits(|v| v.as_u64().is_some()) {
        "UInt64"
    } else {
        let values: Option<Vec<String>> = items.iter().map(|v| v.as_f64().map(|f| float_text(f, false))).collect();
        return Some(element(name, "Float64", &values?));
    };
    let values: Vec<String> = items.iter().map(|v| v.to_string()).collect();
    Some(element(name, dap, &values))
}

/// The DSR: the answers the dataset at `base` (its URL path) gives.
pub(super) fn dsr(base: &str) -> String {
    let base = escape(base);
    let service = |title: &str, role: &str, suffix: &str, media: &str| {
        format!(
            "  <Service title=\"{title}\" role=\"http://services.opendap.org/dap4/{role}\">\n    <link type=\"{media}\" href=\"{base}{suffix}\"/>\n  </Service>\n"
        )
    };
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str("<DatasetServices xmlns=\"http://xml.opendap.org/ns/DAP/4.0/dataset-services#\">\n");
    out.push_str("  <DapVersion>4.0</DapVersion>\n");
    let _ = writeln!(
        out,
        "  <ServerSoftwareVersion>zarr-serve/{}</ServerSoftwareVersion>",
        env!("CARGO_PKG_VERSION")
    );
    out.push_str(&service(
        "DAP4 Dataset Services",
        "dataset-services",
        ".dsr",
        super::DSR_TYPE,
    ));
    out.push_str(&service(
        "DAP4 Dataset Metadata",
        "dataset-metadata",
        ".dmr",
        super::DMR_TYPE,
    ));
    out.push_str(&service("DAP4 Data", "data", ".dap", super::DAP_TYPE));
    out.push_str("</DatasetServices>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn untyped_attributes_take_the_narrowest_type() {
        assert_eq!(
            attribute("n", &json!(3)).unwrap(),
            r#"<Attribute name="n" type="Int32"><Value>3</Value></Attribute>"#
        );
        assert!(attribute("n", &json!(5_000_000_000i64))
            .unwrap()
            .contains("type=\"Int64\""));
        assert!(attribute("n", &json!(u64::MAX)).unwrap().contains("type=\"UInt64\""));
        assert!(attribute("n", &json!([1, 2.5]))
            .unwrap()
            .contains("type=\"Float64\"><Value>1.0</Value><Value>2.5</Value>"));
        assert!(attribute("s", &json!(["a<", "b"]))
            .unwrap()
            .contains("<Value>a&lt;</Value><Value>b</Value>"));
        assert!(attribute("b", &json!(true)).is_none());
        assert!(attribute("m", &json!([1, "a"])).is_none());
        assert!(attribute("e", &json!([])).is_none());
    }

    #[test]
    fn fill_values_take_the_variable_type() {
        let exact = json!(18446744073709551615u64);
        assert_eq!(
            typed_number(Dap4Type::UInt64, &exact, DataType::UInt64).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(
            typed_number(Dap4Type::Int8, &json!(-128), DataType::Int8).unwrap(),
            "-128"
        );
        assert!(typed_number(Dap4Type::Int8, &json!(200), DataType::Int8).is_none());
        assert_eq!(
            typed_number(Dap4Type::Float32, &json!("NaN"), DataType::Float32).unwrap(),
            "NaN"
        );
        assert_eq!(
            typed_number(Dap4Type::Float64, &json!("-Infinity"), DataType::Float64).unwrap(),
            "-Infinity"
        );
    }
}
