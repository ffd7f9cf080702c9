//! CSV (RFC 4180): a header row of the dimension names and the variable's
//! name, then one row per element in C order: the element's label along
//! each dimension (from its coordinate, else its position), then its value.
//!
//! Missing numbers (NaN) and instants (NaT) are empty cells; infinities
//! are `inf` and `-inf`; instants ISO 8601; text quoted when it must be.

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;

use super::json::{texts, Texts};
use super::text::{csv_cell as escape, write_element, Style};
use super::Encoder;
use crate::engine::{ColumnLabels, DataType, DimSelection, LabelColumn};

/// Elements encoded at a time off the async workers.
const PIECE_ELEMENTS: u64 = 1 << 18;

/// The CSV encoder of a result.
pub struct Csv {
    data_type: DataType,
    shape: Vec<u64>,
    /// Per label column: its result dimension and its cells.
    columns: Vec<(usize, Cells)>,
    header: Bytes,
}

impl Csv {
    /// Rows of a result of `shape` elements of `data_type`, labelled by
    /// `columns`, the values headed `name`.
    pub fn new(data_type: DataType, shape: &[u64], columns: Vec<LabelColumn>, name: &str) -> Self {
        let mut header: Vec<String> = columns.iter().map(|c| escape(&c.name).into_owned()).collect();
        header.push(escape(name).into_owned());
        let columns = columns
            .into_iter()
            .map(|c| {
                let cells = match c.labels {
                    ColumnLabels::Labels(labels) => Cells::Text(labels.iter().map(label_text).collect()),
                    ColumnLabels::Positions(sel) => Cells::Positions(sel),
                };
                (c.dim, cells)
            })
            .collect();
        Self {
            data_type,
            shape: shape.to_vec(),
            columns,
            header: Bytes::from(header.join(",") + "\n"),
        }
    }

    /// The rows of elements `start..start + count`, their values written by `value(out, k)`.
    fn rows(&self, start: u64, count: u64, out: &mut Vec<u8>, value: &mut dyn FnMut(&mut Vec<u8>, usize)) {
        let rank = self.shape.len();
        if count == 0 {
            return;
        }
        // The element's index along each dimension, then counted up.
        let mut index = vec![0u64; rank];
        let mut rest = start;
        for d in (0..rank).rev() {
            index[d] = rest % self.shape[d].max(1);
            rest /= self.shape[d].max(1);
        }
        let last = rank.saturating_sub(1);
        let inner = self.columns.iter().filter(|(dim, _)| *dim == last && rank > 0);
        let inner: Vec<&Cells> = inner.map(|(_, cells)| cells).collect();
        let outer: Vec<&(usize, Cells)> = self
            .columns
            .iter()
            .filter(|(dim, _)| rank == 0 || *dim != last)
            .collect();
        let prefix_of = |index: &[u64]| {
            let mut prefix = Vec::new();
            for (dim, cells) in &outer {
                cells.write(&mut prefix, index[*dim]);
                prefix.push(b',');
            }
            prefix
        };
        let mut prefix = prefix_of(&index);
        for k in 0..count as usize {
            out.extend_from_slice(&prefix);
            for cells in &inner {
                cells.write(out, index[last]);
                out.push(b',');
            }
            value(out, k);
            out.push(b'\n');
            // Next index; the prefix changes only when an outer index does.
            let mut d = rank;
            while d > 0 {
                d -= 1;
                index[d] += 1;
                if index[d] < self.shape[d] || d == 0 {
                    break;
                }
                index[d] = 0;
            }
            if d < last && (k as u64) + 1 < count {
                prefix = prefix_of(&index);
            }
        }
    }
}

impl Encoder for Csv {
    fn head(&self) -> Bytes {
        self.header.clone()
    }

    fn elements(&self, start: u64, data: Bytes) -> Result<Bytes, String> {
        let mut out = Vec::with_capacity(data.len() * 3 + 64);
        match texts(self.data_type, &data)? {
            Some(Texts::Text(items)) => {
                self.rows(start, items.len() as u64, &mut out, &mut |out, k| {
                    out.extend_from_slice(escape(&items[k]).as_bytes())
                });
            }
            Some(Texts::Bytes(items)) => {
                self.rows(start, items.len() as u64, &mut out, &mut |out, k| {
                    let text = base64::engine::general_purpose::STANDARD.encode(items[k]);
                    out.extend_from_slice(text.as_bytes());
                });
            }
            None => {
                let size = self.data_type.size();
                let count = (data.len() / size.max(1)) as u64;
                self.rows(start, count, &mut out, &mut |out, k| {
                    write_element(out, self.data_type, &data[k * size..(k + 1) * size], Style::Csv)
                });
            }
        }
        Ok(Bytes::from(out))
    }

    fn length(&self) -> Option<u64> {
        None
    }

    fn piece_elements(&self) -> Option<u64> {
        Some(PIECE_ELEMENTS)
    }
}

/// A label column's cells: text, or positions written as they are needed.
enum Cells {
    Text(Vec<String>),
    Positions(DimSelection),
}

impl Cells {
    /// The cell of result position `k`.
    fn write(&self, out: &mut Vec<u8>, k: u64) {
        match self {
            Cells::Text(cells) => out.extend_from_slice(cells[k as usize].as_bytes()),
            Cells::Positions(sel) => out.extend_from_slice(itoa::Buffer::new().format(sel.index(k)).as_bytes()),
        }
    }
}

/// A label's cell: text as it is (quoted when it must be), numbers as
/// JSON writes them, a missing instant empty.
fn label_text(label: &Value) -> String {
    match label {
        Value::String(s) if s == "NaN" => String::new(),
        Value::String(s) => escape(s).into_owned(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, dim: usize, labels: Vec<Value>) -> LabelColumn {
        LabelColumn {
            name: name.into(),
            dim,
            labels: ColumnLabels::Labels(labels),
        }
    }

    fn f64s(values: &[f64]) -> Bytes {
        Bytes::from(values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    #[test]
    fn rows_carry_labels_and_values() {
        let columns = vec![
            column("time", 0, vec!["2020-01-01".into(), "2020-01-02".into()]),
            column("x", 1, vec![10.into(), 20.5.into(), "a,b".into()]),
        ];
        let csv = Csv::new(DataType::Float64, &[2, 3], columns, "t");
        let data = f64s(&[1.0, f64::NAN, 2.5, f64::INFINITY, -0.0, 1e300]);
        let whole = csv.whole(data.clone()).unwrap();
        assert_eq!(
            std::str::from_utf8(&whole).unwrap(),
            "time,x,t\n2020-01-01,10,1.0\n2020-01-01,20.5,\n2020-01-01,\"a,b\",2.5\n\
             2020-01-02,10,inf\n2020-01-02,20.5,-0.0\n2020-01-02,\"a,b\",1e300\n"
        );
        // Encoded in pieces from any element, the rows are the same.
        let mut pieces = csv.head().to_vec();
        for (start, end) in [(0, 2), (2, 5), (5, 6)] {
            pieces.extend_from_slice(&csv.elements(start, data.slice(start as usize * 8..end * 8)).unwrap());
        }
        assert_eq!(pieces, whole.to_vec());
    }

    #[test]
    fn scalars_points_and_text() {
        let csv = Csv::new(DataType::Int16, &[], vec![], "v");
        assert_eq!(&csv.whole(Bytes::from(vec![0xff, 0xff])).unwrap()[..], b"v\n-1\n");
        let points = vec![
            column("y", 0, vec![1.into(), 2.into()]),
            column("x", 0, vec![5.into(), 6.into()]),
        ];
        let csv = Csv::new(DataType::UInt8, &[2], points, "v");
        assert_eq!(
            &csv.whole(Bytes::from(vec![7, 8])).unwrap()[..],
            b"y,x,v\n1,5,7\n2,6,8\n"
        );
        let items: Vec<u8> = [&b"say \"hi\""[..], b"ok"]
            .iter()
            .flat_map(|i| [&(i.len() as u32).to_le_bytes()[..], i].concat())
            .collect();
        let csv = Csv::new(
            DataType::String,
            &[2],
            vec![column("i", 0, vec![0.into(), 1.into()])],
            "s",
        );
        assert_eq!(
            &csv.whole(Bytes::from(items)).unwrap()[..],
            b"i,s\n0,\"say \"\"hi\"\"\"\n1,ok\n"
        );
    }
}
