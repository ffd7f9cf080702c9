//! The `packbits` codec (zarr-extensions).
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/packbits>.
//! Example: `{"name": "packbits", "configuration": {"padding_encoding":
//! "first_byte", "first_bit": 0, "last_bit": 11}}`. Each element keeps bits
//! `first_bit..=last_bit` of its little-endian value (each component of a
//! complex number in turn); the kept bits of all elements follow each other
//! in one stream, least significant bit first within each byte, zero-padded
//! to a whole byte. `padding_encoding` `first_byte` or `last_byte` adds a
//! byte giving the number of padding bits. Decoding puts the bits back at
//! `first_bit` and sign-extends signed integers. (numcodecs' `packbits`,
//! most significant bit first, is `numcodecs.packbits`.)

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::ChunkRepr;
use crate::engine::format::data_type::DataType;

/// Where the count of padding bits is stored, if at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Padding {
    None,
    FirstByte,
    LastByte,
}

/// Bits `first_bit..=last_bit` of each element, packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PackBitsCodec {
    padding: Padding,
    first_bit: u32,
    /// Bits kept per component.
    bits: u32,
    /// Bits of one component (1 for bool).
    width: u32,
    components: u32,
    signed: bool,
}

impl PackBitsCodec {
    /// Parse the configuration for chunks of `repr` (accepting the schema's
    /// spellings `start_byte`/`end_byte`, `start_bit`/`end_bit` too).
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        let (width, components, signed) = match repr.data_type {
            DataType::Bool => (1, 1, false),
            // Instants and durations are their signed 64-bit counts.
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::DateTime64(_)
            | DataType::TimeDelta64(_) => (8 * repr.data_type.size() as u32, 1, true),
            DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64 => (8 * repr.data_type.size() as u32, 1, false),
            DataType::Complex64 | DataType::Complex128 => (4 * repr.data_type.size() as u32, 2, false),
            other => return Err(Error::Unsupported(format!("packbits of {}", other.name()))),
        };
        let get = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| config.and_then(|c| c.get(*n)))
                .filter(|v| !v.is_null())
        };
        let padding = match get(&["padding_encoding"]).map(|v| v.as_str()) {
            None | Some(Some("none")) => Padding::None,
            Some(Some("first_byte" | "start_byte")) => Padding::FirstByte,
            Some(Some("last_byte" | "end_byte")) => Padding::LastByte,
            Some(_) => {
                return Err(corrupt(format!(
                    "packbits padding_encoding {}",
                    get(&["padding_encoding"]).unwrap()
                )))
            }
        };
        let bit = |names: &[&str], default: u32| match get(names) {
            None => Ok(default),
            Some(v) => v
                .as_u64()
                .filter(|&b| b < u64::from(width))
                .map(|b| b as u32)
                .ok_or_else(|| corrupt(format!("packbits {} {v} is not a bit of a {width}-bit value", names[0]))),
        };
        let first_bit = bit(&["first_bit", "start_bit"], 0)?;
        let last_bit = bit(&["last_bit", "end_bit"], width - 1)?;
        if last_bit < first_bit {
            return Err(corrupt(format!(
                "packbits last_bit {last_bit} is below first_bit {first_bit}"
            )));
        }
        Ok(Self {
            padding,
            first_bit,
            bits: last_bit - first_bit + 1,
            width,
            components,
            signed: signed && last_bit < width - 1,
        })
    }

    /// Bytes a chunk of `n` elements packs into.
    fn packed_len(&self, n: u64) -> usize {
        let data = (n * u64::from(self.bits * self.components)).div_ceil(8) as usize;
        data + usize::from(self.padding != Padding::None)
    }

    /// The encoded size of chunks of `repr`.
    pub(crate) fn encoded_size(&self, repr: &ChunkRepr) -> usize {
        self.packed_len(repr.num_elements())
    }

    /// Whether every bit of whole-byte components is kept: the bytes
    /// codec's layout.
    fn whole_bytes(&self) -> bool {
        self.first_bit == 0 && self.bits == self.width && self.width.is_multiple_of(8)
    }

    /// The chunk's elements, little-endian. A chunk of whole-byte
    /// components without the padding byte its configuration names is read
    /// as it is: zarrs (0.23) writes such chunks as the bytes codec would,
    /// and its lengths tell the two apart.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        let n = repr.num_elements();
        let padded = self.padding != Padding::None;
        let unpadded = padded && self.whole_bytes() && encoded.len() + 1 == self.packed_len(n);
        if encoded.len() != self.packed_len(n) && !unpadded {
            return Err(corrupt(format!(
                "packbits chunk has {} bytes, expected {} for {n} elements",
                encoded.len(),
                self.packed_len(n)
            )));
        }
        let stream = match (self.padding, unpadded) {
            (Padding::None, _) | (_, true) => &encoded[..],
            (Padding::FirstByte, false) => &encoded[1..],
            (Padding::LastByte, false) => &encoded[..encoded.len() - 1],
        };
        let size = repr.data_type.size() / self.components as usize;
        let mut out = Vec::with_capacity(repr.size_bytes());
        let mask = if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        let mut at = 0usize;
        for _ in 0..n * u64::from(self.components) {
            let mut value = (read_bits(stream, at) & mask) << self.first_bit;
            at += self.bits as usize;
            if self.signed {
                let top = self.first_bit + self.bits;
                if value >> (top - 1) & 1 == 1 {
                    value |= u64::MAX << top;
                }
            }
            if self.width == 1 {
                out.push(u8::from(value != 0));
            } else {
                out.extend_from_slice(&value.to_le_bytes()[..size]);
            }
        }
        Ok(Bytes::from(out))
    }

    /// Pack little-endian elements of `repr`: bits `first_bit..=last_bit`
    /// of each component, least significant first, then the padding count
    /// where `padding_encoding` puts it.
    pub(crate) fn encode(&self, array: &[u8], repr: &ChunkRepr) -> Vec<u8> {
        let n = repr.num_elements();
        let size = repr.data_type.size() / self.components as usize;
        let data_len = (n * u64::from(self.bits * self.components)).div_ceil(8) as usize;
        let mut stream = vec![0u8; data_len + 8];
        let mask = if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        let mut at = 0usize;
        for component in array.chunks_exact(size) {
            let mut word = [0u8; 8];
            word[..size].copy_from_slice(component);
            let value = if self.width == 1 {
                u64::from(component[0] != 0)
            } else {
                (u64::from_le_bytes(word) >> self.first_bit) & mask
            };
            let bits = u128::from(value) << (at % 8);
            for (i, byte) in bits.to_le_bytes().iter().take(9).enumerate() {
                stream[at / 8 + i] |= byte;
            }
            at += self.bits as usize;
        }
        stream.truncate(data_len);
        let padding = (data_len * 8 - at) as u8;
        match self.padding {
            Padding::None => stream,
            Padding::FirstByte => [vec![padding], stream].concat(),
            Padding::LastByte => {
                stream.push(padding);
                stream
            }
        }
    }
}

/// 64 bits of `stream` from bit `at` on (least significant first; bits past
/// the end read as 0).
fn read_bits(stream: &[u8], at: usize) -> u64 {
    let mut window = [0u8; 16];
    let start = at / 8;
    let end = (start + 9).min(stream.len());
    if start < end {
        window[..end - start].copy_from_slice(&stream[start..end]);
    }
    (u128::from_le_bytes(window) >> (at % 8)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(config: Value, dt: DataType, n: u64, encoded: &[u8]) -> Result<Vec<u8>> {
        let repr = ChunkRepr::new(vec![n], dt, vec![0; dt.size()]);
        let codec = PackBitsCodec::from_json(config.as_object(), &repr)?;
        codec.decode(Bytes::copy_from_slice(encoded), &repr).map(|b| b.to_vec())
    }

    #[test]
    fn encodes_what_it_decodes() {
        let cases = [
            (
                json!({"padding_encoding": "first_byte"}),
                DataType::Bool,
                vec![1u8, 0, 0, 1, 1],
            ),
            (
                json!({"padding_encoding": "last_byte", "first_bit": 0, "last_bit": 3}),
                DataType::Int8,
                vec![0xff, 2, 7],
            ),
            (
                json!({"first_bit": 2, "last_bit": 11}),
                DataType::Int16,
                [-8i16, 2044].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            (
                json!({}),
                DataType::Float64,
                [1.5f64, -2.25].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
            (
                json!({"first_bit": 1, "last_bit": 30}),
                DataType::Complex64,
                [4.0f32, -8.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
            ),
        ];
        for (config, dt, elements) in cases {
            let n = (elements.len() / dt.size()) as u64;
            let repr = ChunkRepr::new(vec![n], dt, vec![0; dt.size()]);
            let codec = PackBitsCodec::from_json(config.as_object(), &repr).unwrap();
            let packed = codec.encode(&elements, &repr);
            assert_eq!(packed.len(), codec.encoded_size(&repr), "{config}");
            let back = codec.decode(Bytes::from(packed), &repr).unwrap();
            let again = codec.encode(&back, &repr);
            assert_eq!(codec.decode(Bytes::from(again), &repr).unwrap(), back, "{config}");
            if dt != DataType::Complex64 {
                assert_eq!(back.to_vec(), elements, "{config}");
            }
        }
        // [T,F,F,T,T] with a first padding byte: 3 padding bits, 0b11001 = 0x19.
        let repr = ChunkRepr::new(vec![5], DataType::Bool, vec![0]);
        let codec = PackBitsCodec::from_json(json!({"padding_encoding": "first_byte"}).as_object(), &repr).unwrap();
        assert_eq!(codec.encode(&[1, 0, 0, 1, 1], &repr), vec![3, 0x19]);
    }

    #[test]
    fn whole_byte_chunks_without_their_padding_byte_read_as_zarrs_writes_them() {
        let values: Vec<u8> = [7i64, -9].iter().flat_map(|v| v.to_le_bytes()).collect();
        for padding in ["first_byte", "last_byte"] {
            let config = json!({ "padding_encoding": padding });
            // With the byte the configuration names (the specification), and without it.
            let mut padded = values.clone();
            match padding {
                "first_byte" => padded.insert(0, 0),
                _ => padded.push(0),
            }
            assert_eq!(decode(config.clone(), DataType::Int64, 2, &padded).unwrap(), values);
            assert_eq!(decode(config.clone(), DataType::Int64, 2, &values).unwrap(), values);
            // A byte short of that is still corrupt.
            assert!(decode(config, DataType::Int64, 2, &values[1..]).is_err());
        }
        // Bits left out: the padding byte is required.
        let config = json!({"padding_encoding": "first_byte", "first_bit": 0, "last_bit": 11});
        assert!(decode(config.clone(), DataType::Int16, 2, &[1, 0x20, 0]).is_err());
        assert_eq!(
            decode(config, DataType::Int16, 2, &[0, 1, 0x20, 0]).unwrap(),
            vec![1, 0, 2, 0]
        );
    }

    #[test]
    fn unpacks_lowest_bit_first() {
        // [T,F,F,T,T] with a first padding byte: 3 padding bits, 0b11001 = 0x19.
        assert_eq!(
            decode(json!({"padding_encoding": "first_byte"}), DataType::Bool, 5, &[3, 0x19]).unwrap(),
            vec![1, 0, 0, 1, 1]
        );
        // Signed 4-bit values [-1, 2]: 0xf then 0x2 -> 0x2f.
        let got = decode(json!({"first_bit": 0, "last_bit": 3}), DataType::Int8, 2, &[0x2f]).unwrap();
        assert_eq!(got, vec![0xff, 2]);
        // Bits 2..=11 of int16 values, put back at bit 2 and sign-extended.
        let values = [-8i16, 4092 / 4 * 4];
        let stream: u32 = values
            .iter()
            .enumerate()
            .map(|(i, v)| ((*v as u16 as u32 >> 2) & 0x3ff) << (10 * i))
            .sum();
        let bytes = &stream.to_le_bytes()[..3];
        let got = decode(json!({"first_bit": 2, "last_bit": 11}), DataType::Int16, 2, bytes).unwrap();
        let want: Vec<u8> = [-8i16, ((4092i16 << 4) >> 4)]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(got, want);
        // Default bits of a float: its little-endian bytes.
        let f = 1.5f32.to_le_bytes();
        assert_eq!(decode(json!({}), DataType::Float32, 1, &f).unwrap(), f.to_vec());
        assert!(decode(json!({}), DataType::Float32, 2, &f).is_err(), "short chunk");
        assert!(decode(json!({"last_bit": 40}), DataType::Int16, 1, &[0, 0]).is_err());
        // Instants and durations: their 64-bit counts, low 16 bits kept and
        // sign-extended like an int64's.
        let unit = crate::engine::TimeUnit::parse("s").unwrap();
        let counts = [-3i64, 1000];
        let stream: u32 = counts
            .iter()
            .enumerate()
            .map(|(i, v)| ((*v as u64 as u32) & 0xffff) << (16 * i))
            .sum();
        let want: Vec<u8> = counts.iter().flat_map(|v| v.to_le_bytes()).collect();
        for data_type in [DataType::DateTime64(unit), DataType::TimeDelta64(unit)] {
            let got = decode(
                json!({"first_bit": 0, "last_bit": 15}),
                data_type,
                2,
                &stream.to_le_bytes(),
            )
            .unwrap();
            assert_eq!(got, want, "{}", data_type.name());
        }
    }
}
