//! NumPy numeric dtypes as numcodecs filters name them (`"<i2"`, `">f8"`,
//! `"|u1"`), and casts between them with NumPy's `astype` semantics: ints
//! wrap, floats truncate toward zero into ints (out of range as NumPy
//! does on x86), ints round to the nearest float.

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::array_to_bytes::bytes::Endian;
use crate::engine::format::data_type::DataType;

/// A numeric NumPy dtype: its element type and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumType {
    pub(crate) data_type: DataType,
    pub(crate) endian: Endian,
}

/// Elements read from a buffer: exact integers, or floats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Values {
    Int(Vec<i128>),
    Float(Vec<f64>),
}

impl NumType {
    /// Parse a NumPy type string (`<u2`, `>f8`, `|b1`, `<c16`, `u1`, ...)
    /// or name (`int32`, `float64`, `bool`, as zarr-python 3 writes them in
    /// `numcodecs.*` configurations); only bool, integer, float and complex
    /// types. Without a byte order it is native (little-endian).
    pub(crate) fn parse(typestr: &str) -> Result<Self> {
        let unsupported = || Error::Unsupported(format!("dtype \"{typestr}\""));
        let (endian, rest) = match typestr.as_bytes().first() {
            Some(b'<' | b'|' | b'=') => (Endian::Little, &typestr[1..]),
            Some(b'>') => (Endian::Big, &typestr[1..]),
            _ => (Endian::Little, typestr),
        };
        // A name as zarr.json writes it (`int32`), if it is a numeric one.
        let named = DataType::from_json(&serde_json::Value::String(rest.to_string()))
            .ok()
            .filter(|t| !matches!(t, DataType::Raw(_) | DataType::String | DataType::Bytes(_)));
        let data_type = match named {
            Some(t) => t,
            _ => {
                let mut chars = rest.chars();
                let kind = chars.next().ok_or_else(unsupported)?;
                let size: usize = chars.as_str().parse().map_err(|_| unsupported())?;
                match (kind, size) {
                    ('b', 1) | ('?', 1) => DataType::Bool,
                    ('i', 1) => DataType::Int8,
                    ('i', 2) => DataType::Int16,
                    ('i', 4) => DataType::Int32,
                    ('i', 8) => DataType::Int64,
                    ('u', 1) => DataType::UInt8,
                    ('u', 2) => DataType::UInt16,
                    ('u', 4) => DataType::UInt32,
                    ('u', 8) => DataType::UInt64,
                    ('f', 2) => DataType::Float16,
                    ('f', 4) => DataType::Float32,
                    ('f', 8) => DataType::Float64,
                    ('c', 8) => DataType::Complex64,
                    ('c', 16) => DataType::Complex128,
                    _ => return Err(unsupported()),
                }
            }
        };
        Ok(Self { data_type, endian })
    }

    fn size(&self) -> usize {
        self.data_type.size()
    }

    /// Whether this is a float type.
    pub(crate) fn is_float(&self) -> bool {
        matches!(
            self.data_type,
            DataType::Float16 | DataType::Float32 | DataType::Float64
        )
    }

    /// Whether casts and arithmetic apply (not complex).
    fn check_real(&self, filter: &str) -> Result<()> {
        match self.data_type {
            DataType::Complex64 | DataType::Complex128 | DataType::Raw(_) => Err(Error::Unsupported(format!(
                "{filter} filter on {}",
                self.data_type.name()
            ))),
            _ => Ok(()),
        }
    }

    /// The elements of `buf` (its length must be a whole number of them).
    pub(crate) fn read(&self, buf: &[u8], filter: &str) -> Result<Values> {
        self.check_real(filter)?;
        let size = self.size();
        if !buf.len().is_multiple_of(size) {
            return Err(corrupt(format!(
                "{filter}: {} bytes are not whole {} elements",
                buf.len(),
                self.data_type.name()
            )));
        }
        let element = |chunk: &[u8]| -> [u8; 8] {
            let mut le = [0u8; 8];
            le[..size].copy_from_slice(chunk);
            if self.endian == Endian::Big {
                le[..size].reverse();
            }
            le
        };
        let words = buf.chunks_exact(size).map(element);
        Ok(match self.data_type {
            DataType::Float16 => {
                Values::Float(words.map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64()).collect())
            }
            DataType::Float32 => Values::Float(
                words
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
                    .collect(),
            ),
            DataType::Float64 => Values::Float(words.map(f64::from_le_bytes).collect()),
            dt => {
                let signed = matches!(dt, DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64);
                let bits = 8 * size as u32;
                Values::Int(
                    words
                        .map(|b| {
                            let u = u64::from_le_bytes(b) as i128;
                            if signed && bits < 128 && (u >> (bits - 1)) & 1 == 1 {
                                u - (1i128 << bits)
                            } else {
                                u
                            }
                        })
                        .collect(),
                )
            }
        })
    }

    /// `values` cast to this type, in its byte order.
    pub(crate) fn write(&self, values: &Values, filter: &str) -> Result<Vec<u8>> {
        self.check_real(filter)?;
        let size = self.size();
        let n = match values {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
        };
        let mut out = Vec::with_capacity(n * size);
        for i in 0..n {
            let mut le = match (values, self.is_float()) {
                (Values::Float(v), true) => self.float_bytes(v[i]),
                (Values::Int(v), true) => self.float_bytes(v[i] as f64),
                (Values::Int(v), false) => self.int_bytes(v[i]),
                (Values::Float(v), false) => self.int_bytes(float_to_int(v[i], self.data_type)),
            };
            if self.endian == Endian::Big {
                le.reverse();
            }
            out.extend_from_slice(&le);
        }
        Ok(out)
    }

    fn float_bytes(&self, f: f64) -> Vec<u8> {
        match self.data_type {
            DataType::Float16 => half::f16::from_f64(f).to_le_bytes().to_vec(),
            DataType::Float32 => (f as f32).to_le_bytes().to_vec(),
            _ => f.to_le_bytes().to_vec(),
        }
    }

    /// The low bytes of `v` (integers wrap, as NumPy's casts do).
    fn int_bytes(&self, v: i128) -> Vec<u8> {
        if self.data_type == DataType::Bool {
            return vec![u8::from(v != 0)];
        }
        v.to_le_bytes()[..self.size()].to_vec()
    }

    /// Round a float to this type's precision (for sums kept in the type).
    pub(crate) fn round(&self, f: f64) -> f64 {
        match self.data_type {
            DataType::Float16 => half::f16::from_f64(f).to_f64(),
            DataType::Float32 => f as f32 as f64,
            _ => f,
        }
    }

    /// Wrap an integer to this type's range (for sums kept in the type).
    pub(crate) fn wrap(&self, v: i128) -> i128 {
        if self.is_float() || self.data_type == DataType::Bool {
            return v;
        }
        let bits = 8 * self.size() as u32;
        let modulus = 1i128 << bits;
        let u = v.rem_euclid(modulus);
        let signed = matches!(
            self.data_type,
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
        );
        if signed && u >= modulus / 2 {
            u - modulus
        } else {
            u
        }
    }
}

/// A float cast to an integer type as NumPy casts on x86: toward zero,
/// wrapping (see below).
fn float_to_int(f: f64, data_type: DataType) -> i128 {
    if data_type == DataType::UInt64 && (0.0..2f64.powi(64)).contains(&f) {
        return i128::from(f as u64);
    }
    if data_type == DataType::Bool {
        return i128::from(f != 0.0);
    }
    // Truncate to a 32-bit integer (64-bit for 32-bit unsigned and 64-bit
    // targets), the minimum when out of its range or NaN, then keep the
    // target's low bytes.
    let bits = if data_type.size() < 4 || data_type == DataType::Int32 {
        31
    } else {
        63
    };
    let wide = if f.abs() < 2f64.powi(bits) {
        f.trunc() as i64
    } else {
        -(1i64 << bits)
    };
    NumType {
        data_type,
        endian: Endian::Little,
    }
    .wrap(i128::from(wide))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typestrs_parse() {
        let little = NumType::parse("<u2").unwrap();
        assert_eq!((little.data_type, little.endian), (DataType::UInt16, Endian::Little));
        let big = NumType::parse(">f8").unwrap();
        assert_eq!((big.data_type, big.endian), (DataType::Float64, Endian::Big));
        assert_eq!(NumType::parse("|b1").unwrap().data_type, DataType::Bool);
        assert_eq!(NumType::parse("u1").unwrap().data_type, DataType::UInt8);
        assert_eq!(NumType::parse("float32").unwrap().data_type, DataType::Float32);
        assert_eq!(NumType::parse(">int16").unwrap().endian, Endian::Big);
        for bad in ["<U5", "|O", "<M8[ns]", "int3", "<i3", "", "string"] {
            assert!(matches!(NumType::parse(bad), Err(Error::Unsupported(_))), "{bad}");
        }
    }

    #[test]
    fn values_round_trip_in_both_byte_orders() {
        for typestr in ["<i2", ">i2", "<u8", ">f4", "<f8", ">i8", "|i1"] {
            let t = NumType::parse(typestr).unwrap();
            let bytes: Vec<u8> = (0..t.size() as u8 * 4).map(|b| b.wrapping_mul(37)).collect();
            let values = t.read(&bytes, "test").unwrap();
            assert_eq!(t.write(&values, "test").unwrap(), bytes, "{typestr}");
        }
    }

    #[test]
    fn casts_follow_numpy() {
        let i8t = NumType::parse("|i1").unwrap();
        assert_eq!(i8t.write(&Values::Int(vec![130, -129]), "t").unwrap(), vec![130u8, 127]);
        assert_eq!(i8t.write(&Values::Float(vec![-2.7, 2.7]), "t").unwrap(), vec![254u8, 2]);
        assert_eq!(i8t.wrap(200), -56);
        // Out of range as NumPy gives it on x86 (`np.array(...).astype(...)`).
        let u1 = NumType::parse("|u1").unwrap();
        let wild = Values::Float(vec![260.0, -3.5, 1e10, f64::NAN, 70000.7]);
        assert_eq!(u1.write(&wild, "t").unwrap(), vec![4, 253, 0, 0, 112]);
        let i2 = NumType::parse("<i2").unwrap();
        let got = i2
            .write(&Values::Float(vec![260.0, 1e10, f64::NAN, 70000.7]), "t")
            .unwrap();
        assert_eq!(
            got,
            [260i16, 0, 0, 4464]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>()
        );
        let i8 = NumType::parse("<i8").unwrap();
        assert_eq!(
            i8.write(&Values::Float(vec![f64::NAN]), "t").unwrap(),
            i64::MIN.to_le_bytes()
        );
        let u8t = NumType::parse("<u8").unwrap();
        assert_eq!(
            u8t.write(&Values::Float(vec![1e19]), "t").unwrap(),
            10_000_000_000_000_000_000u64.to_le_bytes()
        );
        let f4 = NumType::parse("<f4").unwrap();
        assert_eq!(
            f4.read(&f4.write(&Values::Int(vec![3]), "t").unwrap(), "t").unwrap(),
            Values::Float(vec![3.0])
        );
    }
}
