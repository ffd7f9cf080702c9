//! Writes of local files: each a new file beside the old one, flushed to
//! the disk and renamed into place (readers see the old file or the new,
//! never a mix; after a crash of the machine too), writers of one file
//! serialized within the process, and every directory written inside the
//! served directory's real path.
//!
//! object_store's local `put` would follow a link out of the directory;
//! here the deepest existing ancestor of the file's directory, and the
//! directory once created, must really lie inside it. The file itself may
//! be a link: a rename replaces the link, never what it points to.
//! Several processes writing one directory are not serialized (api.md 4.2).

use std::io::Write;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;

use object_store::path::Path;

use super::{object_meta, LocalFiles, Root};
use crate::storage::{Expect, Payload, StoreError};

/// Writers of files whose paths hash alike wait for each other.
static STRIPES: LazyLock<Vec<tokio::sync::Mutex<()>>> =
    LazyLock::new(|| (0..256).map(|_| tokio::sync::Mutex::new(())).collect());

/// Names temporary files apart within the process.
static NEXT_TEMPORARY: AtomicU64 = AtomicU64::new(0);

fn stripe(path: &FsPath) -> &'static tokio::sync::Mutex<()> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    path.hash(&mut hasher);
    &STRIPES[hasher.finish() as usize % STRIPES.len()]
}

impl LocalFiles {
    /// Write `data` to the file of `location` if it is as `expect` says;
    /// the new file's ETag.
    pub(in crate::storage) async fn put(
        &self,
        key: &str,
        location: Path,
        data: Payload,
        expect: Expect,
    ) -> Result<Option<String>, StoreError> {
        let path = self.file_path(&location).map_err(failed)?;
        // The turn moves into the blocking task: if this future is dropped
        // (a timeout, a client gone), the file is still checked, written
        // and renamed before the next writer of it may start.
        let turn = stripe(&path).lock().await;
        let (served, key) = (self.served.clone(), key.to_string());
        blocking(move || {
            let _turn = turn;
            check(&path, &expect, &key)?;
            let dir = path.parent().ok_or_else(|| StoreError::InvalidKey(key.clone()))?;
            make_inside(&served, dir, &key)?;
            replace(&path, dir, &data)?;
            let metadata = std::fs::metadata(&path).map_err(io_failed)?;
            Ok(object_meta(location, &metadata).e_tag)
        })
        .await
    }

    /// Remove the file of `location` if it is as `expect` says (a missing
    /// file is already removed).
    pub(in crate::storage) async fn delete(&self, key: &str, location: Path, expect: Expect) -> Result<(), StoreError> {
        let path = self.file_path(&location).map_err(failed)?;
        let turn = stripe(&path).lock().await;
        let (served, key) = (self.served.clone(), key.to_string());
        blocking(move || {
            let _turn = turn;
            check(&path, &expect, &key)?;
            let dir = path.parent().ok_or_else(|| StoreError::InvalidKey(key.clone()))?;
            if !dir.exists() {
                return Ok(());
            }
            inside(&served, dir, &key)?;
            match std::fs::remove_file(&path) {
                Ok(()) => sync_dir(dir),
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_failed(e)),
                Err(_) => Ok(()),
            }
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Unavailable(format!("a local write failed: {e}")))?
}

/// [`StoreError::Changed`] unless the file is as `expect` says.
fn check(path: &FsPath, expect: &Expect, key: &str) -> Result<(), StoreError> {
    let current = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Some(object_meta(Path::default(), &m).e_tag),
        Ok(_) => return Err(StoreError::Forbidden(format!("'{key}' is not a regular file"))),
        Err(e) if missing(&e) => None,
        Err(e) => return Err(io_failed(e)),
    };
    let holds = match expect {
        Expect::Anything => true,
        Expect::Absent => current.is_none(),
        Expect::Version(etag) => current.flatten().as_deref() == Some(etag.as_str()),
    };
    match holds {
        true => Ok(()),
        false => Err(StoreError::Changed(key.to_string())),
    }
}

fn missing(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    matches!(e.kind(), NotFound | NotADirectory)
}

/// Create `dir` (and its parents) inside the served directory.
fn make_inside(served: &Root, dir: &FsPath, key: &str) -> Result<(), StoreError> {
    let mut existing = dir;
    while !existing.exists() {
        existing = existing
            .parent()
            .ok_or_else(|| StoreError::Unavailable("no directory to write in".into()))?;
    }
    inside(served, existing, key)?;
    std::fs::create_dir_all(dir).map_err(io_failed)?;
    inside(served, dir, key)?;
    // Each new directory's entry is made durable in its parent.
    let mut made = dir;
    while made != existing {
        let parent = made.parent().unwrap_or(existing);
        sync_dir(parent)?;
        made = parent;
    }
    Ok(())
}

/// Make the entries of `dir` (a file renamed in, or removed) durable. File
/// systems that cannot flush a directory (some FUSE and CIFS mounts say
/// so with EINVAL) are left as they are.
#[cfg(unix)]
fn sync_dir(dir: &FsPath) -> Result<(), StoreError> {
    match std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOTSUP)) => Ok(()),
        done => done.map_err(io_failed),
    }
}

/// Directories are not opened as files elsewhere: a rename is flushed
/// with its file.
#[cfg(not(unix))]
fn sync_dir(_dir: &FsPath) -> Result<(), StoreError> {
    Ok(())
}

/// [`StoreError::Forbidden`] unless `dir` really lies inside the served
/// directory (resolved again if it seems not to: it may have moved).
fn inside(served: &Root, dir: &FsPath, key: &str) -> Result<(), StoreError> {
    let real = std::fs::canonicalize(dir).map_err(io_failed)?;
    for fresh in [false, true] {
        if real.starts_with(served.real(fresh).map_err(failed)?) {
            return Ok(());
        }
    }
    Err(StoreError::Forbidden(format!(
        "'{key}' leads outside the dataset's directory; nothing was written"
    )))
}

/// Write `data` to a new file in `dir`, flush it to the disk, rename it
/// onto `path` and flush `dir`: once this returns, a crash of the machine
/// leaves the new file, never an empty or partial one.
fn replace(path: &FsPath, dir: &FsPath, data: &Payload) -> Result<(), StoreError> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let n = NEXT_TEMPORARY.fetch_add(1, Ordering::Relaxed);
    let temporary: PathBuf = dir.join(format!(".{name}.{}-{n}.partial", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create_new(&temporary)?;
        for part in data.parts() {
            file.write_all(part)?;
        }
        file.sync_data()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written.map_err(io_failed)?;
    sync_dir(dir)
}

fn io_failed(e: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("local write failed: {e}"))
}

fn failed(e: object_store::Error) -> StoreError {
    StoreError::Unavailable(e.to_string())
}
