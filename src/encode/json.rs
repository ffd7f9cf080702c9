//! The JSON document of a region.

use std::borrow::Cow;
use std::fmt::Write;

use base64::Engine;
use bytes::Bytes;

use super::text::{write_element, Style};
use super::Encoder;
use crate::engine::values::text_values;
use crate::engine::{vlen, DataType};

/// The elements of a text or bytes result, as NumPy shows them (trailing
/// NULs of fixed-length types removed); `None` for other types. Errors
/// say what is wrong with the data.
pub(crate) enum Texts<'a> {
    Text(Vec<Cow<'a, str>>),
    Bytes(Vec<&'a [u8]>),
}

pub(crate) fn texts(data_type: DataType, data: &[u8]) -> Result<Option<Texts<'_>>, String> {
    let trim = |b: &[u8]| b.len() - b.iter().rev().take_while(|c| **c == 0).count();
    Ok(Some(match data_type {
        DataType::String | DataType::FixedUtf32(_) => Texts::Text(
            text_values(data_type, data)
                .expect("a text type")
                .map_err(|e| reason(&e))?,
        ),
        DataType::Bytes(_) => Texts::Bytes(vlen::items(data).map_err(|e| reason(&e))?),
        DataType::FixedBytes(n) => Texts::Bytes(data.chunks_exact(n).map(|b| &b[..trim(b)]).collect()),
        _ => return Ok(None),
    }))
}

/// What is wrong with damaged data, without the (empty) key of a codec-level error.
fn reason(e: &crate::engine::Error) -> String {
    match e {
        crate::engine::Error::Corrupt { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// A result's `dimension_names` and `coords` (see `Dataset::result_coords`).
pub type ResultLabels = (Vec<serde_json::Value>, serde_json::Map<String, serde_json::Value>);

/// The JSON document of a region: nested lists in C order, with the
/// result's dimension names and coordinate labels when given.
pub fn json_body(
    data_type: DataType,
    shape: &[u64],
    data: &[u8],
    labels: Option<&ResultLabels>,
) -> Result<String, String> {
    let mut out = json_head(data_type, shape, labels);
    out.reserve(data.len() * 3);
    match texts(data_type, data)? {
        Some(Texts::Text(items)) => {
            let mut items = items.iter();
            nested(&mut out, shape, &mut |out| {
                let item = items.next().expect("element count matches shape");
                out.push_str(&serde_json::to_string(item).expect("a string"));
            });
        }
        Some(Texts::Bytes(items)) => {
            let mut items = items.iter();
            nested(&mut out, shape, &mut |out| {
                let item = items.next().expect("element count matches shape");
                let _ = write!(out, "\"{}\"", base64::engine::general_purpose::STANDARD.encode(item));
            });
        }
        None => {
            let mut elements = data.chunks_exact(data_type.size());
            nested(&mut out, shape, &mut |out| {
                write_element(
                    out,
                    data_type,
                    elements.next().expect("element count matches shape"),
                    Style::Json,
                );
            });
        }
    }
    out.push('}');
    Ok(out)
}

/// A JSON document up to its `data` value: shape, data type, and the
/// dimension names and coordinate labels when given.
fn json_head(data_type: DataType, shape: &[u64], labels: Option<&ResultLabels>) -> String {
    let mut out = String::with_capacity(64);
    let shape_json = serde_json::to_string(shape).expect("shape");
    let _ = write!(out, "{{\"shape\":{shape_json},\"data_type\":\"{}\",", data_type.name());
    if let Some((names, coords)) = labels {
        let _ = write!(
            out,
            "\"dimension_names\":{},\"coords\":{},",
            serde_json::to_string(names).expect("names"),
            serde_json::to_string(coords).expect("coords")
        );
    }
    out.push_str("\"data\":");
    out
}

/// A JSON document written slab by slab, as the slabs of a streamed read
/// arrive: slabs are cut along result dimension `slab_dim`, and every
/// dimension before it has length 1, so the document is a head, each
/// slab's items along `slab_dim` (comma-separated), and a tail.
pub struct JsonSlabs {
    data_type: DataType,
    /// The result's dimensions after `slab_dim`: the shape of one item.
    item_shape: Vec<u64>,
}

impl JsonSlabs {
    /// The encoder, and the document's head and tail, for numeric, bool or
    /// datetime elements (not text or bytes).
    pub fn new(
        data_type: DataType,
        shape: &[u64],
        slab_dim: usize,
        labels: Option<&ResultLabels>,
    ) -> (Self, String, String) {
        let mut head = json_head(data_type, shape, labels);
        head.push_str(&"[".repeat(slab_dim + 1));
        let tail = format!("{}}}", "]".repeat(slab_dim + 1));
        let item_shape = shape[slab_dim + 1..].to_vec();
        (Self { data_type, item_shape }, head, tail)
    }

    /// The bytes of one item (a position along the slab dimension).
    pub fn item_bytes(&self) -> usize {
        self.item_shape.iter().product::<u64>() as usize * self.data_type.size()
    }

    /// Whole items of a slab (C-order little-endian elements) as JSON text,
    /// preceded by a comma unless they are the document's first.
    pub fn slab(&self, data: &[u8], first: bool) -> String {
        let size = self.data_type.size();
        let item_bytes = self.item_bytes();
        // Room for the widest elements: reserved, not touched, so it costs
        // no memory, and the text is never copied to grow.
        let widest = match self.data_type {
            DataType::Float32 | DataType::Float16 => 17,
            DataType::Float64 | DataType::Complex64 => 26,
            DataType::Complex128 => 50,
            DataType::DateTime64(_) => 40,
            _ => 21,
        };
        let elements = data.len() / size.max(1);
        let mut out = String::with_capacity(elements * widest + data.len() / item_bytes.max(1) * 2 + 16);
        let mut elements = data.chunks_exact(size);
        for (i, _) in data.chunks_exact(item_bytes.max(1)).enumerate() {
            if i > 0 || !first {
                out.push(',');
            }
            nested(&mut out, &self.item_shape, &mut |out| {
                write_element(
                    out,
                    self.data_type,
                    elements.next().expect("element count matches shape"),
                    Style::Json,
                );
            });
        }
        out
    }
}

/// The JSON encoder: the whole document at once, or (`slab_dim` given)
/// item by item along the dimension the read's slabs are cut along.
pub struct Json {
    data_type: DataType,
    shape: Vec<u64>,
    labels: Option<ResultLabels>,
    slabs: Option<(JsonSlabs, Bytes, Bytes)>,
}

/// Elements turned into JSON text at a time when JSON streams.
const JSON_PIECE_BYTES: u64 = 1 << 20;

impl Json {
    /// A document of `shape` elements of `data_type`, with `labels` when
    /// given; streamed along result dimension `slab_dim` when given
    /// (fixed-size elements only).
    pub fn new(data_type: DataType, shape: &[u64], labels: Option<ResultLabels>, slab_dim: Option<usize>) -> Self {
        let slabs = slab_dim.map(|dim| {
            let (json, head, tail) = JsonSlabs::new(data_type, shape, dim, labels.as_ref());
            (json, Bytes::from(head), Bytes::from(tail))
        });
        Self {
            data_type,
            shape: shape.to_vec(),
            labels,
            slabs,
        }
    }
}

impl Encoder for Json {
    fn head(&self) -> Bytes {
        self.slabs.as_ref().map_or_else(Bytes::new, |(_, head, _)| head.clone())
    }

    fn elements(&self, start: u64, data: Bytes) -> Result<Bytes, String> {
        match &self.slabs {
            Some((json, _, _)) => Ok(Bytes::from(json.slab(&data, start == 0))),
            None => json_body(self.data_type, &self.shape, &data, self.labels.as_ref()).map(Bytes::from),
        }
    }

    fn tail(&self) -> Bytes {
        self.slabs.as_ref().map_or_else(Bytes::new, |(_, _, tail)| tail.clone())
    }

    fn length(&self) -> Option<u64> {
        None
    }

    fn piece_elements(&self) -> Option<u64> {
        let (json, _, _) = self.slabs.as_ref()?;
        let item_elements = json.item_shape.iter().product::<u64>().max(1);
        let item_bytes = (json.item_bytes() as u64).max(1);
        Some((JSON_PIECE_BYTES / item_bytes).max(1) * item_elements)
    }
}

fn nested(out: &mut String, shape: &[u64], element: &mut dyn FnMut(&mut String)) {
    match shape.split_first() {
        None => element(out),
        Some((&n, rest)) => {
            out.push('[');
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                nested(out, rest, element);
            }
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::npy::{npy_header, npy_text};
    use crate::engine::NAT;

    fn items(items: &[&[u8]]) -> Vec<u8> {
        items
            .iter()
            .flat_map(|i| [&(i.len() as u32).to_le_bytes()[..], i].concat())
            .collect()
    }

    #[test]
    fn text_and_bytes_as_json_and_npy() {
        let data = items(&[b"a", "b\u{e9}".as_bytes(), b""]);
        assert_eq!(
            json_body(DataType::String, &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"string","data":["a","bé",""]}"#
        );
        let npy = npy_text(DataType::String, &[3], &data).unwrap();
        let header_len = 10 + u16::from_le_bytes([npy[8], npy[9]]) as usize;
        let header = String::from_utf8_lossy(&npy[..header_len]).to_string();
        assert!(header.contains("'descr': '<U2'"), "{header}");
        assert_eq!(&npy[header_len..header_len + 8], &[b'a', 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(npy.len(), header_len + 3 * 8);
        // `<U2` elements "ab" and "c" (NUL padded), and `|S3` b"a\0b", b"".
        let utf32: Vec<u8> = "abc\0".chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        assert_eq!(
            json_body(DataType::FixedUtf32(8), &[2], &utf32, None).unwrap(),
            r#"{"shape":[2],"data_type":"fixed_length_utf32","data":["ab","c"]}"#
        );
        assert!(json_body(DataType::FixedUtf32(4), &[1], &[0, 0xd8, 0, 0], None).is_err());
        assert_eq!(
            json_body(DataType::FixedBytes(3), &[2], b"a\0b\0\0\0", None).unwrap(),
            r#"{"shape":[2],"data_type":"null_terminated_bytes","data":["YQBi",""]}"#
        );
        let npy = npy_text(DataType::FixedBytes(3), &[2], b"a\0b\0\0\0").unwrap();
        assert!(String::from_utf8_lossy(&npy).contains("'descr': '|S3'"));
        let empty = npy_text(DataType::Bytes(crate::engine::BytesName::Bytes), &[0], &[]).unwrap();
        assert!(String::from_utf8_lossy(&empty).contains("'descr': '|S1'"));
        assert!(json_body(DataType::String, &[1], &items(&[b"\xff"]), None).is_err());
    }

    #[test]
    fn datetimes_as_json_and_npy() {
        let unit = crate::engine::TimeUnit::parse("s").unwrap();
        let data: Vec<u8> = [0i64, NAT, 86_400].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            json_body(DataType::DateTime64(unit), &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"numpy.datetime64","data":["1970-01-01T00:00:00",null,"1970-01-02T00:00:00"]}"#
        );
        assert_eq!(
            json_body(DataType::TimeDelta64(unit), &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"numpy.timedelta64","data":[0,null,86400]}"#
        );
        let h = String::from_utf8_lossy(&npy_header(DataType::TimeDelta64(unit), &[3])).to_string();
        assert!(h.contains("'descr': '<m8[s]'"), "{h}");
    }

    #[test]
    fn npy_header_is_aligned() {
        for shape in [vec![], vec![3], vec![10, 20, 30]] {
            let h = npy_header(DataType::UInt16, &shape);
            assert_eq!(h.len() % 64, 0);
            assert!(h.ends_with(b"\n"));
        }
        let h = String::from_utf8_lossy(&npy_header(DataType::Complex128, &[2, 3])).to_string();
        assert!(h.contains("'descr': '<c16'") && h.contains("'shape': (2, 3)"), "{h}");
    }

    #[test]
    fn json_values() {
        let data: Vec<u8> = [1.5f64, f64::NAN, f64::NEG_INFINITY, -0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            json_body(DataType::Float64, &[2, 2], &data, None).unwrap(),
            r#"{"shape":[2,2],"data_type":"float64","data":[[1.5,"NaN"],["-Infinity",-0.0]]}"#
        );
        assert_eq!(
            json_body(DataType::UInt64, &[], &u64::MAX.to_le_bytes(), None).unwrap(),
            r#"{"shape":[],"data_type":"uint64","data":18446744073709551615}"#
        );
        assert_eq!(
            json_body(DataType::Bool, &[2], &[1, 0], None).unwrap(),
            r#"{"shape":[2],"data_type":"bool","data":[true,false]}"#
        );
        assert_eq!(
            json_body(DataType::Int8, &[0, 3], &[], None).unwrap(),
            r#"{"shape":[0,3],"data_type":"int8","data":[]}"#
        );
    }
}
