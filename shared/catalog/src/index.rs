//! The catalog index (`executor catalog build`): what a start needs of the
//! OpenAPI documents on file, so a process loads it instead of parsing them.
//!
//! A 30 MB document takes hundreds of milliseconds and more than a hundred
//! megabytes to parse; most of it is schemas, which only `describe` reads.
//! The index holds, per source, the tools' names, descriptions, effects and
//! HTTP operations (everything search, policy and calls use) in a small head,
//! and the schemas in a detail section read by byte range: a tool's own on
//! its `describe`, and each entry of the document's `components` (one per
//! schema, parameter, ...) the first time a description's `$ref` reaches it,
//! so a `describe` never loads every schema of a big document. Layout:
//!
//! ```text
//! executor-catalog-index 3\n
//! <length of the head in bytes>\n
//! <head: JSON>
//! <details: JSON texts, addressed by (offset, length) from here>
//! ```
//!
//! Each source records its document's length and CRC-32; a start whose
//! document differs refuses the index, so a stale index never serves tools
//! the document no longer has. A checksum, not a cryptographic hash: it
//! catches a document changed without rebuilding the index (any change, but
//! for one chance in four billion), not tampering, which would need write
//! access to the index as well; and it reads 30 MB in a few milliseconds at
//! start, where SHA-256 took 20 ms.
//!
//! A loaded tool's schemas are read from the detail section by
//! `tool/indexed.rs`, which the tools hold.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use executor_core::Effect;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{CatalogConfig, SourceKind, SpecLocation};
use crate::openapi;
use crate::tool::http::HttpOperation;
use crate::tool::indexed::IndexFile;
use crate::tool::{Schemas, Target, ToolDef};

// Still named here, as before they moved: `executor_catalog::index` is public.
pub use crate::config::INDEX_ENV;
pub use crate::tool::indexed::{IndexError, IndexedSource, Span};

/// Version 2 added parameters' declared types (`Param::kind`): a version 1
/// index would load without them and check no argument's type, so it is refused.
/// Version 3 added each tool's summary, which search items show.
/// Version 4 added each operation's `operationId`, which Cedar policies see,
/// and path parameters of several segments (`x-multi-segment`).
const MAGIC: &[u8] = b"executor-catalog-index 4\n";
/// The longest head length line read: digits and a newline.
const MAX_LENGTH_LINE: u64 = 24;

#[derive(Serialize, Deserialize)]
struct Head {
    sources: Vec<HeadSource>,
}

#[derive(Serialize, Deserialize)]
struct HeadSource {
    namespace: String,
    /// The document's length and CRC-32: `<length>:<crc, 8 hex digits>`.
    checksum: String,
    /// The document's `components`, entry by entry (`schemas` -> `Pet` -> its
    /// JSON text): what the tools' `$ref`s point into.
    components: BTreeMap<String, BTreeMap<String, Span>>,
    tools: Vec<HeadTool>,
}

#[derive(Serialize, Deserialize)]
struct HeadTool {
    path: String,
    description: String,
    summary: String,
    effect: Effect,
    operation: HttpOperation,
    input: Span,
    output: Option<Span>,
}

/// What `executor catalog build` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// Each indexed source's namespace and its number of tools.
    pub indexed: Vec<(String, usize)>,
    /// Sources the index does not hold (documents at URLs, MCP and GraphQL
    /// sources): they are connected at start as without an index.
    pub connected_at_start: Vec<String>,
}

/// Whether a source's tools come from the index: an OpenAPI document on file.
fn indexed_spec(kind: &SourceKind) -> Option<&Path> {
    match kind {
        SourceKind::OpenApi { spec: SpecLocation::File(path), .. } => Some(path),
        _ => None,
    }
}

/// Parse every OpenAPI document on file that `config` names and write their
/// index to `out` (through a temporary file beside it, so a running process
/// that has the old one open keeps reading the old one).
pub fn build(config: &CatalogConfig, out: &Path) -> Result<Built, IndexError> {
    let mut head = Head { sources: Vec::new() };
    let mut details = Vec::new();
    let mut built = Built { indexed: Vec::new(), connected_at_start: Vec::new() };
    let mut put = |text: &str| {
        let span = Span(details.len() as u64, text.len() as u64);
        details.extend_from_slice(text.as_bytes());
        span
    };
    for source in &config.sources {
        let Some(spec) = indexed_spec(&source.kind) else {
            built.connected_at_start.push(source.namespace.clone());
            continue;
        };
        let problem = |problem: String| IndexError::Source { namespace: source.namespace.clone(), problem };
        let text = std::fs::read_to_string(spec)
            .map_err(|e| problem(format!("cannot read the spec {}: {e}", spec.display())))?;
        let tools = openapi::load(&source.namespace, &text).map_err(|e| problem(e.to_string()))?;
        let mut root: Option<Arc<Value>> = None;
        let mut indexed = Vec::with_capacity(tools.len());
        for tool in tools {
            let (Schemas::Text { input, output, root: tool_root }, Target::Http(operation)) =
                (tool.schemas, tool.target)
            else {
                unreachable!("an OpenAPI document's tools carry their schemas and call over HTTP")
            };
            root = root.or(tool_root);
            indexed.push(HeadTool {
                path: tool.path,
                description: tool.description,
                summary: tool.summary,
                effect: tool.effect,
                operation: Arc::unwrap_or_clone(operation),
                input: put(&input),
                output: output.as_deref().map(&mut put),
            });
        }
        // Every tool of a document shares its components; a document without operations needs none.
        let mut components = BTreeMap::new();
        let sections = root.as_deref().and_then(|root| root.get("components")).and_then(Value::as_object);
        for (section, entries) in sections.into_iter().flatten() {
            let Some(entries) = entries.as_object() else { continue };
            let spans = entries.iter().map(|(name, entry)| (name.clone(), put(&entry.to_string()))).collect();
            components.insert(section.clone(), spans);
        }
        built.indexed.push((source.namespace.clone(), indexed.len()));
        head.sources.push(HeadSource {
            namespace: source.namespace.clone(),
            checksum: checksum(&mut text.as_bytes()).map_err(|e| problem(e.to_string()))?,
            components,
            tools: indexed,
        });
    }
    let head = serde_json::to_vec(&head).expect("the head is plain data");
    let write_error = |error| IndexError::Write { file: out.to_owned(), error };
    let mut temporary = out.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut bytes = Vec::with_capacity(MAGIC.len() + MAX_LENGTH_LINE as usize + head.len() + details.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(format!("{}\n", head.len()).as_bytes());
    bytes.extend_from_slice(&head);
    bytes.extend_from_slice(&details);
    std::fs::write(&temporary, bytes).map_err(write_error)?;
    std::fs::rename(&temporary, out).map_err(write_error)?;
    Ok(built)
}

fn checksum(reader: &mut impl Read) -> std::io::Result<String> {
    let mut hasher = crc32fast::Hasher::new();
    let mut length = 0;
    // Big reads: a 30 MB document in a few hundred system calls.
    let mut buffer = vec![0; 1 << 18];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => return Ok(format!("{length}:{:08x}", hasher.finalize())),
            Ok(n) => {
                hasher.update(&buffer[..n]);
                length += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The OpenAPI documents on file that `config` names, by namespace.
fn specs(config: &CatalogConfig) -> Vec<(&str, &Path)> {
    config.sources.iter().filter_map(|s| indexed_spec(&s.kind).map(|spec| (s.namespace.as_str(), spec))).collect()
}

/// The tools of the index at `path` for the documents `config` names, once
/// the index is checked against them ([`CatalogIndex::tools`]). The documents
/// are read on a thread of their own while the head is parsed.
pub fn load(path: &Path, config: &CatalogConfig) -> Result<Vec<(String, Vec<ToolDef>)>, IndexError> {
    let specs = specs(config);
    std::thread::scope(|scope| {
        let reading = scope.spawn(|| {
            specs.iter().map(|(_, spec)| std::fs::File::open(spec).and_then(|mut file| checksum(&mut file))).collect()
        });
        let index = CatalogIndex::open(path)?;
        let checksums: Vec<std::io::Result<String>> = reading.join().expect("reading a file does not panic");
        index.tools(&specs, checksums)
    })
}

/// An open index: the head in memory, the details on disk.
struct CatalogIndex {
    file: Arc<IndexFile>,
    sources: Vec<HeadSource>,
}

impl CatalogIndex {
    /// Read the head of the index at `path`; the details stay on disk.
    fn open(path: &Path) -> Result<Self, IndexError> {
        let read_error = |error| IndexError::Read { file: path.to_owned(), error };
        let format = |problem: &str| IndexError::Format { file: path.to_owned(), problem: problem.to_owned() };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut reader = BufReader::new(&file);
        let mut magic = vec![0; MAGIC.len()];
        reader.read_exact(&mut magic).map_err(|_| format("no index header"))?;
        if magic != MAGIC {
            return Err(format("no index header, or one of another version"));
        }
        let mut line = String::new();
        (&mut reader).take(MAX_LENGTH_LINE).read_line(&mut line).map_err(read_error)?;
        let length: u64 = line.trim_end().parse().map_err(|_| format("no head length"))?;
        let mut head = Vec::new();
        (&mut reader).take(length).read_to_end(&mut head).map_err(read_error)?;
        if head.len() as u64 != length {
            return Err(format("the file ends inside the head"));
        }
        let head: Head = serde_json::from_slice(&head).map_err(|e| format(&format!("head: {e}")))?;
        let details = (MAGIC.len() + line.len()) as u64 + length;
        Ok(Self { file: Arc::new(IndexFile::new(path.to_owned(), file, details)), sources: head.sources })
    }

    /// The index must hold exactly the OpenAPI documents on file `specs`
    /// (namespace, file), with `checksums` (theirs as they are now, in order);
    /// then their tools. Checking reads each document, never parses it.
    fn tools(
        self,
        specs: &[(&str, &Path)],
        checksums: Vec<std::io::Result<String>>,
    ) -> Result<Vec<(String, Vec<ToolDef>)>, IndexError> {
        let stale = |problem: String| IndexError::Stale { file: self.file.path().clone(), problem };
        if let Some(extra) = self.sources.iter().find(|s| !specs.iter().any(|(namespace, _)| *namespace == s.namespace))
        {
            return Err(stale(format!(
                "it holds source `{}`, which the sources file does not name as an OpenAPI document on file",
                extra.namespace
            )));
        }
        let mut out = Vec::with_capacity(specs.len());
        let mut sources = self.sources;
        for (&(namespace, spec), checksum) in specs.iter().zip(checksums) {
            let Some(at) = sources.iter().position(|s| s.namespace == namespace) else {
                return Err(stale(format!("it has no source `{namespace}`")));
            };
            let source = sources.swap_remove(at);
            let checksum = checksum.map_err(|e| {
                stale(format!("cannot read the spec {} of source `{namespace}` to check it: {e}", spec.display()))
            })?;
            if checksum != source.checksum {
                return Err(stale(format!(
                    "the spec {} of source `{namespace}` changed since the index was built",
                    spec.display()
                )));
            }
            let details = Arc::new(IndexedSource::new(self.file.clone(), source.components));
            let tools = source
                .tools
                .into_iter()
                .map(|tool| ToolDef {
                    path: tool.path,
                    namespace: namespace.to_owned(),
                    description: tool.description,
                    summary: tool.summary,
                    effect: tool.effect,
                    schemas: Schemas::Indexed { source: details.clone(), input: tool.input, output: tool.output },
                    target: Target::Http(Arc::new(tool.operation)),
                })
                .collect();
            out.push((namespace.to_owned(), tools));
        }
        Ok(out)
    }
}
