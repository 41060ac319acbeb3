//! What the commands check of `--data-dir` before they open the embedded
//! store: a command that reads the store never creates one, and `serve` says
//! what to do about a directory it cannot write rather than failing deep in
//! the store.

use std::path::{Path, PathBuf};

/// The embedded store's file in the data directory (docs/storage.md).
pub const STORE_FILE: &str = "executor.redb";

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error(
        "there is no data directory at {0}, so no store to read: pass the --data-dir that `executor serve` uses \
         (by default .executor in the directory it was started in), or make a store there with \
         `executor keys create --owner NAME`"
    )]
    Missing(PathBuf),
    #[error(
        "{0} holds no store ({STORE_FILE}): pass the --data-dir that `executor serve` uses, or make a store there \
         with `executor keys create --owner NAME`"
    )]
    NoStore(PathBuf),
    #[error(
        "{path} is not writable by this process (user id {uid}), and the store, its keys and the admin socket are \
         kept in {dir}: make it writable for that user (e.g. `chown -R {uid} {dir}`) or pass another --data-dir. \
         In a container, a bind-mounted directory keeps its owner from the host: chown the host directory to \
         {uid}, or use a named volume (e.g. -v executor-data:/data)"
    )]
    NotWritable { path: PathBuf, dir: PathBuf, uid: u32 },
}

/// `dir` as the message shows it: absolute, so a relative default says where it was looked for.
fn shown(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned())
}

/// An existing store in `dir`, or why there is none; nothing is created.
pub fn require_store(dir: &Path) -> Result<(), DataDirError> {
    if !dir.is_dir() {
        return Err(DataDirError::Missing(shown(dir)));
    }
    if !dir.join(STORE_FILE).is_file() {
        return Err(DataDirError::NoStore(shown(dir)));
    }
    Ok(())
}

/// Whether this process can make and change the store in `dir`: the
/// directory (or, when it does not exist yet, the nearest parent that does)
/// and an existing store file must be writable.
#[cfg(unix)]
pub fn check_writable(dir: &Path) -> Result<(), DataDirError> {
    use rustix::fs::{Access, access};
    let absolute = shown(dir);
    let existing = absolute.ancestors().find(|p| p.exists()).unwrap_or(&absolute).to_owned();
    let store = absolute.join(STORE_FILE);
    let mut checks = vec![(existing, Access::WRITE_OK | Access::EXEC_OK)];
    if store.exists() {
        checks.push((store, Access::READ_OK | Access::WRITE_OK));
    }
    for (path, mode) in checks {
        if access(&path, mode).is_err() {
            let uid = rustix::process::geteuid().as_raw();
            return Err(DataDirError::NotWritable { path, dir: absolute, uid });
        }
    }
    Ok(())
}

#[cfg(not(unix))]
pub fn check_writable(_: &Path) -> Result<(), DataDirError> {
    Ok(())
}
