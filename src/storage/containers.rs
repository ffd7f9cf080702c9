//! Virtual chunk containers: the only places that Icechunk virtual chunks
//! and kerchunk references may be read from.
//!
//! A dataset lists URL prefixes (`virtual_chunk_containers`), each a
//! directory (`file:///data/allowed` means `file:///data/allowed/`, so
//! `allowed_evil/` beside it is not admitted). A referenced object is read
//! only when its URL starts with one of them, through a [`Store`] rooted at
//! that directory, so the key left over is validated like every other key
//! and cannot climb out of the prefix. Any other URL is
//! [`StoreError::Forbidden`] before anything is fetched.
//!
//! Reads here are not conditional: the callers know what version a
//! reference expects (an Icechunk checksum, a reference set's ETag) and
//! check the object's metadata the read returns.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;

use super::{ByteRange, ReadResult, Store, StoreError, StoreOptions};

/// One allowed URL prefix, with the object_store options of its store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualContainer {
    /// URL prefix, e.g. `s3://bucket/archive/` or `file:///data/`.
    pub url_prefix: String,
    /// Backend options of the prefix's store; `None`: the dataset's own
    /// options when the scheme is the dataset's, else none.
    pub options: Option<BTreeMap<String, String>>,
}

/// The containers of one dataset, their stores opened on first use.
#[derive(Debug, Default)]
pub(crate) struct Containers {
    /// Longest prefix first, so the most specific container wins.
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    /// The directory URL, ending in `/`: the store's root.
    prefix: String,
    options: StoreOptions,
    store: OnceLock<Result<Store, String>>,
}

/// A bare absolute path is a `file://` URL.
pub(crate) fn normalise_url(url: &str) -> String {
    if url.starts_with('/') {
        format!("file://{url}")
    } else {
        url.to_string()
    }
}

/// A container's prefix, the root of its store: the URL as a directory
/// (with a `/` at its end, added when missing).
fn directory_prefix(raw: &str) -> Result<String, String> {
    let mut prefix = normalise_url(raw);
    let bad = |why: &str| format!("virtual_chunk_containers: '{raw}' {why}");
    let url = url::Url::parse(&prefix).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if url.scheme() != "file" && url.host_str().is_none_or(str::is_empty) {
        return Err(bad("names no host or bucket"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("has a query or a fragment"));
    }
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    Ok(prefix)
}

fn scheme(url: &str) -> &str {
    url.split_once("://").map_or("file", |(s, _)| s)
}

impl Containers {
    /// The containers `list` allows, for a dataset stored at `location` with
    /// `options`; an error names a prefix that is not a URL.
    pub(crate) fn new(list: &[VirtualContainer], location: &str, options: &StoreOptions) -> Result<Self, String> {
        let own_scheme = scheme(&normalise_url(location))
            .trim_start_matches("icechunk+")
            .trim_start_matches("refs+")
            .to_string();
        let mut entries: Vec<Entry> = list
            .iter()
            .map(|c| {
                let prefix = directory_prefix(&c.url_prefix)?;
                let backend = match &c.options {
                    Some(own) => own.clone(),
                    None if scheme(&prefix) == own_scheme => options.backend.clone(),
                    None => BTreeMap::new(),
                };
                let options = StoreOptions {
                    backend,
                    containers: Vec::new(),
                    ..options.clone()
                };
                Ok(Entry {
                    prefix,
                    options,
                    store: OnceLock::new(),
                })
            })
            .collect::<Result<_, String>>()?;
        entries.sort_by_key(|e| std::cmp::Reverse(e.prefix.len()));
        Ok(Self { entries })
    }

    /// The store holding `url` and the object's key in it; `Forbidden` for
    /// a URL under no container (named, with `named_prefix` when the caller
    /// knows a wider prefix the URL falls under).
    fn locate(&self, url: &str, named_prefix: Option<&str>) -> Result<(&Store, String), StoreError> {
        let url = normalise_url(url);
        let forbidden = || {
            let named = match named_prefix {
                Some(p) => format!("'{url}' (container '{p}')"),
                None => format!("'{url}'"),
            };
            StoreError::Forbidden(format!(
                "{named} is not under any of this dataset's virtual_chunk_containers"
            ))
        };
        let entry = self
            .entries
            .iter()
            .find(|e| url.starts_with(&e.prefix))
            .ok_or_else(forbidden)?;
        let key = url[entry.prefix.len()..].to_string();
        super::validate_key(&key).map_err(|e| {
            StoreError::Forbidden(format!(
                "'{url}' is not read: under its virtual_chunk_containers prefix '{}', {e}",
                entry.prefix
            ))
        })?;
        let store = entry
            .store
            .get_or_init(|| Store::open(&entry.prefix, &entry.options))
            .as_ref()
            .map_err(|e| StoreError::Unavailable(e.clone()))?;
        Ok((store, key))
    }

    /// Whether `url` may be read (without reading it).
    pub(crate) fn check(&self, url: &str, named_prefix: Option<&str>) -> Result<(), StoreError> {
        self.locate(url, named_prefix).map(|_| ())
    }

    /// Read `range` of the `length` bytes at `offset` of the object at `url`
    /// (a whole object when `span` is `None`). The result's range and size
    /// are relative to the span, as if it were an object of its own; its
    /// ETag and modification time are the object's. A missing object is an
    /// error (a reference to nothing is corrupt).
    pub(crate) async fn get(
        &self,
        url: &str,
        span: Option<Range<u64>>,
        range: ByteRange,
        named_prefix: Option<&str>,
    ) -> Result<ReadResult, StoreError> {
        let (store, key) = self.locate(url, named_prefix)?;
        let missing = || StoreError::Unavailable(format!("referenced object '{url}' does not exist"));
        let Some(span) = span else {
            return store.get(&key, range, None).await?.ok_or_else(missing);
        };
        let len = span.end - span.start;
        let inner = range.within(len);
        let absolute = span.start + inner.start..span.start + inner.end;
        let mut read = store
            .get(&key, ByteRange::Bounded(absolute.clone()), None)
            .await?
            .ok_or_else(missing)?;
        if read.data.len() as u64 != absolute.end - absolute.start {
            return Err(StoreError::Unavailable(format!(
                "referenced object '{url}' is shorter than the reference ({} bytes, the reference ends at {})",
                read.info.size, span.end
            )));
        }
        read.range = inner;
        read.info.size = len;
        Ok(read)
    }

    /// Several ranges of one span of `url`, one `Bytes` each.
    pub(crate) async fn get_ranges(
        &self,
        url: &str,
        span: Range<u64>,
        ranges: &[Range<u64>],
        named_prefix: Option<&str>,
    ) -> Result<Vec<Bytes>, StoreError> {
        let (store, key) = self.locate(url, named_prefix)?;
        let len = span.end - span.start;
        let absolute: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| span.start + r.start.min(len)..span.start + r.end.min(len))
            .collect();
        store
            .get_ranges(&key, &absolute, None)
            .await?
            .ok_or_else(|| StoreError::Unavailable(format!("referenced object '{url}' does not exist")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn containers(prefixes: &[&str]) -> Containers {
        let list: Vec<VirtualContainer> = prefixes
            .iter()
            .map(|p| VirtualContainer {
                url_prefix: p.to_string(),
                options: None,
            })
            .collect();
        Containers::new(&list, "/tmp", &StoreOptions::default()).unwrap()
    }

    #[test]
    fn only_urls_under_a_prefix_are_located() {
        let c = containers(&["file:///data/archive/", "file:///data/archive/special/", "/other/x"]);
        let (_, key) = c.locate("file:///data/archive/a/b.nc", None).unwrap();
        assert_eq!(key, "a/b.nc");
        let (_, key) = c.locate("/data/archive/special/c.nc", None).unwrap();
        assert_eq!(key, "c.nc");
        // A prefix without its last '/' is a directory all the same:
        // neither siblings that start with its name nor the name itself.
        let (_, key) = c.locate("/other/x/x1.nc", None).unwrap();
        assert_eq!(key, "x1.nc");
        for bad in [
            "/other/x1.nc",
            "/other/x_evil/secret.nc",
            "/other/x",
            "file:///data/other.nc",
            "file:///data/archive/../secret",
            "file:///data/archive/a/%2e%2e/b",
            "s3://bucket/data/archive/a.nc",
            "/other/y.nc",
        ] {
            let err = c.locate(bad, Some("s3://bucket/")).unwrap_err();
            assert!(matches!(err, StoreError::Forbidden(_)), "{bad}: {err}");
            assert!(err.to_string().contains(bad.trim_start_matches("file://")), "{err}");
        }
        // A prefix naming a whole host or bucket stops at its boundary.
        let hosts = containers(&["https://data.example", "s3://bucket"]);
        assert_eq!(hosts.locate("https://data.example/a/b.nc", None).unwrap().1, "a/b.nc");
        assert_eq!(hosts.locate("s3://bucket/b.nc", None).unwrap().1, "b.nc");
        for bad in ["https://data.example.evil/x", "s3://bucket-2/x", "https://data.example"] {
            assert!(hosts.locate(bad, None).is_err(), "{bad}");
        }
        for bad in ["s3://", "https://", "not a url", "s3://bucket/x?y=1"] {
            let list = [VirtualContainer {
                url_prefix: bad.into(),
                options: None,
            }];
            let err = Containers::new(&list, "/tmp", &StoreOptions::default()).unwrap_err();
            assert!(err.contains(bad) && err.contains("virtual_chunk_containers"), "{err}");
        }
        let err = c.locate("/data/archive/../x", None).unwrap_err();
        assert!(err.to_string().contains("virtual_chunk_containers"), "{err}");
        let err = c.locate("s3://elsewhere/x.nc", Some("s3://elsewhere/")).unwrap_err();
        assert!(err.to_string().contains("virtual_chunk_containers"), "{err}");
        assert!(err.to_string().contains("container 's3://elsewhere/'"), "{err}");
    }

    #[tokio::test]
    async fn spans_read_as_objects_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.bin"), (0u8..100).collect::<Vec<_>>()).unwrap();
        let prefix = format!("file://{}/", dir.path().display());
        let c = containers(&[&prefix]);
        let url = format!("{prefix}f.bin");
        let read = c.get(&url, Some(10..20), ByteRange::All, None).await.unwrap();
        assert_eq!(&read.data[..], &(10u8..20).collect::<Vec<_>>()[..]);
        assert_eq!(read.info.size, 10);
        let read = c.get(&url, Some(10..20), ByteRange::Bounded(2..5), None).await.unwrap();
        assert_eq!(&read.data[..], &[12, 13, 14]);
        assert_eq!(read.range, 2..5);
        let read = c.get(&url, Some(10..20), ByteRange::Suffix(3), None).await.unwrap();
        assert_eq!(&read.data[..], &[17, 18, 19]);
        let parts = c.get_ranges(&url, 50..60, &[0..2, 8..10], None).await.unwrap();
        assert_eq!(
            parts,
            vec![Bytes::from_static(&[50, 51]), Bytes::from_static(&[58, 59])]
        );
        let err = c.get(&url, Some(95..120), ByteRange::All, None).await.unwrap_err();
        assert!(err.to_string().contains("shorter"), "{err}");
        let err = c
            .get(&format!("{prefix}none.bin"), Some(0..4), ByteRange::All, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
