//! A tool's schemas as the catalog index keeps them: in the file's detail
//! section, read by byte range on `describe` ([`IndexedSource`]). The index
//! itself (its layout, building and loading it) is `index.rs`; this part is
//! here, with the tool model, because a loaded tool holds it and the tool
//! model imports nothing above it.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::typescript::Refs;

/// The catalog index's errors, at start and on `describe` alike.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "cannot read the catalog index {file}: {error}; build it with `executor catalog build --config <sources file> \
         --out {file}`"
    )]
    Read { file: PathBuf, error: std::io::Error },
    #[error(
        "{file} is not a catalog index this executor reads ({problem}); rebuild it with `executor catalog build \
         --config <sources file> --out {file}`"
    )]
    Format { file: PathBuf, problem: String },
    #[error(
        "the catalog index {file} is stale: {problem}; rebuild it with `executor catalog build --config <sources \
         file> --out {file}`"
    )]
    Stale { file: PathBuf, problem: String },
    #[error("cannot index source `{namespace}`: {problem}; fix the source in the sources file, then build again")]
    Source { namespace: String, problem: String },
    #[error("cannot write the catalog index {file}: {error}")]
    Write { file: PathBuf, error: std::io::Error },
}

/// A byte range of the detail section: offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span(pub(crate) u64, pub(crate) u64);

/// The index file, kept open for the details.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    /// Where the detail section starts.
    details: u64,
}

/// One indexed source's details: the tools' schemas and the components
/// their `$ref`s point into, each read on first use and then kept.
#[derive(Debug)]
pub struct IndexedSource {
    file: Arc<IndexFile>,
    components: BTreeMap<String, BTreeMap<String, Component>>,
}

#[derive(Debug)]
struct Component {
    span: Span,
    value: OnceLock<Value>,
}

impl IndexFile {
    /// `file`, open at `path`, whose detail section starts at `details`.
    pub(crate) fn new(path: PathBuf, file: std::fs::File, details: u64) -> Self {
        Self { path, file: Mutex::new(file), details }
    }

    pub(crate) fn path(&self) -> &PathBuf {
        &self.path
    }
}

impl IndexedSource {
    /// The details of a source in `file`: its `components`, entry by entry
    /// (`schemas` -> `Pet` -> where its JSON text is), none read yet.
    pub(crate) fn new(file: Arc<IndexFile>, components: BTreeMap<String, BTreeMap<String, Span>>) -> Self {
        let components = components
            .into_iter()
            .map(|(section, entries)| {
                let entries = entries
                    .into_iter()
                    .map(|(name, span)| (name, Component { span, value: OnceLock::new() }))
                    .collect();
                (section, entries)
            })
            .collect();
        Self { file, components }
    }

    /// A JSON text of the detail section.
    pub fn read(&self, Span(offset, length): Span) -> Result<String, IndexError> {
        let file = &self.file;
        let mut bytes = vec![0; length as usize];
        // A poisoned lock only means another read failed: the file is as it was.
        let mut handle = file.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        handle
            .seek(SeekFrom::Start(file.details + offset))
            .and_then(|_| handle.read_exact(&mut bytes))
            .map_err(|error| IndexError::Read { file: file.path.clone(), error })?;
        String::from_utf8(bytes)
            .map_err(|_| IndexError::Format { file: file.path.clone(), problem: "a schema is not UTF-8".into() })
    }
}

/// `#/components/<section>/<name>[/<inside>]`, as the document would answer
/// it. A component that cannot be read (the index file went bad under a
/// running process) is unknown, as a dangling `$ref` is.
impl Refs for IndexedSource {
    fn target(&self, reference: &str) -> Option<&Value> {
        let unescape = |segment: &str| segment.replace("~1", "/").replace("~0", "~");
        let mut segments = reference.strip_prefix("#/components/")?.splitn(3, '/');
        let (section, name, inside) = (segments.next()?, segments.next()?, segments.next());
        let component = self.components.get(&unescape(section))?.get(&unescape(name))?;
        if component.value.get().is_none() {
            let text = self.read(component.span).ok()?;
            let _ = component.value.set(serde_json::from_str(&text).ok()?);
        }
        let value = component.value.get()?;
        match inside {
            None => Some(value),
            Some(inside) => value.pointer(&format!("/{inside}")),
        }
    }
}
