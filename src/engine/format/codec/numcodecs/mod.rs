//! numcodecs codecs by their `id`, sorted by what they transform.
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/>. The same
//! configuration (`{"id": "zlib", "level": 1}`) names a codec in a Zarr v2
//! array's `filters` or `compressor`, and, without its `id`, in a Zarr v3
//! `zarr.json` as `{"name": "numcodecs.zlib", "configuration": {"level": 1}}`
//! (zarr-python 3's `numcodecs.zarr3` wrappers). One implementation serves
//! both: element filters become array -> array codecs in v3, compressors,
//! `shuffle` and checksums bytes -> bytes codecs, and `pcodec` and `zfpy`,
//! which encode typed elements, array -> bytes codecs.

pub(crate) mod filters;
pub(crate) mod num;

use serde_json::{Map, Value};

use self::filters::Filter;
use super::array_to_bytes::elements::ElementsCodec;
use super::bytes_to_bytes::BytesToBytesCodec;
use crate::engine::error::{Error, Result};
use crate::engine::format::json::numcodecs_id;

/// The prefix zarr-python 3 gives numcodecs codecs in `zarr.json`.
pub(crate) const V3_PREFIX: &str = "numcodecs.";

/// A numcodecs codec, by what it transforms.
#[derive(Debug, Clone)]
pub(crate) enum Numcodec {
    /// Elements into elements (`delta`, `fixedscaleoffset`, `quantize`,
    /// `astype`, `bitround`, `packbits`).
    Filter(Filter),
    /// Bytes into bytes (compressors, `shuffle`, checksums).
    Bytes(BytesToBytesCodec),
    /// Typed elements into self-describing bytes (`pcodec`, `zfpy`).
    Elements(ElementsCodec),
}

impl Numcodec {
    /// The codec a numcodecs configuration names (`{"id": ..., ...}`);
    /// `what` names the field in errors (`"filter"`, `"compressor"`).
    pub(crate) fn from_json(config: &Value, what: &str) -> Result<Self> {
        let (id, obj) = numcodecs_id(config, what)?;
        Self::from_id(id, obj).map_err(|e| match e {
            Error::Unsupported(_) if !Self::known(id) => Error::Unsupported(format!("{what} \"{id}\"")),
            other => other,
        })
    }

    /// The codec of a Zarr v3 `numcodecs.<id>` entry: numcodecs' own
    /// configuration without the `id`.
    pub(crate) fn from_v3(id: &str, config: Option<&Map<String, Value>>) -> Result<Self> {
        let mut obj = config.cloned().unwrap_or_default();
        obj.insert("id".into(), Value::String(id.into()));
        Self::from_id(id, &obj).map_err(|e| match e {
            Error::Unsupported(_) if !Self::known(id) => Error::Unsupported(format!("codec \"{V3_PREFIX}{id}\"")),
            other => other,
        })
    }

    fn known(id: &str) -> bool {
        Filter::IDS.contains(&id) || BytesToBytesCodec::NUMCODECS_IDS.contains(&id) || ElementsCodec::IDS.contains(&id)
    }

    fn from_id(id: &str, obj: &Map<String, Value>) -> Result<Self> {
        if Filter::IDS.contains(&id) {
            return Filter::from_config(id, obj).map(Self::Filter);
        }
        if ElementsCodec::IDS.contains(&id) {
            return ElementsCodec::from_numcodecs(id, obj).map(Self::Elements);
        }
        BytesToBytesCodec::from_numcodecs_config(id, obj).map(Self::Bytes)
    }
}
