//! OPeNDAP DAP2's ASCII answer (`.ascii`), one array at a time, as libdap
//! writes it: `name, v` for a scalar; `name[n]` then the values for 1-D;
//! `name[n][m]` then `[i], v, v` rows for more dimensions; a blank line
//! after each. Each value is the text of what `.dods` sends (so ASCII and
//! binary answers agree): integers, shortest floats, quoted strings.

use std::fmt::Write as _;

use bytes::Bytes;

use super::xdr::{self, DapType};
use super::Encoder;
use crate::engine::DataType;

/// Elements written at a time off the async workers.
const PIECE_ELEMENTS: u64 = 1 << 16;

/// An array's values as ASCII rows.
pub struct AsciiArray {
    data_type: DataType,
    dap: DapType,
    shape: Vec<u64>,
    heading: String,
}

impl AsciiArray {
    /// The rows of an array of `shape` and `data_type` named `name`.
    pub fn new(name: &str, data_type: DataType, dap: DapType, shape: Vec<u64>) -> Self {
        let mut heading = name.to_string();
        match shape.is_empty() {
            true => heading.push_str(", "),
            false => {
                for n in &shape {
                    let _ = write!(heading, "[{n}]");
                }
                heading.push('\n');
            }
        }
        Self {
            data_type,
            dap,
            shape,
            heading,
        }
    }

    fn count(&self) -> u64 {
        self.shape.iter().product()
    }

    /// What goes before element `at`: a row's index, or a separator.
    fn before(&self, out: &mut String, at: u64) {
        let row = self.shape.last().copied().unwrap_or(1).max(1);
        if self.shape.len() > 1 && at.is_multiple_of(row) {
            if at > 0 {
                out.push('\n');
            }
            let mut rest = at / row;
            let mut index = Vec::with_capacity(self.shape.len() - 1);
            for n in self.shape[..self.shape.len() - 1].iter().rev() {
                index.push(rest % n);
                rest /= n;
            }
            for i in index.iter().rev() {
                let _ = write!(out, "[{i}]");
            }
            out.push_str(", ");
        } else if at > 0 {
            out.push_str(", ");
        }
    }
}

impl Encoder for AsciiArray {
    fn head(&self) -> Bytes {
        Bytes::from(self.heading.clone())
    }

    fn elements(&self, start: u64, data: Bytes) -> Result<Bytes, String> {
        let mut out = String::with_capacity(data.len() * 3);
        let mut at = start;
        let mut value = |out: &mut String, write: &mut dyn FnMut(&mut String)| {
            self.before(out, at);
            write(out);
            at += 1;
        };
        if self.dap == DapType::String {
            let texts = crate::engine::values::text_values(self.data_type, &data)
                .expect("text types have text values")
                .map_err(|e| e.to_string())?;
            for text in texts.iter() {
                value(&mut out, &mut |out| out.push_str(&quoted(text)));
            }
            return Ok(Bytes::from(out));
        }
        // The values `.dods` sends, read back.
        let mut wire = Vec::new();
        xdr::append_elements(self.data_type, &data, &mut wire)?;
        let be4 = |b: &[u8]| -> [u8; 4] { b.try_into().expect("4 bytes") };
        let mut integer = itoa::Buffer::new();
        match self.dap {
            DapType::Byte => {
                for b in &wire {
                    value(&mut out, &mut |out| out.push_str(integer.format(*b)));
                }
            }
            DapType::Int16 | DapType::Int32 => {
                for b in wire.chunks_exact(4) {
                    value(&mut out, &mut |out| {
                        out.push_str(integer.format(i32::from_be_bytes(be4(b))))
                    });
                }
            }
            DapType::UInt16 | DapType::UInt32 => {
                for b in wire.chunks_exact(4) {
                    value(&mut out, &mut |out| {
                        out.push_str(integer.format(u32::from_be_bytes(be4(b))))
                    });
                }
            }
            DapType::Float32 => {
                for b in wire.chunks_exact(4) {
                    let v = f32::from_be_bytes(be4(b));
                    value(&mut out, &mut |out| {
                        let _ = write!(out, "{v:?}");
                    });
                }
            }
            DapType::Float64 => {
                for b in wire.chunks_exact(8) {
                    let v = f64::from_be_bytes(b.try_into().expect("8 bytes"));
                    value(&mut out, &mut |out| {
                        let _ = write!(out, "{v:?}");
                    });
                }
            }
            DapType::String => unreachable!("written above"),
        }
        Ok(Bytes::from(out))
    }

    fn tail(&self) -> Bytes {
        match self.count() {
            0 if !self.shape.is_empty() => Bytes::from_static(b"\n"),
            _ => Bytes::from_static(b"\n\n"),
        }
    }

    fn length(&self) -> Option<u64> {
        None
    }

    /// Strings are not cut into pieces (their elements vary in size).
    fn piece_elements(&self) -> Option<u64> {
        (self.dap != DapType::String).then_some(PIECE_ELEMENTS)
    }
}

/// A float as the shortest text that reads back to it (`NaN`, `inf`).
pub fn float_text(v: f64, single: bool) -> String {
    match single {
        true => format!("{:?}", v as f32),
        false => format!("{v:?}"),
    }
}

/// A DAP2 string (a value, a DAS string, an error's message): quoted, with
/// `"` and `\` escaped, and control characters other than tab and newline
/// as libdap writes them (`\ooo`).
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(array: &AsciiArray, data: &[u8]) -> String {
        let mut out = String::from_utf8(array.head().to_vec()).unwrap();
        // In pieces of one element and of the rest: rows do not depend on
        // where a piece starts.
        let size = array.data_type.size();
        out += std::str::from_utf8(&array.elements(0, Bytes::copy_from_slice(&data[..size])).unwrap()).unwrap();
        out += std::str::from_utf8(&array.elements(1, Bytes::copy_from_slice(&data[size..])).unwrap()).unwrap();
        out + std::str::from_utf8(&array.tail()).unwrap()
    }

    #[test]
    fn rows_name_their_index_wherever_a_piece_starts() {
        let values: Vec<u8> = (0..6i16).flat_map(|v| (v - 2).to_le_bytes()).collect();
        let array = AsciiArray::new("v", DataType::Int16, DapType::Int16, vec![2, 3]);
        assert_eq!(text(&array, &values), "v[2][3]\n[0], -2, -1, 0\n[1], 1, 2, 3\n\n");
        let array = AsciiArray::new("v", DataType::Int16, DapType::Int16, vec![6]);
        assert_eq!(text(&array, &values), "v[6]\n-2, -1, 0, 1, 2, 3\n\n");
        let floats: Vec<u8> = [0.1f32, f32::NAN].iter().flat_map(|v| v.to_le_bytes()).collect();
        let array = AsciiArray::new("f", DataType::Float32, DapType::Float32, vec![2]);
        assert_eq!(text(&array, &floats), "f[2]\n0.1, NaN\n\n");
        let scalar = AsciiArray::new("s", DataType::Int16, DapType::Int16, vec![]);
        let one = scalar.elements(0, Bytes::copy_from_slice(&values[..2])).unwrap();
        assert_eq!([scalar.head(), one, scalar.tail()].concat(), b"s, -2\n\n");
        let empty = AsciiArray::new("e", DataType::Int16, DapType::Int16, vec![0]);
        assert_eq!([empty.head(), empty.tail()].concat(), b"e[0]\n\n");
    }
}
