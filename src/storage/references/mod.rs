//! Kerchunk reference sets: a JSON document mapping Zarr (v2) keys to
//! inline values or to byte ranges of other objects (often NetCDF4/HDF5
//! files), read as a store of those keys.
//!
//! Spec: <https://fsspec.github.io/kerchunk/spec.html>. Version 0 is a flat
//! object of keys; version 1 has `templates` (`{{name}}` in URLs), `gen`
//! (keys generated over integer ranges) and `refs`. A value is text (UTF-8,
//! or bytes after `base64:`), `[url]` (a whole object) or `[url, offset,
//! length]`. Referenced objects are read only under the dataset's
//! `virtual_chunk_containers` ([`Containers`]).
//!
//! A set may also be a directory of Parquet files, as fsspec writes them
//! ([`parquet`]).
//!
//! The set is read on first use and read again once older than `ref_ttl`
//! when its ETag changed; a Parquet set's record files are read as needed
//! and kept with it.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::Mutex;

use super::containers::Containers;
use super::source::{KeySource, Listing};
use super::{check_version, ByteRange, ObjectInfo, ReadResult, Store, StoreError};

mod parquet;
mod parse;
mod templates;
use self::parquet::ParquetRefs;
pub(crate) use self::parse::check_parse;
use self::parse::{parse, MAX_JSON_BYTES};

/// What a key refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference {
    /// The value itself.
    Inline(Bytes),
    /// A whole object.
    Object(String),
    /// `length` bytes at `offset` of an object.
    Span(String, Range<u64>),
}

/// A parsed reference set, with the version of the document it came from.
#[derive(Debug)]
struct Parsed {
    refs: Refs,
    etag: Option<String>,
    last_modified: Option<std::time::SystemTime>,
}

/// The references of a set.
#[derive(Debug)]
enum Refs {
    /// Every key of a JSON set, sorted.
    Json(BTreeMap<String, Reference>),
    /// A Parquet set's metadata, and the record files read so far.
    Parquet(ParquetRefs, moka::future::Cache<String, Arc<Vec<Option<Reference>>>>),
}

/// Record files of a Parquet set kept at once.
const RECORD_FILES_KEPT: u64 = 256;

/// A kerchunk reference set of a dataset.
#[derive(Debug)]
pub(crate) struct ReferenceSet {
    /// The store holding the set's JSON document, and its key there.
    store: Store,
    key: String,
    ttl: Duration,
    loaded: Mutex<Option<(Instant, Arc<Parsed>)>>,
    containers: Arc<Containers>,
}

impl ReferenceSet {
    pub(crate) fn new(store: Store, key: String, ttl: Duration, containers: Arc<Containers>) -> Self {
        Self {
            store,
            key,
            ttl,
            loaded: Mutex::new(None),
            containers,
        }
    }

    /// The key of a Parquet set's `.zmetadata`.
    fn parquet_key(&self) -> String {
        format!("{}/.zmetadata", self.key)
    }

    /// The set, read again when older than the TTL and changed.
    async fn parsed(&self) -> Result<Arc<Parsed>, StoreError> {
        let mut loaded = self.loaded.lock().await;
        if let Some((at, parsed)) = loaded.as_ref() {
            if at.elapsed() < self.ttl {
                return Ok(parsed.clone());
            }
            let document = match parsed.refs {
                Refs::Json(_) => self.key.clone(),
                Refs::Parquet(..) => self.parquet_key(),
            };
            // A set that cannot be checked now is kept until it can be.
            let now = self.store.head(&document).await.unwrap_or_else(|_| {
                Some(ObjectInfo {
                    size: 0,
                    etag: parsed.etag.clone(),
                    last_modified: std::time::SystemTime::UNIX_EPOCH,
                })
            });
            if now.is_some_and(|info| info.etag.is_some() && info.etag == parsed.etag) {
                let parsed = parsed.clone();
                *loaded = Some((Instant::now(), parsed.clone()));
                return Ok(parsed);
            }
        }
        let bad = |e: String| StoreError::Unavailable(format!("reference set '{}': {e}", self.key));
        if let Some(info) = self.store.head(&self.key).await? {
            if info.size > MAX_JSON_BYTES {
                return Err(bad(format!(
                    "{} bytes of JSON, more than the {MAX_JSON_BYTES} a JSON set may hold (write larger sets as Parquet)",
                    info.size
                )));
            }
        }
        let (read, refs) = match self.store.get(&self.key, ByteRange::All, None).await? {
            Some(read) if read.data.len() as u64 > MAX_JSON_BYTES => {
                return Err(bad(format!(
                "{} bytes of JSON, more than the {MAX_JSON_BYTES} a JSON set may hold (write larger sets as Parquet)",
                read.data.len()
            )))
            }
            Some(read) => {
                // A large set takes a while to parse: off the async threads.
                let data = read.data.clone();
                let refs = tokio::task::spawn_blocking(move || parse(&data))
                    .await
                    .map_err(|e| bad(e.to_string()))?
                    .map_err(bad)?;
                (read, Refs::Json(refs))
            }
            None => {
                // Not an object: a Parquet set is a directory.
                let read = self
                    .store
                    .get(&self.parquet_key(), ByteRange::All, None)
                    .await?
                    .ok_or_else(|| StoreError::Unavailable(format!("no reference set at '{}'", self.key)))?;
                let refs = ParquetRefs::parse(&read.data).map_err(bad)?;
                let records = moka::future::Cache::builder().max_capacity(RECORD_FILES_KEPT).build();
                (read, Refs::Parquet(refs, records))
            }
        };
        let parsed = Arc::new(Parsed {
            refs,
            etag: read.info.etag,
            last_modified: Some(read.info.last_modified),
        });
        *loaded = Some((Instant::now(), parsed.clone()));
        Ok(parsed)
    }

    /// What `key` refers to, `None` when the set has no such key.
    async fn lookup(&self, parsed: &Parsed, key: &str) -> Result<Option<Reference>, StoreError> {
        let (refs, records) = match &parsed.refs {
            Refs::Json(refs) => return Ok(refs.get(key).cloned()),
            Refs::Parquet(refs, records) => (refs, records),
        };
        if let Some(text) = refs.metadata.get(key) {
            return Ok(Some(Reference::Inline(text.clone())));
        }
        let Some((file, row)) = refs.locate(key) else {
            return Ok(None);
        };
        let path = format!("{}/{file}", self.key);
        let rows = records
            .try_get_with(file, async {
                match self.store.get(&path, ByteRange::All, None).await? {
                    // A record file that was never written holds no chunk.
                    None => Ok(Arc::new(Vec::new())),
                    Some(read) => parquet::read_records(read.data)
                        .map_err(|e| StoreError::Unavailable(format!("reference set '{path}': {e}"))),
                }
            })
            .await
            .map_err(|e: Arc<StoreError>| (*e).clone())?;
        Ok(rows.get(row as usize).cloned().flatten())
    }

    fn inline_info(parsed: &Parsed, size: u64) -> ObjectInfo {
        ObjectInfo {
            size,
            etag: parsed.etag.clone(),
            last_modified: parsed.last_modified.unwrap_or(std::time::SystemTime::UNIX_EPOCH),
        }
    }

    /// The version of a reference: the set's ETag with the span (or the
    /// whole object's ETag), so a key's version changes when the set
    /// points it elsewhere, never only when the set changes elsewhere.
    fn version(parsed: &Parsed, at: &str) -> String {
        format!("{}:{at}", parsed.etag.as_deref().unwrap_or("").trim_matches('"'))
    }

    fn span_version(parsed: &Parsed, span: &Range<u64>) -> String {
        Self::version(parsed, &format!("{}-{}", span.start, span.end))
    }
}

#[async_trait::async_trait]
impl KeySource for ReferenceSet {
    /// Read `range` of `key`; `None` when the set has no such key.
    async fn get(&self, key: &str, range: ByteRange, if_match: Option<&str>) -> Result<Option<ReadResult>, StoreError> {
        let parsed = self.parsed().await?;
        let Some(reference) = self.lookup(&parsed, key).await? else {
            return Ok(None);
        };
        let read = match &reference {
            Reference::Inline(data) => {
                check_version(key, if_match, parsed.etag.as_deref())?;
                let size = data.len() as u64;
                let r = range.within(size);
                ReadResult {
                    data: data.slice(r.start as usize..r.end as usize),
                    range: r,
                    info: Self::inline_info(&parsed, size),
                }
            }
            Reference::Span(url, span) => {
                let version = Self::span_version(&parsed, span);
                check_version(key, if_match, Some(&version))?;
                let mut read = self.containers.get(url, Some(span.clone()), range, None).await?;
                read.info.etag = Some(version);
                read
            }
            Reference::Object(url) => {
                let mut read = self.containers.get(url, None, range, None).await?;
                let version = Self::version(&parsed, read.info.etag.as_deref().unwrap_or("").trim_matches('"'));
                check_version(key, if_match, Some(&version))?;
                read.info.etag = Some(version);
                read
            }
        };
        Ok(Some(read))
    }

    /// Several ranges of `key`; `None` when missing.
    async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
        if_match: Option<&str>,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let parsed = self.parsed().await?;
        match self.lookup(&parsed, key).await?.as_ref() {
            None => Ok(None),
            Some(Reference::Span(url, span)) => {
                check_version(key, if_match, Some(&Self::span_version(&parsed, span)))?;
                self.containers
                    .get_ranges(url, span.clone(), ranges, None)
                    .await
                    .map(Some)
            }
            Some(_) => {
                let reads = ranges
                    .iter()
                    .map(|r| self.get(key, ByteRange::Bounded(r.clone()), if_match));
                let reads = futures::future::try_join_all(reads).await?;
                Ok(reads.into_iter().map(|r| r.map(|r| r.data)).collect())
            }
        }
    }

    /// Metadata of `key` (a span's without reading it: the object is
    /// only checked against the allow-list).
    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let parsed = self.parsed().await?;
        match self.lookup(&parsed, key).await?.as_ref() {
            None => Ok(None),
            Some(Reference::Inline(data)) => Ok(Some(Self::inline_info(&parsed, data.len() as u64))),
            Some(Reference::Span(url, span)) => {
                self.containers.check(url, None)?;
                Ok(Some(ObjectInfo {
                    etag: Some(Self::span_version(&parsed, span)),
                    ..Self::inline_info(&parsed, span.end - span.start)
                }))
            }
            Some(Reference::Object(url)) => {
                let read = self.containers.get(url, None, ByteRange::Bounded(0..0), None).await?;
                let version = Self::version(&parsed, read.info.etag.as_deref().unwrap_or("").trim_matches('"'));
                Ok(Some(ObjectInfo {
                    etag: Some(version),
                    ..read.info
                }))
            }
        }
    }

    /// The children of `prefix`: (directories, keys), each sorted.
    async fn list_dir(&self, prefix: &str) -> Result<Listing, StoreError> {
        let parsed = self.parsed().await?;
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let (mut dirs, mut files) = (Vec::<String>::new(), Vec::new());
        // A Parquet set lists its metadata keys (chunks are found by key).
        let keys: Vec<&String> = match &parsed.refs {
            Refs::Json(refs) => refs.keys().collect(),
            Refs::Parquet(refs, _) => refs.metadata.keys().collect(),
        };
        for key in keys.into_iter().filter(|k| k.starts_with(&start)) {
            match key[start.len()..].split_once('/') {
                Some((dir, _)) => {
                    if dirs.last().map(String::as_str) != Some(dir) {
                        dirs.push(dir.to_string());
                    }
                }
                None => files.push(key[start.len()..].to_string()),
            }
        }
        dirs.dedup();
        Ok((dirs, files))
    }
}
