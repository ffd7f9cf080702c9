//! Elements as values: the little-endian elements of a real data type
//! (bool, integers, floats) read as `f64`, for CF decoding, labels and
//! reductions; text elements as strings, for labels and answers.

use std::borrow::Cow;

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::copy::swap_bytes;
use crate::engine::format::data_type::DataType;
use crate::engine::format::vlen;

/// Whether elements of `data_type` are real numbers (bool, integer, float).
pub(crate) fn is_real(data_type: DataType) -> bool {
    matches!(
        data_type,
        DataType::Bool
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
    )
}

/// The elements of `bytes` (little-endian `data_type`) as `f64`.
pub(crate) fn real_values(data_type: DataType, bytes: &[u8]) -> Result<Vec<f64>> {
    macro_rules! read {
        ($t:ty) => {
            bytes
                .chunks_exact(std::mem::size_of::<$t>())
                .map(|b| <$t>::from_le_bytes(b.try_into().expect("element size")) as f64)
                .collect()
        };
    }
    Ok(match data_type {
        DataType::Bool => bytes.iter().map(|b| f64::from(u8::from(*b != 0))).collect(),
        DataType::Int8 => read!(i8),
        DataType::Int16 => read!(i16),
        DataType::Int32 => read!(i32),
        DataType::Int64 => read!(i64),
        DataType::UInt8 => read!(u8),
        DataType::UInt16 => read!(u16),
        DataType::UInt32 => read!(u32),
        DataType::UInt64 => read!(u64),
        DataType::Float16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        DataType::Float32 => read!(f32),
        DataType::Float64 => read!(f64),
        other => {
            return Err(Error::InvalidRequest(format!(
                "{} elements are not real numbers",
                other.name()
            )))
        }
    })
}

/// The elements of `bytes` (little-endian integers of `data_type`) exactly.
pub(crate) fn int_values(data_type: DataType, bytes: &[u8]) -> Option<Vec<i128>> {
    macro_rules! read {
        ($t:ty) => {
            Some(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|b| <$t>::from_le_bytes(b.try_into().expect("element size")) as i128)
                    .collect(),
            )
        };
    }
    match data_type {
        DataType::Int8 => read!(i8),
        DataType::Int16 => read!(i16),
        DataType::Int32 => read!(i32),
        DataType::Int64 | DataType::DateTime64(_) | DataType::TimeDelta64(_) => read!(i64),
        DataType::UInt8 => read!(u8),
        DataType::UInt16 => read!(u16),
        DataType::UInt32 => read!(u32),
        DataType::UInt64 => read!(u64),
        _ => None,
    }
}

/// The byte width of the numbers an element of `data_type` is made of
/// (complex ones of two, UTF-32 ones of characters), for byte swapping;
/// `None` for bytes and variable-length elements, which have no order.
pub(crate) fn number_width(data_type: DataType) -> Option<usize> {
    match data_type {
        DataType::Complex64 | DataType::FixedUtf32(_) => Some(4),
        DataType::Complex128 => Some(8),
        DataType::Raw(_) | DataType::FixedBytes(_) | DataType::String | DataType::Bytes(_) => None,
        other => Some(other.size()),
    }
}

/// Swap the little-endian elements of `data` to big-endian in place.
pub(crate) fn to_big_endian(data_type: DataType, data: &mut [u8]) {
    if let Some(width) = number_width(data_type) {
        swap_bytes(width, data);
    }
}

/// The elements of a `string` or `fixed_length_utf32` buffer as text, as
/// NumPy shows them (fixed-length ones without trailing NULs); `None` for
/// other types. Invalid UTF-8 or code points are corrupt data.
pub fn text_values(data_type: DataType, data: &[u8]) -> Option<Result<Vec<Cow<'_, str>>>> {
    Some(match data_type {
        DataType::String => vlen::items(data).and_then(|items| {
            items
                .into_iter()
                .map(|b| std::str::from_utf8(b).map(Cow::Borrowed))
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| corrupt("a string element is not UTF-8"))
        }),
        DataType::FixedUtf32(n) => data
            .chunks_exact(n)
            .map(|b| {
                b.chunks_exact(4)
                    .map(|u| char::from_u32(u32::from_le_bytes(u.try_into().expect("4 bytes"))))
                    .collect::<Option<String>>()
                    .map(|t| Cow::Owned(t.trim_end_matches('\0').to_string()))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| corrupt("a fixed_length_utf32 element holds an invalid code point")),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_real_type() {
        assert_eq!(
            real_values(DataType::Int16, &[0xff, 0xff, 2, 0]).unwrap(),
            vec![-1.0, 2.0]
        );
        assert_eq!(real_values(DataType::Bool, &[0, 3]).unwrap(), vec![0.0, 1.0]);
        assert_eq!(
            real_values(DataType::Float16, &half::f16::from_f32(1.5).to_le_bytes()).unwrap(),
            vec![1.5]
        );
        assert!(real_values(DataType::Complex64, &[0; 8]).is_err());
        assert_eq!(
            int_values(DataType::UInt64, &u64::MAX.to_le_bytes()),
            Some(vec![u64::MAX as i128])
        );
        assert!(is_real(DataType::Bool) && !is_real(DataType::String));
    }

    #[test]
    fn swaps_elements_to_big_endian() {
        let mut data = [1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat();
        to_big_endian(DataType::Float32, &mut data);
        assert_eq!(data, [1.5f32.to_be_bytes(), (-2.0f32).to_be_bytes()].concat());
        let mut bytes = vec![1, 2, 3];
        to_big_endian(DataType::UInt8, &mut bytes);
        assert_eq!(bytes, [1, 2, 3]);
        let mut pair = 0x0102u16.to_le_bytes().to_vec();
        to_big_endian(DataType::Int16, &mut pair);
        assert_eq!(pair, [1, 2]);
    }
}
