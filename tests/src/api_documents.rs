//! Real API documents as their publishers ship them in npm packages, for the
//! catalog's discovery evaluation and the search bench: each a pinned version,
//! fetched by the test set-up with `npm pack` (which checks the package's
//! integrity against the registry) and cached under `target/api-documents`.
//! Never committed. A document that cannot be had fails the test that needs
//! it, saying why: these tests never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One file of one pinned npm package.
#[derive(Debug, Clone, Copy)]
pub struct Published {
    pub package: &'static str,
    pub version: &'static str,
    /// Inside the package, as its tarball names it under `package/`.
    pub file: &'static str,
}

/// GitHub's REST API (1,223 operations, 13 MB), as Octokit publishes it.
pub const GITHUB: Published =
    Published { package: "@octokit/openapi", version: "23.0.2", file: "generated/api.github.com.json" };

/// Directus, a headless CMS (136 operations): a different shape, the same
/// handful of verbs over many resources, summaries of two or three words.
pub const DIRECTUS: Published = Published { package: "@directus/specs", version: "15.2.0", file: "dist/openapi.json" };

#[derive(Debug)]
pub enum FetchError {
    /// A program (`npm`, `tar`) could not be started.
    Start { program: String, error: std::io::Error },
    /// A command ran and failed: which, and what it printed.
    Failed { command: String, output: String },
    /// The cache directory could not be written.
    Cache { path: PathBuf, error: std::io::Error },
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Start { program, error } => {
                write!(f, "cannot run {program} ({error}): Node.js, npm and tar fetch the published API documents")
            }
            Self::Failed { command, output } => write!(f, "`{command}` failed: {output}"),
            Self::Cache { path, error } => write!(f, "cannot write the cache {}: {error}", path.display()),
        }
    }
}

impl std::error::Error for FetchError {}

impl Published {
    /// The document's file, fetched first when the cache does not hold it.
    /// Panics with the reason when it cannot be fetched.
    pub fn path(&self) -> PathBuf {
        self.fetch().unwrap_or_else(|e| panic!("{}@{}: {e}", self.package, self.version))
    }

    /// Where the cache keeps it: one directory per package and version.
    fn cached(&self) -> PathBuf {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace");
        let package = self.package.replace('/', "+");
        workspace.join("target/api-documents").join(format!("{package}@{}", self.version)).join(self.file)
    }

    pub fn fetch(&self) -> Result<PathBuf, FetchError> {
        let target = self.cached();
        if target.is_file() {
            return Ok(target);
        }
        let directory = target.parent().expect("a file has a directory");
        let cache = |error| FetchError::Cache { path: directory.to_owned(), error };
        std::fs::create_dir_all(directory).map_err(cache)?;
        // Tests running at once each fetch into their own directory; the rename makes the file appear whole.
        let work = tempfile::tempdir_in(directory).map_err(cache)?;
        let spec = format!("{}@{}", self.package, self.version);
        let mut pack = Command::new("npm");
        pack.args(["pack", &spec, "--silent", "--pack-destination"]).arg(work.path());
        let tarball = run(&mut pack)?;
        let mut unpack = Command::new("tar");
        unpack.arg("-xzf").arg(work.path().join(tarball.trim())).arg("-C").arg(work.path());
        unpack.arg(format!("package/{}", self.file));
        run(&mut unpack)?;
        std::fs::rename(work.path().join("package").join(self.file), &target).map_err(cache)?;
        Ok(target)
    }
}

/// Runs `command`, answering what it printed.
fn run(command: &mut Command) -> Result<String, FetchError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|error| FetchError::Start { program, error })?;
    if !output.status.success() {
        let printed = [output.stdout, output.stderr].concat();
        return Err(FetchError::Failed {
            command: format!("{command:?}"),
            output: String::from_utf8_lossy(&printed).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
