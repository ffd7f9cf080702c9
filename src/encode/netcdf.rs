//! netCDF classic files: CDF-2 (64-bit offsets), or CDF-5 (64-bit data)
//! when a type needs it (unsigned or 64-bit integers) or a dimension is
//! longer than CDF-2 allows.
//!
//! The file is laid out so that it streams: the header (every size is
//! known before any data is read), the coordinate variables (small, read
//! first), then the result variable, whose big-endian elements are the
//! read's slabs as they arrive, and the padding that ends it. Nothing is
//! seeked back to. The format is NetCDF's "Classic Format Specification"
//! (the CDF-5 additions from PnetCDF).

use bytes::Bytes;
use serde_json::Value;

use super::Encoder;
use crate::engine::{values, DataType};

/// A netCDF external type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)] // netCDF's own names: NC_BYTE, NC_CHAR, ...
pub enum NcType {
    Byte,
    Char,
    Short,
    Int,
    Float,
    Double,
    UByte,
    UShort,
    UInt,
    Int64,
    UInt64,
}

impl NcType {
    fn code(self) -> u32 {
        match self {
            NcType::Byte => 1,
            NcType::Char => 2,
            NcType::Short => 3,
            NcType::Int => 4,
            NcType::Float => 5,
            NcType::Double => 6,
            NcType::UByte => 7,
            NcType::UShort => 8,
            NcType::UInt => 9,
            NcType::Int64 => 10,
            NcType::UInt64 => 11,
        }
    }

    fn size(self) -> usize {
        match self {
            NcType::Byte | NcType::Char | NcType::UByte => 1,
            NcType::Short | NcType::UShort => 2,
            NcType::Int | NcType::Float | NcType::UInt => 4,
            NcType::Double | NcType::Int64 | NcType::UInt64 => 8,
        }
    }

    /// Whether only CDF-5 has the type.
    fn needs_cdf5(self) -> bool {
        matches!(
            self,
            NcType::UByte | NcType::UShort | NcType::UInt | NcType::Int64 | NcType::UInt64
        )
    }

    /// The type that holds elements of `data_type` as they are (booleans
    /// as bytes, datetimes as int64 counts); `None` for types netCDF
    /// classic has no numbers for (half floats, complex, text, bytes).
    pub fn of(data_type: DataType) -> Option<NcType> {
        Some(match data_type {
            DataType::Bool | DataType::Int8 => NcType::Byte,
            DataType::UInt8 => NcType::UByte,
            DataType::Int16 => NcType::Short,
            DataType::UInt16 => NcType::UShort,
            DataType::Int32 => NcType::Int,
            DataType::UInt32 => NcType::UInt,
            DataType::Int64 | DataType::DateTime64(_) | DataType::TimeDelta64(_) => NcType::Int64,
            DataType::UInt64 => NcType::UInt64,
            DataType::Float32 => NcType::Float,
            DataType::Float64 => NcType::Double,
            _ => return None,
        })
    }

    /// `v` as a big-endian value of this type, if it is one.
    fn encode(self, v: f64, out: &mut Vec<u8>) -> bool {
        let int = |min: f64, max: f64| v.fract() == 0.0 && (min..=max).contains(&v);
        match self {
            NcType::Byte if int(-128.0, 127.0) => out.push(v as i8 as u8),
            NcType::UByte if int(0.0, 255.0) => out.push(v as u8),
            NcType::Short if int(i16::MIN.into(), i16::MAX.into()) => out.extend((v as i16).to_be_bytes()),
            NcType::UShort if int(0.0, u16::MAX.into()) => out.extend((v as u16).to_be_bytes()),
            NcType::Int if int(i32::MIN.into(), i32::MAX.into()) => out.extend((v as i32).to_be_bytes()),
            NcType::UInt if int(0.0, u32::MAX.into()) => out.extend((v as u32).to_be_bytes()),
            NcType::Int64 if int(i64::MIN as f64, i64::MAX as f64) => out.extend((v as i64).to_be_bytes()),
            NcType::UInt64 if int(0.0, u64::MAX as f64) => out.extend((v as u64).to_be_bytes()),
            NcType::Float => out.extend((v as f32).to_be_bytes()),
            NcType::Double => out.extend(v.to_be_bytes()),
            _ => return false,
        }
        true
    }
}

/// Whether netCDF's naming rules allow `name`: a letter, digit, `_` or
/// any non-ASCII character first; then no control character and no `/`;
/// no trailing space. netCDF-C refuses a file with any other name.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphanumeric() || first == '_' || !first.is_ascii())
        && !name.chars().any(|c| c.is_control() || c == '/')
        && !name.ends_with(char::is_whitespace)
}

/// `name` made valid (see [`valid_name`]): each character the rules forbid
/// where it stands becomes `_`, and trailing spaces go.
pub fn valid_name_for(name: &str) -> std::borrow::Cow<'_, str> {
    if valid_name(name) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out: String = name
        .trim_end_matches(char::is_whitespace)
        .chars()
        .enumerate()
        .map(|(i, c)| match c {
            c if c.is_control() || c == '/' => '_',
            c if i == 0 && c.is_ascii() && !c.is_ascii_alphanumeric() => '_',
            c => c,
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    std::borrow::Cow::Owned(out)
}

/// An attribute: a type and big-endian values.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    name: String,
    nc_type: NcType,
    count: u64,
    values: Vec<u8>,
}

impl Attribute {
    /// Text (`NC_CHAR`, UTF-8).
    pub fn text(name: &str, text: &str) -> Self {
        Self {
            name: name.to_string(),
            nc_type: NcType::Char,
            count: text.len() as u64,
            values: text.as_bytes().to_vec(),
        }
    }

    /// Numbers of `nc_type`; `None` if one is not a value of that type.
    pub fn numbers(name: &str, nc_type: NcType, numbers: &[f64]) -> Option<Self> {
        let mut values = Vec::with_capacity(numbers.len() * nc_type.size());
        for &v in numbers {
            if nc_type == NcType::Char || !nc_type.encode(v, &mut values) {
                return None;
            }
        }
        (!numbers.is_empty()).then(|| Self {
            name: name.to_string(),
            nc_type,
            count: numbers.len() as u64,
            values,
        })
    }

    /// An attribute of JSON: text as `NC_CHAR` (a list of texts joined by
    /// commas), integers as `NC_INT` when they fit, other numbers as
    /// `NC_DOUBLE`, booleans as `NC_BYTE`; `None` for anything else.
    pub fn from_json(name: &str, value: &Value) -> Option<Self> {
        let items: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        if items.is_empty() {
            return None;
        }
        if let Some(texts) = items.iter().map(|v| v.as_str()).collect::<Option<Vec<&str>>>() {
            return Some(Self::text(name, &texts.join(",")));
        }
        if let Some(flags) = items.iter().map(|v| v.as_bool()).collect::<Option<Vec<bool>>>() {
            let flags: Vec<f64> = flags.into_iter().map(|b| f64::from(u8::from(b))).collect();
            return Self::numbers(name, NcType::Byte, &flags);
        }
        let numbers: Vec<f64> = items.iter().map(|v| v.as_f64()).collect::<Option<_>>()?;
        let ints = items
            .iter()
            .all(|v| v.as_i64().is_some_and(|i| i32::try_from(i).is_ok()));
        Self::numbers(name, if ints { NcType::Int } else { NcType::Double }, &numbers)
    }
}

/// A variable: its dimensions (indices into the file's), type and attributes.
#[derive(Debug, Clone)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// Its dimensions: indices into the file's.
    pub dims: Vec<usize>,
    /// Its type.
    pub nc_type: NcType,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// Attributes of a variable of `data_type` with Zarr attributes
/// `attributes` (and v2 `fill_value` `v2_fill`): fill and valid values
/// typed as the variable; datetimes given CF units. With `cf_decoded`
/// (the values are decoded floats, NaN where missing) the packing and
/// missing-value attributes are left out.
pub fn variable_attributes(
    data_type: DataType,
    attributes: &Value,
    v2_fill: &Value,
    cf_decoded: bool,
) -> Vec<Attribute> {
    const PACKING: [&str; 7] = [
        "scale_factor",
        "add_offset",
        "_FillValue",
        "missing_value",
        "valid_min",
        "valid_max",
        "valid_range",
    ];
    let time = matches!(data_type, DataType::DateTime64(_) | DataType::TimeDelta64(_));
    let Some(nc_type) = NcType::of(data_type) else {
        return Vec::new();
    };
    let typed = |name: &str, value: &Value| {
        let items = match value {
            Value::Array(items) => items.iter().collect(),
            one => vec![one],
        };
        let numbers: Option<Vec<f64>> = items
            .iter()
            .map(|v| crate::engine::attribute_number(v, data_type))
            .collect();
        Attribute::numbers(name, nc_type, &numbers?)
    };
    let mut out = Vec::new();
    let map = attributes.as_object();
    for (name, value) in map.into_iter().flatten() {
        let skipped = !valid_name(name)
            || name == "_ARRAY_DIMENSIONS"
            || (cf_decoded && PACKING.contains(&name.as_str()))
            || (time && matches!(name.as_str(), "units" | "calendar" | "_FillValue"))
            || (data_type == DataType::Bool && PACKING.contains(&name.as_str()));
        if skipped {
            continue;
        }
        let attribute = match PACKING[2..].contains(&name.as_str()) {
            true => typed(name, value),
            false => Attribute::from_json(name, value),
        };
        out.extend(attribute);
    }
    let has = |name: &str| map.is_some_and(|m| m.contains_key(name));
    if !cf_decoded && !time && !has("_FillValue") && !v2_fill.is_null() && data_type != DataType::Bool {
        out.extend(typed("_FillValue", v2_fill));
    }
    match data_type {
        DataType::DateTime64(unit) => {
            out.push(Attribute::text(
                "units",
                &format!("{} since 1970-01-01", unit.cf_unit()),
            ));
            out.push(Attribute::text("calendar", "proleptic_gregorian"));
            out.extend(Attribute::numbers("_FillValue", NcType::Int64, &[i64::MIN as f64]));
        }
        DataType::TimeDelta64(unit) => out.push(Attribute::text("units", unit.cf_unit())),
        _ => {}
    }
    out
}

/// Elements of `data_type` (little-endian) as netCDF stores them.
pub fn big_endian(data_type: DataType, data: &[u8]) -> Bytes {
    let mut out = data.to_vec();
    values::to_big_endian(data_type, &mut out);
    Bytes::from(out)
}

const NC_DIMENSION: u32 = 0x0A;
const NC_VARIABLE: u32 = 0x0B;
const NC_ATTRIBUTE: u32 = 0x0C;

/// The netCDF encoder: a file whose last variable's elements (big-endian,
/// as a read made with big-endian output gives them) are streamed in.
pub struct NetCdf {
    head: Bytes,
    tail: Bytes,
    length: u64,
    /// Elements that arrive little-endian, of this type, are swapped.
    swap: Option<DataType>,
}

/// The parts of a file.
struct File<'a> {
    dims: &'a [(String, u64)],
    globals: &'a [Attribute],
    vars: Vec<&'a Variable>,
    cdf5: bool,
}

impl NetCdf {
    /// A file of dimensions `dims` (name, length), global attributes
    /// `globals`, the `coordinates` with their big-endian data, then
    /// `result`, whose elements are streamed in.
    pub fn new(
        dims: &[(String, u64)],
        globals: &[Attribute],
        coordinates: &[(Variable, Bytes)],
        result: &Variable,
    ) -> Result<Self, String> {
        Self::with_results(dims, globals, coordinates, std::slice::from_ref(result))
    }

    /// [`NetCdf::new`] with several results, whose elements are streamed
    /// one after another (every result but the last a whole number of
    /// 4-byte words, so that no padding lies between them).
    pub fn with_results(
        dims: &[(String, u64)],
        globals: &[Attribute],
        coordinates: &[(Variable, Bytes)],
        results: &[Variable],
    ) -> Result<Self, String> {
        if results.is_empty() {
            return Err("a file needs a result variable".into());
        }
        if let Some(v) = results[..results.len() - 1]
            .iter()
            .find(|v| pad(data_bytes(v, dims)) != 0)
        {
            return Err(format!("result '{}' is not a whole number of 4-byte words", v.name));
        }
        let mut vars: Vec<&Variable> = coordinates.iter().map(|(v, _)| v).collect();
        vars.extend(results);
        let sizes: Vec<u64> = vars.iter().map(|v| data_bytes(v, dims)).collect();
        let types = vars
            .iter()
            .flat_map(|v| std::iter::once(v.nc_type).chain(v.attributes.iter().map(|a| a.nc_type)));
        let cdf5 = types.chain(globals.iter().map(|a| a.nc_type)).any(NcType::needs_cdf5)
            || dims.iter().any(|(_, n)| *n > i32::MAX as u64)
            || sizes[..sizes.len() - 1].iter().any(|&n| n > u32::MAX as u64 - 4);
        for (v, (_, data)) in coordinates.iter().enumerate() {
            if data.len() as u64 != sizes[v] {
                return Err(format!(
                    "coordinate '{}' has {} bytes, not {}",
                    vars[v].name,
                    data.len(),
                    sizes[v]
                ));
            }
        }
        let file = File {
            dims,
            globals,
            vars,
            cdf5,
        };
        // The header's length does not depend on the offsets it holds.
        let header_len = file.header(&vec![0; sizes.len()]).len() as u64;
        let mut begins = Vec::with_capacity(sizes.len());
        let mut at = header_len;
        for size in &sizes {
            begins.push(at);
            at += padded(*size);
        }
        let mut head = file.header(&begins);
        for (_, data) in coordinates {
            head.extend_from_slice(data);
            head.resize(head.len() + pad(data.len() as u64), 0);
        }
        let results_bytes: u64 = sizes[coordinates.len()..].iter().sum();
        let last = sizes[sizes.len() - 1];
        Ok(Self {
            length: head.len() as u64 + results_bytes + pad(last) as u64,
            head: Bytes::from(head),
            tail: Bytes::from(vec![0; pad(last)]),
            swap: None,
        })
    }

    /// The same file, for elements of `data_type` that arrive little-endian.
    pub fn swapping(self, data_type: DataType) -> Self {
        Self {
            swap: Some(data_type),
            ..self
        }
    }
}

impl Encoder for NetCdf {
    fn head(&self) -> Bytes {
        self.head.clone()
    }

    fn elements(&self, _start: u64, data: Bytes) -> Result<Bytes, String> {
        Ok(match self.swap {
            Some(data_type) => big_endian(data_type, &data),
            None => data,
        })
    }

    fn tail(&self) -> Bytes {
        self.tail.clone()
    }

    fn length(&self) -> Option<u64> {
        Some(self.length)
    }
}

/// A variable's data bytes, unpadded.
fn data_bytes(var: &Variable, dims: &[(String, u64)]) -> u64 {
    var.dims.iter().map(|&d| dims[d].1).product::<u64>() * var.nc_type.size() as u64
}

fn pad(n: u64) -> usize {
    ((4 - n % 4) % 4) as usize
}

fn padded(n: u64) -> u64 {
    n + pad(n) as u64
}

impl File<'_> {
    /// The header, the variables' data at `begins`.
    fn header(&self, begins: &[u64]) -> Vec<u8> {
        let mut out = b"CDF".to_vec();
        out.push(if self.cdf5 { 5 } else { 2 });
        self.count(&mut out, 0); // numrecs: no record dimension
        match self.dims {
            [] => self.absent(&mut out),
            dims => {
                out.extend(NC_DIMENSION.to_be_bytes());
                self.count(&mut out, dims.len() as u64);
                for (name, len) in dims {
                    self.name(&mut out, name);
                    self.count(&mut out, *len);
                }
            }
        }
        self.attributes(&mut out, self.globals);
        out.extend(NC_VARIABLE.to_be_bytes());
        self.count(&mut out, self.vars.len() as u64);
        for (var, begin) in self.vars.iter().zip(begins) {
            self.name(&mut out, &var.name);
            self.count(&mut out, var.dims.len() as u64);
            for &d in &var.dims {
                self.count(&mut out, d as u64);
            }
            self.attributes(&mut out, &var.attributes);
            out.extend(var.nc_type.code().to_be_bytes());
            let vsize = padded(data_bytes(var, self.dims));
            // CDF-2: a last variable too large for 32 bits says so.
            let vsize = match self.cdf5 {
                true => vsize,
                false => vsize.min(u32::MAX as u64),
            };
            self.count(&mut out, vsize);
            out.extend(begin.to_be_bytes());
        }
        out
    }

    /// A NON_NEG: 32 bits in CDF-2, 64 in CDF-5.
    fn count(&self, out: &mut Vec<u8>, n: u64) {
        match self.cdf5 {
            true => out.extend(n.to_be_bytes()),
            false => out.extend((n as u32).to_be_bytes()),
        }
    }

    fn absent(&self, out: &mut Vec<u8>) {
        out.extend(0u32.to_be_bytes());
        self.count(out, 0);
    }

    fn name(&self, out: &mut Vec<u8>, name: &str) {
        let name = valid_name_for(name);
        self.count(out, name.len() as u64);
        out.extend(name.as_bytes());
        out.resize(out.len() + pad(name.len() as u64), 0);
    }

    fn attributes(&self, out: &mut Vec<u8>, attributes: &[Attribute]) {
        if attributes.is_empty() {
            return self.absent(out);
        }
        out.extend(NC_ATTRIBUTE.to_be_bytes());
        self.count(out, attributes.len() as u64);
        for a in attributes {
            self.name(out, &a.name);
            out.extend(a.nc_type.code().to_be_bytes());
            self.count(out, a.count);
            out.extend(&a.values);
            out.resize(out.len() + pad(a.values.len() as u64), 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(result_type: NcType, globals: &[Attribute]) -> (NetCdf, Vec<u8>) {
        let dims = vec![("y".to_string(), 2), ("x".to_string(), 3)];
        let x = Variable {
            name: "x".into(),
            dims: vec![1],
            nc_type: NcType::Double,
            attributes: vec![Attribute::text("units", "m")],
        };
        let x_data = big_endian(DataType::Float64, &[1.0f64, 2.0, 3.0].map(f64::to_le_bytes).concat());
        let v = Variable {
            name: "v".into(),
            dims: vec![0, 1],
            nc_type: result_type,
            attributes: vec![],
        };
        let nc = NetCdf::new(&dims, globals, &[(x, x_data)], &v).unwrap();
        let head = nc.head().to_vec();
        (nc, head)
    }

    #[test]
    fn headers_follow_the_classic_format() {
        let (nc, head) = file(NcType::Short, &[Attribute::text("title", "t")]);
        assert_eq!(&head[..4], b"CDF\x02");
        // numrecs 0, then the dimension list: tag, 2 dimensions, "y" = 2.
        assert_eq!(&head[4..8], &[0, 0, 0, 0]);
        assert_eq!(&head[8..12], &NC_DIMENSION.to_be_bytes());
        assert_eq!(&head[12..16], &2u32.to_be_bytes());
        assert_eq!(&head[16..24], &[0, 0, 0, 1, b'y', 0, 0, 0]);
        // The x coordinate's data ends the head; 6 shorts (12 bytes) follow, no padding.
        assert_eq!(&head[head.len() - 8..], &3.0f64.to_be_bytes());
        assert_eq!(nc.length(), Some(head.len() as u64 + 12));
        assert!(nc.tail().is_empty());
        // Bytes are padded to 4: 6 of them take 8.
        let (nc, head) = file(NcType::Byte, &[]);
        assert_eq!(nc.tail().len(), 2);
        assert_eq!(nc.length(), Some(head.len() as u64 + 8));
    }

    #[test]
    fn unsigned_and_64_bit_types_make_cdf5() {
        let (_, head) = file(NcType::UInt64, &[]);
        assert_eq!(&head[..4], b"CDF\x05");
        // numrecs is 64 bits in CDF-5.
        assert_eq!(&head[4..12], &[0; 8]);
        assert_eq!(&head[12..16], &NC_DIMENSION.to_be_bytes());
        assert_eq!(&head[16..24], &2u64.to_be_bytes());
    }

    #[test]
    fn attributes_are_typed() {
        let attrs = variable_attributes(
            DataType::Int16,
            &json!({"_FillValue": -9999, "scale_factor": 0.5, "units": "K", "_ARRAY_DIMENSIONS": ["y"], "flags": [1, 2]}),
            &Value::Null,
            false,
        );
        assert_eq!(
            attrs,
            vec![
                Attribute::numbers("_FillValue", NcType::Short, &[-9999.0]).unwrap(),
                Attribute::numbers("scale_factor", NcType::Double, &[0.5]).unwrap(),
                Attribute::text("units", "K"),
                Attribute::numbers("flags", NcType::Int, &[1.0, 2.0]).unwrap(),
            ]
        );
        let decoded = variable_attributes(
            DataType::Float64,
            &json!({"_FillValue": -9999, "scale_factor": 0.5, "units": "K"}),
            &Value::Null,
            true,
        );
        assert_eq!(decoded, vec![Attribute::text("units", "K")]);
        // A v2 fill value becomes _FillValue; one the type cannot hold is left out.
        let v2 = variable_attributes(DataType::UInt8, &json!({}), &json!(255), false);
        assert_eq!(
            v2,
            vec![Attribute::numbers("_FillValue", NcType::UByte, &[255.0]).unwrap()]
        );
        assert!(variable_attributes(DataType::UInt8, &json!({}), &json!(-1), false).is_empty());
        // Names netCDF forbids are left out, whatever their values.
        let named = variable_attributes(
            DataType::Float32,
            &json!({"a/b": 1, "": 2, " lead": 3, "trail ": 4, "bell\u{7}": 5, "-x": 6, "ünits": "K", "_ok": 7, "9a": 8}),
            &Value::Null,
            false,
        );
        let names: Vec<&str> = named.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["ünits", "_ok", "9a"]);
    }

    #[test]
    fn names_are_made_valid() {
        for (name, want) in [
            ("lat", "lat"),
            ("a/b", "a_b"),
            ("-x", "_x"),
            (".hidden", "_hidden"),
            ("tab\tname ", "tab_name"),
            ("", "_"),
            ("  ", "_"),
            ("ü x", "ü x"),
        ] {
            assert_eq!(valid_name_for(name), want, "{name:?}");
            assert!(valid_name(&valid_name_for(name)), "{name:?}");
        }
    }
}
