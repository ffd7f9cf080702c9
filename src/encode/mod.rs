//! Encoders: a read's result (elements of an engine data type, slab after
//! slab) turned into the bytes a format sends. They know the engine's data
//! types and element layouts, nothing of HTTP, storage or codecs.
//!
//! Every region-read format is an [`Encoder`]: a head, the elements as they
//! arrive, a tail. A small result is encoded whole (head, all elements,
//! tail); a large one streams slab by slab through the same calls, so every
//! format shares the ETag, 413 and abort-on-error rules of the read path.
//!
//! - [`ascii`]: OPeNDAP DAP2's ASCII rows of an array.
//! - `coverage_json`: CoverageJSON documents (EDR).
//! - [`csv`]: one row per element, its labels then its value.
//! - [`dap4`]: OPeNDAP DAP4's chunked data (little-endian, checksums).
//! - `geojson`: GeoJSON FeatureCollections of points, written as they go (EDR).
//! - [`geotiff`]: a one-band GeoTIFF of a 2-D result on a regular grid.
//! - [`json`]: the JSON document of a region.
//! - [`netcdf`]: a netCDF classic file (CDF-2, or CDF-5).
//! - [`npy`]: a NumPy `.npy` file.
//! - [`png`]: pictures as PNG files.
//! - [`xdr`]: OPeNDAP DAP2's XDR (big-endian, the DAP2 type of each
//!   Zarr data type, array lengths and padding), an array at a time.
//! - [`xml`]: text escaped for XML 1.0 and HTML.
//!
//! Elements become text in one place (`text`), in JSON's or CSV's form.

use bytes::Bytes;

pub mod ascii;
pub(crate) mod coverage_json;
pub mod csv;
pub mod dap4;
pub(crate) mod geojson;
pub mod geotiff;
pub mod json;
pub mod netcdf;
pub mod npy;
pub mod png;
pub(crate) mod text;
pub mod xdr;
pub mod xml;

/// A representation of a result, written as a head, the result's elements
/// in C order (in one call or slab by slab), and a tail.
pub trait Encoder: Send + Sync + 'static {
    /// The bytes before the first element.
    fn head(&self) -> Bytes {
        Bytes::new()
    }

    /// Elements `data` of the result, the first of them element `start`
    /// (counted in C order). Whole items only: see [`Encoder::piece_elements`].
    /// Damaged elements (invalid text) are an error saying what is wrong.
    fn elements(&self, start: u64, data: Bytes) -> Result<Bytes, String>;

    /// [`Encoder::elements`] as pieces sent one after the other: a format
    /// that frames elements as they are (DAP4's chunks) gives its frames
    /// and slices of `data`, copying nothing.
    fn element_pieces(&self, start: u64, data: Bytes) -> Result<Vec<Bytes>, String> {
        Ok(vec![self.elements(start, data)?])
    }

    /// The bytes after the last element.
    fn tail(&self) -> Bytes {
        Bytes::new()
    }

    /// The body's length, when it is known before any data is read.
    fn length(&self) -> Option<u64>;

    /// Whether the result can be sent slab by slab (fixed-size elements).
    fn streams(&self) -> bool {
        true
    }

    /// For encoders that spend CPU on each element (text), how many
    /// elements to encode at a time off the async workers (a multiple of
    /// the encoder's item); `None` when elements pass as they are.
    fn piece_elements(&self) -> Option<u64> {
        None
    }

    /// The whole body of a result read in one piece.
    fn whole(&self, data: Bytes) -> Result<Bytes, String> {
        let (head, body, tail) = (self.head(), self.elements(0, data)?, self.tail());
        if head.is_empty() && tail.is_empty() {
            return Ok(body);
        }
        let mut out = Vec::with_capacity(head.len() + body.len() + tail.len());
        out.extend_from_slice(&head);
        out.extend_from_slice(&body);
        out.extend_from_slice(&tail);
        Ok(Bytes::from(out))
    }
}

/// Elements as they are (binary), after an optional header (`.npy`).
pub struct Raw {
    head: Bytes,
    length: u64,
}

impl Raw {
    /// `bytes` of elements after `head`.
    pub fn new(head: Vec<u8>, bytes: u64) -> Self {
        Self {
            length: head.len() as u64 + bytes,
            head: Bytes::from(head),
        }
    }
}

impl Encoder for Raw {
    fn head(&self) -> Bytes {
        self.head.clone()
    }

    fn elements(&self, _start: u64, data: Bytes) -> Result<Bytes, String> {
        Ok(data)
    }

    fn length(&self) -> Option<u64> {
        Some(self.length)
    }
}
