//! Reads of local files in at most one blocking-thread hop.
//!
//! object_store's local backend answers a ranged read in two hops to a
//! blocking thread (open and check, then read) and reads each range of a
//! file with a fresh open. Here one hop opens the file, checks `If-Match`
//! against the same ETag object_store gives, and reads every range into one
//! pooled buffer. A small read (a tile, a shard index) is first tried on
//! the calling thread with `preadv2(RWF_NOWAIT)`, which reads only what is
//! already in the page cache and fails instead of waiting for the disk: a
//! hop costs two context switches, a fifth of the server's CPU per tile in
//! profiles. Not on network or FUSE file systems (NFS, SMB, Ceph, 9p,
//! s3fs, ...), where even an open may wait on the network: there every
//! read goes to a blocking thread. A HEAD is one stat, on the same terms.
//! Listing stays with object_store.
//!
//! Links may point anywhere; what they resolve to must stay inside the
//! dataset's directory. Every open file's real path (the kernel's, from
//! `/proc/self/fd`, so no link swapped in between can fool it) is checked
//! against the directory's real path, and a file outside is not found: a
//! link to `/etc/passwd` or into another dataset serves nothing.

use std::fs::{File, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use bytes::Bytes;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectMeta};

use crate::buffer_pool::BufferPool;

mod write;

/// A file's metadata and the ranges read, each with its bytes.
type Fetched = (ObjectMeta, Vec<(Range<u64>, Bytes)>);

/// The local file system under a dataset's store.
#[derive(Debug, Clone)]
pub(super) struct LocalFiles {
    fs: Arc<LocalFileSystem>,
    /// Where reads get their buffers.
    buffers: Arc<BufferPool>,
    /// Whether small reads are tried on the calling thread (not on a file
    /// system where an open may wait on the network).
    inline: bool,
    /// `dir` as an object_store path, and the file-system path object_store
    /// maps it to (`None` if it maps none).
    root: Option<(String, PathBuf)>,
    /// The directory served, and where it really is.
    served: Arc<Root>,
}

/// A directory served and its real path (every link resolved), found once
/// it exists and found again when a file seems to be outside it (the
/// directory itself may be a link that was moved, as in blue/green
/// deployments): files must really be inside it.
#[derive(Debug)]
struct Root {
    dir: PathBuf,
    real: RwLock<Option<PathBuf>>,
}

impl Root {
    /// The real path, resolved now if it never was (or `fresh`).
    fn real(&self, fresh: bool) -> object_store::Result<PathBuf> {
        if !fresh {
            if let Some(real) = self.real.read().expect("not poisoned").as_ref() {
                return Ok(real.clone());
            }
        }
        let real = std::fs::canonicalize(&self.dir).map_err(|e| not_found_or_generic(&self.dir, e))?;
        *self.real.write().expect("not poisoned") = Some(real.clone());
        Ok(real)
    }
}

impl LocalFiles {
    /// The files under `dir`, read through `fs` into `buffers`.
    pub(super) fn new(fs: Arc<LocalFileSystem>, buffers: Arc<BufferPool>, dir: &std::path::Path) -> Self {
        let inline = !may_block(dir);
        if !inline && cfg!(target_os = "linux") {
            tracing::info!(dir = %dir.display(), "network, FUSE or unknown file system: every read goes to a blocking thread");
        }
        // Mapped through a child: a directory named like `x#1` is no valid
        // file path of its own, but files under it are.
        let root = Path::from_absolute_path(dir).ok().and_then(|path| {
            let child = fs.path_to_filesystem(&path.clone().join("x")).ok()?;
            Some((path.to_string(), child.parent()?.to_path_buf()))
        });
        Self {
            fs,
            buffers,
            inline,
            root,
            served: Arc::new(Root {
                dir: dir.to_path_buf(),
                real: RwLock::new(None),
            }),
        }
    }

    /// Whether listing `prefix` stays inside the directory (a listing
    /// through a link out of it would name files elsewhere). A prefix that
    /// does not exist lists nothing, and is inside.
    pub(super) fn lists_inside(&self, prefix: &str) -> bool {
        let Ok(real_dir) = self.served.real(false) else {
            return true;
        };
        match std::fs::canonicalize(self.served.dir.join(prefix)) {
            Ok(real) => real.starts_with(&real_dir),
            Err(_) => true,
        }
    }

    /// The file of `location`, as object_store's `path_to_filesystem` maps
    /// it. That goes through a URL, which costs as much as the rest of a
    /// tile's read; a key under the root made only of characters that
    /// neither object_store nor a URL encodes maps to itself, and is joined
    /// to the root's file-system path directly.
    fn file_path(&self, location: &Path) -> object_store::Result<PathBuf> {
        if let Some((prefix, dir)) = &self.root {
            let key = location
                .as_ref()
                .strip_prefix(prefix.as_str())
                .and_then(|k| k.strip_prefix('/'));
            if let Some(key) = key.filter(|k| maps_to_itself(k)) {
                return Ok(dir.join(key));
            }
        }
        self.fs.path_to_filesystem(location)
    }

    /// Read `ranges` (`None`: the whole file) of `location` if it matches
    /// `options`' preconditions: the file's metadata, and each range as
    /// resolved against the file's size with its bytes.
    pub(super) async fn read(
        &self,
        location: Path,
        ranges: Option<Vec<GetRange>>,
        options: GetOptions,
    ) -> object_store::Result<Fetched> {
        let path = self.file_path(&location)?;
        let served = self.served.clone();
        let buffers = self.buffers.clone();
        if self.inline && small(ranges.as_deref()) {
            let file = FileAt {
                path: &path,
                root: &served,
            };
            if let Some(done) = read_file(file, location.clone(), ranges.as_deref(), &options, &buffers, Wait::No)? {
                return Ok(done);
            }
        }
        tokio::task::spawn_blocking(move || {
            let file = FileAt {
                path: &path,
                root: &served,
            };
            read_file(file, location, ranges.as_deref(), &options, &buffers, Wait::Yes)
                .map(|done| done.expect("a read that may wait always finishes"))
        })
        .await
        .map_err(|e| generic(std::io::Error::other(e)))?
    }

    /// The metadata of the file at `location`, with the ETag a read of it
    /// reports: one stat, on the calling thread where opens cannot block.
    /// It is what confirms a decoded-chunk cache hit. Unlike a read, it
    /// does not notice a file it may not open (a read of that fails).
    pub(super) async fn head(&self, location: Path) -> object_store::Result<ObjectMeta> {
        let path = self.file_path(&location)?;
        let served = self.served.clone();
        let at = move || {
            stat(
                FileAt {
                    path: &path,
                    root: &served,
                },
                location,
            )
        };
        if self.inline {
            return at();
        }
        tokio::task::spawn_blocking(at)
            .await
            .map_err(|e| generic(std::io::Error::other(e)))?
    }
}

/// Whether object_store's local backend maps `key` to the same relative
/// file path: a non-empty valid store key, whose characters (ASCII letters,
/// digits, `.`, `-`, `_`, single `/` between segments other than `.` and
/// `..`) neither object_store nor a URL encodes.
fn maps_to_itself(key: &str) -> bool {
    !key.is_empty() && super::key::validate_key(key).is_ok()
}

/// Reads of at most this many bytes are tried on the calling thread.
const INLINE_READ_BYTES: u64 = 1 << 20;

/// Whether `ranges` are few bytes, known before the file is opened.
fn small(ranges: Option<&[GetRange]>) -> bool {
    let Some(ranges) = ranges else { return false };
    let mut total = 0;
    for range in ranges {
        total += match range {
            GetRange::Bounded(r) => r.end.saturating_sub(r.start),
            GetRange::Suffix(n) => *n,
            GetRange::Offset(_) => return false,
        };
    }
    total <= INLINE_READ_BYTES
}

/// Whether an open or a read of a file under `dir` may wait on a network
/// (or on a FUSE daemon); `true` when the file system cannot be told.
#[cfg(target_os = "linux")]
fn may_block(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(dir) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return true;
    };
    let mut info = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `dir` is a NUL-terminated path and `info` has room for the
    // statfs record, which the call fills when it returns 0.
    if unsafe { libc::statfs(dir.as_ptr(), info.as_mut_ptr()) } != 0 {
        return true;
    }
    // SAFETY: statfs returned 0, so it wrote the whole record.
    let info = unsafe { info.assume_init() };
    remote_file_system(info.f_type as u32)
}

/// Elsewhere no read can be limited to the page cache ([`read_cached`]),
/// so trying one on the calling thread would only open the file twice.
#[cfg(not(target_os = "linux"))]
fn may_block(_: &std::path::Path) -> bool {
    true
}

/// Whether a file system type (statfs `f_type`) is a network or FUSE one.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn remote_file_system(magic: u32) -> bool {
    const REMOTE: [u32; 15] = [
        0x0000_6969, // NFS
        0x0000_517B, // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x6573_5546, // FUSE: sshfs, s3fs, gcsfuse, virtiofs, ...
        0x00C3_6400, // Ceph
        0x0102_1997, // 9p
        0x5346_414F, // AFS
        0x6B41_4653, // kAFS
        0x7375_7245, // Coda
        0x0116_1970, // GFS2
        0x7461_636F, // OCFS2
        0x0BD0_0BD0, // Lustre
        0x4750_4653, // GPFS
        0x2003_0528, // OrangeFS
    ];
    REMOTE.contains(&magic)
}

/// Whether a read may wait for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    Yes,
    No,
}

/// The metadata of the file at `path` and `ranges` of it (`None`: the
/// whole file), if it matches `options`' preconditions. With `Wait::No`,
/// `Ok(None)` when a byte is not in the page cache (then nothing is
/// changed: ask again with `Wait::Yes`).
fn read_file(
    at: FileAt<'_>,
    location: Path,
    ranges: Option<&[GetRange]>,
    options: &GetOptions,
    buffers: &Arc<BufferPool>,
    wait: Wait,
) -> object_store::Result<Option<Fetched>> {
    let path = at.path;
    let Some((file, metadata)) = open(at, wait)? else {
        return Ok(None);
    };
    let meta = object_meta(location, &metadata);
    options.check_preconditions(&meta)?;
    let ranges = resolve(ranges, meta.size)?;
    let Some(parts) = read_ranges(&file, &ranges, buffers, wait).map_err(generic)? else {
        return Ok(None);
    };
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
    Ok(Some((meta, ranges.into_iter().zip(parts).collect())))
}

/// `ranges` (`None`: the whole file) as byte ranges of a file of `size`.
fn resolve(ranges: Option<&[GetRange]>, size: u64) -> object_store::Result<Vec<Range<u64>>> {
    match ranges {
        None => Ok(std::iter::once(0..size).collect()),
        Some(ranges) => ranges
            .iter()
            .map(|r| match r {
                // Empty: nothing to read (object_store refuses them as ranges).
                GetRange::Bounded(r) if r.is_empty() => Ok(r.start..r.start),
                r => r.as_range(size),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| generic(std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))),
    }
}

/// Open the regular file at `path`; anything else (a directory, FIFO,
/// socket or device) is no stored object, and is not found. The open never
/// waits for a FIFO's writer; when it would wait for a lease to be broken,
/// `None` with `Wait::No` (ask again with `Wait::Yes`, which waits).
fn open(at: FileAt<'_>, wait: Wait) -> object_store::Result<Option<(File, Metadata)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = at.path;
    let open_with = |flags| std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path);
    let file = match open_with(libc::O_NONBLOCK) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && wait == Wait::No => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => open_with(0),
        opened => opened,
    }
    .map_err(|e| not_found_or_generic(path, e))?;
    at.check(&file)?;
    let metadata = file.metadata().map_err(generic)?;
    if !metadata.is_file() {
        return Err(not_a_file(path));
    }
    if wait == Wait::Yes {
        // Local file systems ignore O_NONBLOCK for regular files; a
        // network one might not.
        clear_nonblocking(&file).map_err(generic)?;
    }
    Ok(Some((file, metadata)))
}

fn clear_nonblocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on an open descriptor with integer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A file's path, and the real directory it must resolve into.
#[derive(Clone, Copy)]
struct FileAt<'a> {
    path: &'a std::path::Path,
    root: &'a Root,
}

impl FileAt<'_> {
    /// Not found unless the open `file` really is inside the directory
    /// (as it is now: resolved again before a file is refused).
    fn check(&self, file: &File) -> object_store::Result<()> {
        let real = real_path(file, self.path).map_err(|e| not_found_or_generic(self.path, e))?;
        let inside = |fresh| self.root.real(fresh).is_ok_and(|dir| real.starts_with(dir));
        match inside(false) || inside(true) {
            true => Ok(()),
            false => Err(object_store::Error::NotFound {
                path: self.path.display().to_string(),
                source: "a link out of the dataset's directory".into(),
            }),
        }
    }
}

/// Where the open `file` really is: the kernel's name for its descriptor
/// (the file opened, whatever links led there).
#[cfg(target_os = "linux")]
fn real_path(file: &File, path: &std::path::Path) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    // Without /proc (some sandboxes), the path's links resolved.
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).or_else(|_| std::fs::canonicalize(path))
}

#[cfg(not(target_os = "linux"))]
fn real_path(_file: &File, path: &std::path::Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// The metadata of the regular file at `path` (following links inside the
/// directory, as `open` does): a path-only open, its stat and its check.
fn stat(at: FileAt<'_>, location: Path) -> object_store::Result<ObjectMeta> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = at.path;
    #[cfg(target_os = "linux")]
    let flags = libc::O_PATH;
    #[cfg(not(target_os = "linux"))]
    let flags = libc::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| not_found_or_generic(path, e))?;
    at.check(&file)?;
    let metadata = file.metadata().map_err(|e| not_found_or_generic(path, e))?;
    if !metadata.is_file() {
        return Err(not_a_file(path));
    }
    Ok(object_meta(location, &metadata))
}

/// A missing file (or a path through a file, or a directory) is not found.
fn not_found_or_generic(path: &std::path::Path, error: std::io::Error) -> object_store::Error {
    use std::io::ErrorKind::{IsADirectory, NotADirectory, NotFound};
    match error.kind() {
        NotFound | NotADirectory | IsADirectory => object_store::Error::NotFound {
            path: path.display().to_string(),
            source: Box::new(error),
        },
        _ => generic(error),
    }
}

/// A directory, FIFO, socket or device where a stored object was asked for.
fn not_a_file(path: &std::path::Path) -> object_store::Error {
    object_store::Error::NotFound {
        path: path.display().to_string(),
        source: "not a regular file".into(),
    }
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
        e_tag: Some(format!("\"{:x}-{micros:x}-{size:x}\"", metadata.ino())),
        version: None,
    }
}

/// Read `ranges` of `file` into one buffer (without zeroing it first) and
/// slice it; a range past the end of the file comes back short. With
/// `Wait::No`, `None` as soon as a byte is not in the page cache.
fn read_ranges(
    file: &File,
    ranges: &[Range<u64>],
    buffers: &Arc<BufferPool>,
    wait: Wait,
) -> std::io::Result<Option<Vec<Bytes>>> {
    let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    let mut buffer = buffers.take_empty(total as usize);
    let mut bounds = Vec::with_capacity(ranges.len());
    for range in ranges {
        let start = buffer.len();
        let want = (range.end - range.start) as usize;
        let read = match wait {
            Wait::Yes => read_at(file, &mut buffer, range.start, want)?,
            Wait::No => match read_cached(file, &mut buffer, range.start, want)? {
                Some(n) => n,
                None => return Ok(None),
            },
        };
        debug_assert_eq!(buffer.len(), start + read);
        bounds.push(start..buffer.len());
    }
    let buffer = BufferPool::into_bytes(buffers, buffer);
    Ok(Some(bounds.into_iter().map(|b| buffer.slice(b)).collect()))
}

/// Append up to `want` bytes of `file` from `offset` to `buffer` (fewer
/// only at the end of the file); the count appended.
fn read_at(file: &File, buffer: &mut Vec<u8>, offset: u64, want: usize) -> std::io::Result<usize> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(offset))?;
    let start = buffer.len();
    reader.take(want as u64).read_to_end(buffer)?;
    Ok(buffer.len() - start)
}

/// [`read_at`] from the page cache alone: `None` when a byte of the range
/// is not there (nothing appended), or where the system cannot tell.
#[cfg(target_os = "linux")]
fn read_cached(file: &File, buffer: &mut Vec<u8>, offset: u64, want: usize) -> std::io::Result<Option<usize>> {
    use std::os::fd::AsRawFd;
    buffer.reserve(want);
    let start = buffer.len();
    let mut done = 0;
    while done < want {
        let spare = &mut buffer.spare_capacity_mut()[done..want];
        let iov = libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: spare.len(),
        };
        let at = (offset + done as u64) as libc::off_t;
        // SAFETY: the iovec points into the buffer's spare capacity, which
        // outlives the call; the kernel writes at most iov_len bytes there.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at, libc::RWF_NOWAIT) };
        match n {
            // End of file, or (Linux 5.9 and 5.10) RWF_NOWAIT's spurious 0:
            // the blocking read tells which.
            0 => return Ok(None),
            n if n > 0 => done += n as usize,
            _ => {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Not cached, or no RWF_NOWAIT here (old kernel, some file systems).
                    Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => return Ok(None),
                    _ => return Err(err),
                }
            }
        }
    }
    // SAFETY: the kernel initialised the first `done` bytes after `start`.
    unsafe { buffer.set_len(start + done) };
    Ok(Some(done))
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_: &File, _: &mut Vec<u8>, _: u64, _: usize) -> std::io::Result<Option<usize>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;

    use super::*;

    #[test]
    fn file_paths_are_object_stores_own() {
        let base = tempfile::tempdir().unwrap();
        let fs = Arc::new(LocalFileSystem::new());
        for name in ["plain", "a dir", "with%25percent", "ünï", "x#1", "sp ace/and%2Fslash"] {
            let dir = base.path().join(name);
            let local = LocalFiles::new(fs.clone(), Arc::default(), &dir);
            assert!(local.root.is_some(), "{name}");
            let root = Path::from_absolute_path(&dir).unwrap();
            let keys = [
                "zarr.json",
                "c/0/1",
                "a.b/c-d_e/0.0",
                "x#12",
                "sp ace",
                "p%25",
                "ü",
                "a/%2E%2E/b",
            ];
            for key in keys {
                let location = Path::from_iter(root.parts().chain(Path::from(key).parts()));
                let ours = local.file_path(&location).map_err(|e| e.to_string());
                let theirs = fs.path_to_filesystem(&location).map_err(|e| e.to_string());
                assert_eq!(ours, theirs, "dir {name:?}, key {key:?}");
            }
            let outside = Path::from_absolute_path(base.path().join("elsewhere/c/0")).unwrap();
            assert_eq!(
                local.file_path(&outside).unwrap(),
                fs.path_to_filesystem(&outside).unwrap()
            );
        }
    }

    #[test]
    fn only_plain_keys_map_to_themselves() {
        for key in ["zarr.json", "c/0/1", "a.b/c-d_e/0.0", ".zarray"] {
            assert!(maps_to_itself(key), "{key}");
        }
        for key in ["", "a//b", "/a", "a/", "./a", "a/..", "a b", "a%2F", "x#1", "ü"] {
            assert!(!maps_to_itself(key), "{key}");
        }
    }

    fn fixture() -> (tempfile::TempDir, LocalFiles, Path) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("shard"), (0u8..100).collect::<Vec<_>>()).unwrap();
        let location = Path::from_absolute_path(dir.path().join("shard")).unwrap();
        let local = LocalFiles::new(Arc::new(LocalFileSystem::new()), Arc::default(), dir.path());
        (dir, local, location)
    }

    /// Links inside the directory are followed; links that resolve
    /// outside it (a file elsewhere, another dataset's directory, through a
    /// linked parent) serve nothing, to reads, HEADs and listings alike,
    /// on the calling thread and on a blocking one.
    #[tokio::test]
    async fn links_out_of_the_directory_are_not_followed() {
        use std::os::unix::fs::symlink;
        let base = tempfile::tempdir().unwrap();
        let (ours, theirs) = (base.path().join("ours.zarr"), base.path().join("theirs.zarr"));
        std::fs::create_dir_all(ours.join("c")).unwrap();
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(ours.join("c/0"), b"ours").unwrap();
        std::fs::write(theirs.join("zarr.json"), b"secret").unwrap();
        std::fs::write(base.path().join("passwd"), b"root:x:0:0").unwrap();
        symlink("c/0", ours.join("inside")).unwrap();
        symlink(ours.join("c"), ours.join("inside_dir")).unwrap();
        symlink(base.path().join("passwd"), ours.join("passwd")).unwrap();
        symlink(theirs.join("zarr.json"), ours.join("zarr.json")).unwrap();
        symlink(&theirs, ours.join("other")).unwrap();
        symlink("../theirs.zarr/zarr.json", ours.join("relative")).unwrap();
        let local = LocalFiles::new(Arc::new(LocalFileSystem::new()), Arc::default(), &ours);
        let at = |key: &str| Path::from_absolute_path(ours.join(key)).unwrap();
        for blocking in [false, true] {
            let local = LocalFiles {
                inline: !blocking,
                ..local.clone()
            };
            for key in ["inside", "inside_dir/0", "c/0"] {
                let (_, parts) = local.read(at(key), None, GetOptions::default()).await.unwrap();
                assert_eq!(&parts[0].1[..], b"ours", "{key}");
                assert!(local.head(at(key)).await.is_ok(), "{key}");
            }
            for key in ["passwd", "zarr.json", "other/zarr.json", "relative"] {
                let err = local.read(at(key), None, GetOptions::default()).await.unwrap_err();
                assert!(matches!(err, object_store::Error::NotFound { .. }), "{key}: {err}");
                let err = local.head(at(key)).await.unwrap_err();
                assert!(matches!(err, object_store::Error::NotFound { .. }), "{key}: {err}");
            }
        }
        assert!(local.lists_inside("") && local.lists_inside("inside_dir") && local.lists_inside("absent"));
        assert!(!local.lists_inside("other"));
        // A dataset directory that is itself a link, moved to a new release.
        for release in ["v1", "v2"] {
            std::fs::create_dir_all(base.path().join(release)).unwrap();
            std::fs::write(base.path().join(release).join("f"), release).unwrap();
        }
        let current = base.path().join("current");
        symlink(base.path().join("v1"), &current).unwrap();
        let local = LocalFiles::new(Arc::new(LocalFileSystem::new()), Arc::default(), &current);
        let f = Path::from_absolute_path(current.join("f")).unwrap();
        let (_, parts) = local.read(f.clone(), None, GetOptions::default()).await.unwrap();
        assert_eq!(&parts[0].1[..], b"v1");
        std::fs::remove_file(&current).unwrap();
        symlink(base.path().join("v2"), &current).unwrap();
        let (_, parts) = local.read(f.clone(), None, GetOptions::default()).await.unwrap();
        assert_eq!(&parts[0].1[..], b"v2");
        assert!(local.head(f).await.is_ok());
    }

    #[test]
    fn network_and_fuse_file_systems_may_block() {
        // NFS, CIFS, FUSE, Ceph, 9p
        for magic in [0x6969, 0xFF53_4D42, 0x6573_5546, 0x00C3_6400, 0x0102_1997] {
            assert!(remote_file_system(magic), "{magic:#x}");
        }
        // ext4, xfs, btrfs, tmpfs, overlayfs
        for magic in [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630] {
            assert!(!remote_file_system(magic), "{magic:#x}");
        }
        let dir = tempfile::tempdir().unwrap();
        assert!(
            may_block(&dir.path().join("absent")),
            "a file system that cannot be told"
        );
    }

    /// Where reads may block, small ones go to a blocking thread and give
    /// the same bytes and checks.
    #[tokio::test]
    async fn reads_where_opens_may_block() {
        let (_dir, local, location) = fixture();
        let local = LocalFiles { inline: false, ..local };
        let small = Some(vec![GetRange::Bounded(10..20), GetRange::Suffix(2)]);
        let (meta, parts) = local
            .read(location.clone(), small.clone(), GetOptions::default())
            .await
            .unwrap();
        let got: Vec<_> = parts.iter().map(|(_, b)| b.to_vec()).collect();
        assert_eq!(got, [(10u8..20).collect::<Vec<_>>(), vec![98, 99]]);
        let stale = GetOptions {
            if_match: Some(format!("{}-0", meta.e_tag.unwrap())),
            ..GetOptions::default()
        };
        let err = local.read(location, small, stale).await.unwrap_err();
        assert!(matches!(err, object_store::Error::Precondition { .. }), "{err}");
    }

    #[tokio::test]
    async fn versions_match_object_stores_own() {
        let (_dir, local, location) = fixture();
        let theirs = LocalFileSystem::new().head(&location).await.unwrap();
        let (read, _) = local.read(location.clone(), None, GetOptions::default()).await.unwrap();
        for blocking in [false, true] {
            let local = LocalFiles {
                inline: !blocking,
                ..local.clone()
            };
            let head = local.head(location.clone()).await.unwrap();
            assert_eq!(head, theirs, "blocking {blocking}");
        }
        assert_eq!((read.e_tag, read.size), (theirs.e_tag, theirs.size));
    }

    /// A file rewritten in place, or replaced by another, has a new version.
    #[tokio::test]
    async fn a_changed_file_has_a_new_version() {
        let (dir, local, location) = fixture();
        let before = local.head(location.clone()).await.unwrap();
        // Same inode, same size, a later modification time.
        std::fs::write(dir.path().join("shard"), [7u8; 100]).unwrap();
        let later = std::time::SystemTime::from(before.last_modified) + std::time::Duration::from_millis(1);
        let file = std::fs::File::options()
            .write(true)
            .open(dir.path().join("shard"))
            .unwrap();
        file.set_modified(later).unwrap();
        let before = before.e_tag;
        let rewritten = local.head(location.clone()).await.unwrap().e_tag;
        assert_ne!(rewritten, before);
        std::fs::write(dir.path().join("other"), [7u8; 100]).unwrap();
        std::fs::rename(dir.path().join("other"), dir.path().join("shard")).unwrap();
        let replaced = local.head(location).await.unwrap().e_tag;
        assert_ne!(replaced, rewritten);
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

    /// A small read (tried from the page cache first) checks the version
    /// as a large one does.
    #[tokio::test]
    async fn small_reads_check_the_version() {
        let (_dir, local, location) = fixture();
        let small = || Some(vec![GetRange::Bounded(10..20)]);
        let stale = GetOptions {
            if_match: Some("1-2-3".into()),
            ..GetOptions::default()
        };
        let err = local.read(location.clone(), small(), stale).await.unwrap_err();
        assert!(matches!(err, object_store::Error::Precondition { .. }), "{err}");
        let (meta, parts) = local
            .read(location.clone(), small(), GetOptions::default())
            .await
            .unwrap();
        assert_eq!(parts[0].1.to_vec(), (10u8..20).collect::<Vec<_>>());
        let current = GetOptions {
            if_match: meta.e_tag,
            ..GetOptions::default()
        };
        assert!(local.read(location, small(), current).await.is_ok());
    }

    /// What the page cache gives equals what a read gives, short at the end.
    #[test]
    fn cached_reads_equal_plain_reads() {
        let (dir, _, _) = fixture();
        let file = File::open(dir.path().join("shard")).unwrap();
        for (offset, want) in [(0, 100), (10, 50), (90, 50), (100, 5)] {
            let (mut plain, mut cached) = (vec![9u8], vec![9u8]);
            let n = read_at(&file, &mut plain, offset, want).unwrap();
            // None: not cached, or a file system that cannot tell (then the caller waits).
            if let Some(m) = read_cached(&file, &mut cached, offset, want).unwrap() {
                assert_eq!((m, &cached), (n, &plain), "{offset} {want}");
            }
        }
    }

    #[tokio::test]
    async fn missing_files_directories_and_fifos_are_not_found() {
        let (dir, local, location) = fixture();
        let through_file = Path::from_absolute_path(dir.path().join("shard/zarr.json")).unwrap();
        let directory = Path::from_absolute_path(dir.path()).unwrap();
        let absent = Path::from(format!("{location}-absent"));
        // A read of a FIFO must not wait for a writer (it would stall a runtime thread).
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let fifo = Path::from_absolute_path(fifo).unwrap();
        for path in [through_file, directory, absent, fifo] {
            let err = local.read(path.clone(), None, GetOptions::default()).await.unwrap_err();
            assert!(matches!(err, object_store::Error::NotFound { .. }), "{path}: {err}");
            let err = local.head(path.clone()).await.unwrap_err();
            assert!(
                matches!(err, object_store::Error::NotFound { .. }),
                "head {path}: {err}"
            );
        }
    }
}
