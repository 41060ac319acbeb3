//! The embedded store's data directory is its user's alone: it holds the
//! store (executions with their results, key hashes, sealed tokens) and the
//! key files. A directory or store file made here is private (0700, 0600)
//! whatever the umask. An existing one is left as its owner set it, and
//! reported when other users may open it.

use std::io;
use std::path::{Path, PathBuf};

/// What a private directory's and file's permission bits are.
const PRIVATE_DIR: u32 = 0o700;
const PRIVATE_FILE: u32 = 0o600;

/// Create `dir` and its missing parents, each private to this user. An
/// existing directory is left as it is.
pub fn create_data_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_data_dir(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, PRIVATE_DIR);
    match builder.create(dir) {
        // The umask may have taken bits from the mode asked for: set it outright.
        Ok(()) => set_mode(dir, PRIVATE_DIR),
        // Made meanwhile by another process: as for one that existed.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Create `path` empty and private to this user unless it exists.
pub(crate) fn create_private_file(path: &Path) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE);
    match options.open(path) {
        Ok(_) => set_mode(path, PRIVATE_FILE),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> io::Result<()> {
    Ok(())
}

/// A part of the data directory that other users of the machine may open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// The bits it should have.
    pub private: u32,
}

impl std::fmt::Display for Exposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} can be opened by other users of this machine (mode {:03o}); make it private with: chmod {:o} {}",
            self.path.display(),
            self.mode,
            self.private,
            shell_quoted(&self.path.to_string_lossy()),
        )
    }
}

/// `text` as one shell word: as it is when it is plainly safe, else in single quotes.
fn shell_quoted(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    match !text.is_empty() && text.chars().all(plain) {
        true => text.to_owned(),
        false => format!("'{}'", text.replace('\'', r"'\''")),
    }
}

/// The data directory `dir` and its store file `store`, where other users
/// may read, write or enter them (anything missing counts as private).
#[cfg(unix)]
pub(crate) fn exposed(dir: &Path, store: &Path) -> Vec<Exposed> {
    use std::os::unix::fs::PermissionsExt;
    [(dir, PRIVATE_DIR), (store, PRIVATE_FILE)]
        .into_iter()
        .filter_map(|(path, private)| {
            let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
            (mode & 0o077 != 0).then(|| Exposed { path: path.to_owned(), mode, private })
        })
        .collect()
}

#[cfg(not(unix))]
pub(crate) fn exposed(_: &Path, _: &Path) -> Vec<Exposed> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_quoted_only_when_the_shell_would_split_or_expand_it() {
        let cases = [
            ("/home/ada/.executor/executor.redb", "/home/ada/.executor/executor.redb"),
            ("/tmp/my data", "'/tmp/my data'"),
            ("/tmp/ada's", r"'/tmp/ada'\''s'"),
            ("/tmp/$HOME", "'/tmp/$HOME'"),
            ("", "''"),
        ];
        for (path, quoted) in cases {
            assert_eq!(shell_quoted(path), quoted, "{path:?}");
        }
    }
}
