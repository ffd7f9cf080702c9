//! Reads of local files in one blocking-thread hop.
//!
//! object_store's local backend answers a ranged read in two hops to a
//! blocking thread (open and check, then read) and reads each range of a
//! file with a fresh open. Here one hop opens the file, checks `If-Match`
//! against the same ETag object_store gives, and reads every range into one
//! pooled buffer. Listing and HEAD stay with object_store.

use std::fs::{File, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta};

use crate::buffer_pool::BufferPool;

/// The local file system under a dataset's store.
#[derive(Debug, Clone)]
pub(super) struct LocalFiles {
    fs: Arc<LocalFileSystem>,
    /// Where reads get their buffers.
    buffers: Arc<BufferPool>,
}

impl LocalFiles {
    pub(super) fn new(fs: Arc<LocalFileSystem>, buffers: Arc<BufferPool>) -> Self {
        Self { fs, buffers }
    }

    /// Read `ranges` (`None`: the whole file) of `location` if it matches
    /// `options`' preconditions: the file's metadata, and each range as
    /// resolved against the file's size with its bytes.
    pub(super) async fn read(
        &self,
        location: Path,
        ranges: Option<Vec<GetRange>>,
        options: GetOptions,
    ) -> object_store::Result<(ObjectMeta, Vec<(Range<u64>, Bytes)>)> {
        let path = self.fs.path_to_filesystem(&location)?;
        let buffers = self.buffers.clone();
        tokio::task::spawn_blocking(move || {
            let (file, metadata) = open(&path)?;
            let meta = object_meta(location, &metadata);
            options.check_preconditions(&meta)?;
            let ranges: Vec<Range<u64>> = match ranges {
                None => std::iter::once(0..meta.size).collect(),
                Some(ranges) => ranges
                    .iter()
                    .map(|r| match r {
                        // Empty: nothing to read (object_store refuses them as ranges).
                        GetRange::Bounded(r) if r.is_empty() => Ok(r.start..r.start),
                        r => r.as_range(meta.size),
                    })
                    .collect::<Result<_, _>>()
                    .map_err(|e| generic(std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())))?,
            };
            let parts = read_ranges(&file, &ranges, &buffers).map_err(generic)?;
            // Shorter than the size just read: the file changed under us.
            if parts
                .iter()
                .zip(&ranges)
                .any(|(p, r)| p.len() as u64 != r.end - r.start)
            {
                return Err(object_store::Error::Precondition {
                    path: path.display().to_string(),
                    source: "the file became shorter while it was read".into(),
                });
            }
            Ok((meta, ranges.into_iter().zip(parts).collect()))
        })
        .await
        .map_err(|e| generic(std::io::Error::other(e)))?
    }
}

fn open(path: &std::path::Path) -> object_store::Result<(File, Metadata)> {
    use std::io::ErrorKind::{IsADirectory, NotADirectory, NotFound};
    let missing = |source: std::io::Error| object_store::Error::NotFound {
        path: path.display().to_string(),
        source: Box::new(source),
    };
    let file = File::open(path).map_err(|e| match e.kind() {
        NotFound | NotADirectory | IsADirectory => missing(e),
        _ => generic(e),
    })?;
    let metadata = file.metadata().map_err(generic)?;
    if metadata.is_dir() {
        return Err(missing(std::io::Error::new(IsADirectory, "is a directory")));
    }
    Ok((file, metadata))
}

fn generic(source: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: Box::new(source),
    }
}

/// The object metadata object_store's local backend reports for a file,
/// ETag included (inode, modification time in microseconds, size, in hex),
/// so versions from either path compare equal.
fn object_meta(location: Path, metadata: &Metadata) -> ObjectMeta {
    use std::os::unix::fs::MetadataExt;
    let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let micros = modified
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let size = metadata.len();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size,
        e_tag: Some(format!("{:x}-{micros:x}-{size:x}", metadata.ino())),
        version: None,
    }
}

/// Read `ranges` of `file` into one buffer (without zeroing it first) and
/// slice it; a range past the end of the file comes back short.
fn read_ranges(file: &File, ranges: &[Range<u64>], buffers: &Arc<BufferPool>) -> std::io::Result<Vec<Bytes>> {
    let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let mut buffer = buffers.take_empty(total as usize);
    let mut reader = file;
    let mut bounds = Vec::with_capacity(ranges.len());
    for range in ranges {
        reader.seek(SeekFrom::Start(range.start))?;
        let start = buffer.len();
        reader.take(range.end - range.start).read_to_end(&mut buffer)?;
        bounds.push(start..buffer.len());
    }
    let buffer = BufferPool::into_bytes(buffers, buffer);
    Ok(bounds.into_iter().map(|b| buffer.slice(b)).collect())
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStore;

    use super::*;

    fn fixture() -> (tempfile::TempDir, LocalFiles, Path) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shard"), (0u8..100).collect::<Vec<_>>()).unwrap();
        let location = Path::from_absolute_path(dir.path().join("shard")).unwrap();
        (
            dir,
            LocalFiles::new(Arc::new(LocalFileSystem::new()), Arc::default()),
            location,
        )
    }

    #[tokio::test]
    async fn versions_match_object_stores_own() {
        let (_dir, local, location) = fixture();
        let head = LocalFileSystem::new().head(&location).await.unwrap();
        let (meta, _) = local.read(location, None, GetOptions::default()).await.unwrap();
        assert_eq!(meta.e_tag, head.e_tag);
        assert_eq!(meta.size, head.size);
    }

    #[tokio::test]
    async fn reads_ranges_and_checks_the_version() {
        let (_dir, local, location) = fixture();
        let ranges = vec![
            GetRange::Bounded(2..5),
            GetRange::Suffix(3),
            GetRange::Bounded(98..200),
            GetRange::Bounded(7..7),
        ];
        let (meta, parts) = local
            .read(location.clone(), Some(ranges), GetOptions::default())
            .await
            .unwrap();
        let got: Vec<_> = parts.iter().map(|(r, b)| (r.clone(), b.to_vec())).collect();
        assert_eq!(
            got,
            [
                (2..5, vec![2, 3, 4]),
                (97..100, vec![97, 98, 99]),
                (98..100, vec![98, 99]),
                (7..7, vec![])
            ]
        );
        let stale = GetOptions {
            if_match: Some("1-2-3".into()),
            ..GetOptions::default()
        };
        let err = local.read(location.clone(), None, stale).await.unwrap_err();
        assert!(matches!(err, object_store::Error::Precondition { .. }), "{err}");
        let current = GetOptions {
            if_match: meta.e_tag,
            ..GetOptions::default()
        };
        assert!(local.read(location.clone(), None, current).await.is_ok());
        let past_end = local.read(location, Some(vec![GetRange::Offset(100)]), GetOptions::default());
        assert!(past_end.await.is_err());
    }

    #[tokio::test]
    async fn missing_files_and_directories_are_not_found() {
        let (dir, local, location) = fixture();
        let through_file = Path::from_absolute_path(dir.path().join("shard/zarr.json")).unwrap();
        let directory = Path::from_absolute_path(dir.path()).unwrap();
        let absent = Path::from(format!("{location}-absent"));
        for path in [through_file, directory, absent] {
            let err = local.read(path.clone(), None, GetOptions::default()).await.unwrap_err();
            assert!(matches!(err, object_store::Error::NotFound { .. }), "{path}: {err}");
        }
    }
}
