//! numcodecs' checksum codecs: `crc32`, `adler32`, `crc32c`, `fletcher32`
//! and `jenkins_lookup3` (Zarr v2 filters or compressors; `numcodecs.<id>`
//! in Zarr v3).
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/checksum32.html>.
//! Examples: `{"id": "crc32", "location": "start"}`, `{"id": "fletcher32"}`,
//! `{"id": "jenkins_lookup3", "initval": 0, "prefix": null}`. The encoded
//! form is the data with a 4-byte little-endian checksum before it
//! (`location` `start`, the default of `crc32` and `adler32`) or after it
//! (`end`; always for `fletcher32` and `jenkins_lookup3`, the default of
//! `crc32c`). The checksum is verified on every read. The Zarr v3 `crc32c`
//! codec (<https://zarr-specs.readthedocs.io/en/latest/v3/codecs/crc32c/index.html>)
//! is numcodecs' `crc32c` at the end.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};

/// Which checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Crc32,
    Adler32,
    Crc32c,
    Fletcher32,
    JenkinsLookup3 { initval: u32 },
}

/// A checksum before or after the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChecksumCodec {
    algorithm: Algorithm,
    at_start: bool,
    /// `jenkins_lookup3`: bytes hashed before the data (not stored).
    prefix: Vec<u8>,
}

impl ChecksumCodec {
    /// The ids this module decodes.
    pub(crate) const IDS: &'static [&'static str] = &["crc32", "adler32", "crc32c", "fletcher32", "jenkins_lookup3"];

    /// The codec `id` with its numcodecs configuration.
    pub(crate) fn from_config(id: &str, config: &Map<String, Value>) -> Result<Self> {
        let algorithm = match id {
            "crc32" => Algorithm::Crc32,
            "adler32" => Algorithm::Adler32,
            "crc32c" => Algorithm::Crc32c,
            "fletcher32" => Algorithm::Fletcher32,
            _ => Algorithm::JenkinsLookup3 {
                initval: match config.get("initval") {
                    None | Some(Value::Null) => 0,
                    Some(v) => v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| corrupt(format!("jenkins_lookup3 initval {v}")))?,
                },
            },
        };
        let at_start = match (algorithm, config.get("location")) {
            (Algorithm::Crc32 | Algorithm::Adler32 | Algorithm::Crc32c, Some(Value::String(s))) if s == "start" => true,
            (Algorithm::Crc32 | Algorithm::Adler32 | Algorithm::Crc32c, Some(Value::String(s))) if s == "end" => false,
            (Algorithm::Crc32 | Algorithm::Adler32, None | Some(Value::Null)) => true,
            (_, None | Some(Value::Null)) => false,
            (_, Some(other)) => return Err(corrupt(format!("{id} location {other}"))),
        };
        let prefix = match config.get("prefix") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) if matches!(algorithm, Algorithm::JenkinsLookup3 { .. }) => s.as_bytes().to_vec(),
            Some(Value::Array(items)) if matches!(algorithm, Algorithm::JenkinsLookup3 { .. }) => items
                .iter()
                .map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect::<Option<_>>()
                .ok_or_else(|| corrupt(format!("{id} prefix {}", Value::Array(items.clone()))))?,
            Some(other) => return Err(corrupt(format!("{id} prefix {other}"))),
        };
        Ok(Self {
            algorithm,
            at_start,
            prefix,
        })
    }

    /// The name in errors.
    fn name(&self) -> &'static str {
        match self.algorithm {
            Algorithm::Crc32 => "crc32",
            Algorithm::Adler32 => "adler32",
            Algorithm::Crc32c => "crc32c",
            Algorithm::Fletcher32 => "fletcher32",
            Algorithm::JenkinsLookup3 { .. } => "jenkins_lookup3",
        }
    }

    /// The checksum of `data`.
    fn checksum(&self, data: &[u8]) -> u32 {
        match self.algorithm {
            Algorithm::Crc32 => {
                let mut crc = flate2::Crc::new();
                crc.update(data);
                crc.sum()
            }
            Algorithm::Adler32 => adler32(data),
            Algorithm::Crc32c => crc32c::crc32c(data),
            Algorithm::Fletcher32 => fletcher32(data),
            // The prefix (never set in practice) is hashed before the data.
            Algorithm::JenkinsLookup3 { initval } if self.prefix.is_empty() => lookup3::hash(data, initval),
            Algorithm::JenkinsLookup3 { initval } => lookup3::hash(&[&self.prefix[..], data].concat(), initval),
        }
    }

    /// Add the checksum where the configuration puts it.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Vec<u8> {
        let sum = self.checksum(decoded).to_le_bytes();
        let mut out = Vec::with_capacity(decoded.len() + 4);
        match self.at_start {
            true => {
                out.extend_from_slice(&sum);
                out.extend_from_slice(decoded);
            }
            false => {
                out.extend_from_slice(decoded);
                out.extend_from_slice(&sum);
            }
        }
        out
    }

    /// Verify and strip the checksum.
    pub(crate) fn decode(&self, encoded: Bytes) -> Result<Bytes> {
        if encoded.len() < 4 {
            return Err(corrupt(format!(
                "{}: {} bytes is too short for a checksum",
                self.name(),
                encoded.len()
            )));
        }
        let n = encoded.len() - 4;
        let (stored, data) = match self.at_start {
            true => (&encoded[..4], encoded.slice(4..)),
            false => (&encoded[n..], encoded.slice(..n)),
        };
        let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
        let actual = self.checksum(&data);
        if stored != actual {
            return Err(corrupt(format!(
                "{} checksum mismatch: stored {stored:#010x}, computed {actual:#010x}",
                self.name()
            )));
        }
        Ok(data)
    }
}

/// Adler-32 (RFC 1950).
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that cannot overflow b before the modulo.
    for block in data.chunks(5552) {
        for &byte in block {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// Fletcher-32 as HDF5 (and numcodecs) compute it: over big-endian 16-bit
/// words, a trailing odd byte as the high byte of a last word, both sums
/// folded to 16 bits.
fn fletcher32(data: &[u8]) -> u32 {
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = data.chunks_exact(2);
    let odd = words.remainder().first().copied();
    // 360 words at a time keep both sums inside 32 bits.
    for block in data[..data.len() & !1].chunks(720) {
        for w in block.chunks_exact(2) {
            sum1 += (u32::from(w[0]) << 8) | u32::from(w[1]);
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if let Some(byte) = odd {
        sum1 += u32::from(byte) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
    (sum2 << 16) | sum1
}

/// Bob Jenkins' lookup3 `hashlittle` (2006, public domain), fed in pieces.
mod lookup3 {
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }

    fn finalize(a: &mut u32, b: &mut u32, c: &mut u32) {
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(14));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(11));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(25));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(16));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(4));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(14));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(24));
    }

    /// `hashlittle(data, initval)`.
    pub(super) fn hash(data: &[u8], initval: u32) -> u32 {
        let start = 0xdead_beefu32.wrapping_add(data.len() as u32).wrapping_add(initval);
        let (mut a, mut b, mut c) = (start, start, start);
        let word = |w: &[u8]| {
            let mut le = [0u8; 4];
            le[..w.len()].copy_from_slice(w);
            u32::from_le_bytes(le)
        };
        let mut rest = data;
        // Every 12-byte block but the last is mixed; the last (1 to 12
        // bytes, zero-padded) goes to the final mix.
        while rest.len() > 12 {
            a = a.wrapping_add(word(&rest[0..4]));
            b = b.wrapping_add(word(&rest[4..8]));
            c = c.wrapping_add(word(&rest[8..12]));
            mix(&mut a, &mut b, &mut c);
            rest = &rest[12..];
        }
        if rest.is_empty() {
            return c;
        }
        let part = |from: usize| word(&rest[from.min(rest.len())..(from + 4).min(rest.len())]);
        a = a.wrapping_add(part(0));
        b = b.wrapping_add(part(4));
        c = c.wrapping_add(part(8));
        finalize(&mut a, &mut b, &mut c);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(id: &str, config: Value) -> ChecksumCodec {
        ChecksumCodec::from_config(id, config.as_object().unwrap()).unwrap()
    }

    #[test]
    fn known_values() {
        // zlib.crc32 and zlib.adler32 of b"hello world".
        assert_eq!(codec("crc32", json!({})).checksum(b"hello world"), 0x0d4a_1185);
        assert_eq!(adler32(b"hello world"), 0x1a0b_045d);
        // lookup3's own test vectors (hashlittle of "" and "Four score...").
        let h = lookup3::hash;
        assert_eq!(h(b"", 0), 0xdead_beef);
        assert_eq!(h(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(h(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(h(b"Four score and seven years ago", 1), 0xcd62_8161);
    }

    /// The v3 `crc32c` codec: the data, then its CRC-32C little-endian.
    #[test]
    fn crc32c_verifies() {
        let c = codec("crc32c", json!({}));
        let mut data = b"hello zarr".to_vec();
        data.extend(crc32c::crc32c(b"hello zarr").to_le_bytes());
        assert_eq!(&c.decode(Bytes::from(data.clone())).unwrap()[..], b"hello zarr");
        data[0] ^= 1;
        assert!(c.decode(Bytes::from(data)).is_err());
        assert!(c.decode(Bytes::from_static(b"abc")).is_err());
    }

    #[test]
    fn verifies_at_either_end() {
        let data = b"some chunk bytes".to_vec();
        for (id, config, at_start) in [
            ("crc32", json!({}), true),
            ("crc32", json!({"location": "end"}), false),
            ("adler32", json!({"location": "start"}), true),
            ("crc32c", json!({}), false),
            ("fletcher32", json!({}), false),
            ("jenkins_lookup3", json!({"initval": 7, "prefix": null}), false),
        ] {
            let c = codec(id, config);
            let sum = c.checksum(&data).to_le_bytes();
            let encoded = if at_start {
                [&sum[..], &data].concat()
            } else {
                [&data[..], &sum].concat()
            };
            assert_eq!(c.decode(Bytes::from(encoded.clone())).unwrap(), data, "{id}");
            let mut flipped = encoded;
            flipped[5] ^= 0x10;
            let err = c.decode(Bytes::from(flipped)).unwrap_err().to_string();
            assert!(err.contains(id) && err.contains("mismatch"), "{err}");
        }
        assert!(codec("crc32", json!({})).decode(Bytes::from_static(b"abc")).is_err());
        assert!(ChecksumCodec::from_config("crc32", json!({"location": "middle"}).as_object().unwrap()).is_err());
    }
}
