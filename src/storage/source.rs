//! The one small trait every kind of store implements.

use std::ops::Range;

use bytes::Bytes;

use super::{ByteRange, Expect, ObjectInfo, Payload, ReadResult, StoreError};

/// The children of a prefix: (sub-directories, objects), each sorted.
pub(crate) type Listing = (Vec<String>, Vec<String>);

/// What a dataset's keys are read from: objects of an `object_store`
/// backend or a local directory ([`super::objects::ObjectKeys`]), an
/// Icechunk snapshot ([`super::icechunk::IcechunkSnapshot`]) or a kerchunk
/// reference set ([`super::references::ReferenceSet`]). The limiter, the
/// timeout and the counters are wrappers around it ([`super::bounds`]),
/// as are the request shapes a backend needs
/// ([`super::objects::Remote`]).
///
/// Keys reaching a source are already valid ([`super::validate_key`]). A
/// missing key is `Ok(None)`, never an error. `if_match` makes a read
/// conditional on the object's version: [`StoreError::Changed`] when it
/// is another.
#[async_trait::async_trait]
pub(crate) trait KeySource: Send + Sync + std::fmt::Debug {
    /// Read `range` of `key`.
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError>;

    /// Several ranges of `key`, one `Bytes` per range in the order asked. A
    /// range the object does not fully cover comes back short.
    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError>;

    /// Metadata of `key`.
    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError>;

    /// The children of `prefix` (`""` for the root).
    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError>;

    /// Write `data` at `key` if the object is as `expect` says; the new
    /// ETag. Sources that only read keep this default.
    async fn put(&self, key: &str, _data: Payload, _expect: Expect) -> Result<Option<String>, StoreError> {
        Err(read_only(key))
    }

    /// Remove `key` if it is as `expect` says (where the backend can check).
    async fn delete(&self, key: &str, _expect: Expect) -> Result<(), StoreError> {
        Err(read_only(key))
    }
}

fn read_only(key: &str) -> StoreError {
    StoreError::Unavailable(format!("'{key}' is in a read-only store"))
}

/// A shared source is a source (so wrappers can hold `Arc<dyn KeySource>`).
#[async_trait::async_trait]
impl<S: KeySource + ?Sized> KeySource for std::sync::Arc<S> {
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        (**self).get(key, range, if_match).await
    }

    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        (**self).get_ranges(key, ranges, if_match).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        (**self).head(key).await
    }

    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        (**self).list_dir(prefix).await
    }

    async fn put(&self, key: &str, data: Payload, expect: Expect) -> Result<Option<String>, StoreError> {
        (**self).put(key, data, expect).await
    }

    async fn delete(&self, key: &str, expect: Expect) -> Result<(), StoreError> {
        (**self).delete(key, expect).await
    }
}
