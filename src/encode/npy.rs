//! NumPy `.npy` files (format 1.0).

use bytes::Bytes;

use super::json::{texts, Texts};
use super::{Encoder, Raw};
use crate::engine::DataType;

/// The `.npy` type of fixed-size elements (`None` for text and bytes,
/// whose width depends on the result: [`npy_text`]).
fn npy_descr(data_type: DataType) -> Option<String> {
    match data_type.is_text_or_bytes() {
        true => None,
        false => data_type.numpy_dtype(),
    }
}

/// The `.npy` (format 1.0) header for fixed-size elements of `data_type`.
pub fn npy_header(data_type: DataType, shape: &[u64]) -> Vec<u8> {
    npy_header_of(&npy_descr(data_type).expect("a fixed-size data type"), shape)
}

/// The `.npy` (format 1.0) header for an array of `shape` and NumPy type `descr`.
fn npy_header_of(descr: &str, shape: &[u64]) -> Vec<u8> {
    let shape_text = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + length (2) + dict + '\n' is padded to a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out
}

/// A text or bytes result as `.npy`: `<U{n}` or `|S{n}`, `n` the longest
/// element of the result (at least 1).
pub fn npy_text(data_type: DataType, shape: &[u64], data: &[u8]) -> Result<Vec<u8>, String> {
    let texts = texts(data_type, data)?.expect("a text or bytes data type");
    let (descr, width, elements): (String, usize, Vec<Vec<u8>>) = match texts {
        Texts::Text(items) => {
            let n = items.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
            let utf32 = items
                .iter()
                .map(|s| s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect())
                .collect();
            (format!("<U{n}"), n * 4, utf32)
        }
        Texts::Bytes(items) => {
            let n = items.iter().map(|b| b.len()).max().unwrap_or(0).max(1);
            (format!("|S{n}"), n, items.iter().map(|b| b.to_vec()).collect())
        }
    };
    let mut out = npy_header_of(&descr, shape);
    for mut element in elements {
        element.resize(width, 0);
        out.extend(element);
    }
    Ok(out)
}

/// The `.npy` encoder of a result of `data_type` and `shape`.
pub fn npy(data_type: DataType, shape: &[u64]) -> Box<dyn Encoder> {
    match npy_descr(data_type) {
        Some(_) => {
            let bytes = shape.iter().product::<u64>() * data_type.size() as u64;
            Box::new(Raw::new(npy_header(data_type, shape), bytes))
        }
        None => Box::new(NpyText {
            data_type,
            shape: shape.to_vec(),
        }),
    }
}

/// Text or bytes as `.npy`: the width is the longest element's, known
/// once the whole result is read.
struct NpyText {
    data_type: DataType,
    shape: Vec<u64>,
}

impl Encoder for NpyText {
    fn elements(&self, _start: u64, data: Bytes) -> Result<Bytes, String> {
        npy_text(self.data_type, &self.shape, &data).map(Bytes::from)
    }

    fn length(&self) -> Option<u64> {
        None
    }
}
