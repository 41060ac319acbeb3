//! Tool search, built once over all tools (and once over each source's
//! tools that are listed later).
//!
//! Ranking: BM25F, over a tool's text in fields weighted by how much a match
//! there says about the tool:
//!
//! | field | text | weight |
//! |---|---|---|
//! | name | the last path segment (the operation id) up to its first preposition | 3 |
//! | summary | the description's first line | 2.5 |
//! | group | the path segments between namespace and name (the tag) | 1.5 |
//! | qualifier | the rest of the name: `list_for_authenticated_user` lists, for a user | 1.5 |
//! | route | the HTTP path's literal segments | 1 |
//! | details | the rest of the description, its first 1,600 characters | 0.5 |
//!
//! Text is split into lower-case words (at non-alphanumerics and camelCase
//! humps; stop words and single letters are left out; in a query, the
//! values it names, such as `octocat/hello-world`, are left out too, and a
//! file's name, `package.json`, is the word "file") and each word is
//! reduced to its stem (Snowball's English stemmer: "merging" and "merge",
//! "branches" and "branch" are one term). A query becomes concepts
//! (`vocabulary.rs`: abbreviations and phrases people use taken for what
//! operations call them, what follows a preposition counting less). A tool
//! scores, per concept, the best of its alternatives; an alternative, the sum
//! of its words' BM25F scores (k1 = 1.2, term statistics over all the parts
//! searched together), so a term found in many tools ("repository") counts
//! less than a rare one ("branches"). A query word is also the longer terms
//! its stem starts, at half weight: any stem when no tool has the word
//! ("notif" finds "notifications"), stems of five letters or more otherwise
//! ("review" finds "reviewers").
//!
//! The sum is then multiplied by five factors, each measured on the
//! discovery evaluation (`tests/discovery.rs`, docs/benchmarks.md; the
//! query's side is in `search/query.rs`):
//! - coverage: the square root of the share of the query's concepts the tool
//!   matches, so a tool with all of them beats one with a rare word alone;
//! - precision: how much of the tool's name the query has, so `pulls.merge`
//!   beats `pulls.merge_async` for "merge a PR"; a name word the query has
//!   after a preposition counts as much as the concept there (0.6);
//! - form: 0.75 for a tool whose name has the words typed only in another
//!   form, so `list_branches` beats `get_branch` for "what branches", and
//!   `check_if_merged` beats `merge` for "has it been merged";
//! - intent: 1.4 for a tool that reads when the query asks to read ("what",
//!   "list", "show"), or writes when it asks to write ("open", "delete");
//! - lists: 1.4 for a tool that lists ("list" in its name) when the query
//!   asks who, what or which of something in the plural, or "is there".
//!
//! Tools matching nothing are left out; ties go to the shorter, then the
//! alphabetically first path. A query that is exactly a tool's path ranks it
//! first. An empty query lists every tool by path.

mod query;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::tool::{Target, ToolDef};
use crate::vocabulary;

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

const FIELDS: usize = 6;
const NAME: usize = 0;
const SUMMARY: usize = 1;
const GROUP: usize = 2;
const ROUTE: usize = 3;
const DETAILS: usize = 4;
const QUALIFIER: usize = 5;
/// BM25F's per-field weight and length normalisation (`b`): long fields are
/// normalised more, so a word in a short summary says more than in a page.
const WEIGHT: [f32; FIELDS] = [3.0, 2.5, 1.5, 1.0, 0.5, 1.5];
const B: [f32; FIELDS] = [0.6, 0.5, 0.3, 0.5, 0.75, 0.5];
const K1: f32 = 1.2;
/// How much of a long description is indexed: its first lines carry the meaning.
const DETAILS_CHARS: usize = 1600;
/// A term matched only as the start of longer ones counts this much.
const PREFIX: f32 = 0.5;
/// The shortest stem matched as the start of longer ones, when no tool has
/// it, and when tools do (shorter ones start too many: "repo", "report").
const PREFIX_CHARS: usize = 3;
const PREFIX_CHARS_KNOWN: usize = 5;
/// A tool's score is multiplied by the share of the query's concepts it
/// matches, to this power: a tool with every concept beats one with a rare
/// word of the query and nothing else.
const COVERAGE: f32 = 0.5;
/// The factor for a tool that reads when the query asks to read ("what",
/// "list", "show"), or writes when it asks to write ("open", "delete").
const INTENT: f32 = 1.4;
/// The precision factor of a tool whose name has none of the query's words,
/// against 2 for one whose name is all query: with `share` the part of the
/// name's words the query has, (`UNNAMED` + (1 - `UNNAMED`) * share) * (1 + share).
const UNNAMED: f32 = 0.2;
/// A tool whose name has the query's words only in another form ("merge"
/// for "merged", "branch" for "branches") counts 1 - `FORM`; with some as
/// typed, less is taken off (by the share in another form).
const FORM: f32 = 0.25;
/// The factor for a tool that lists when the query asks who, or what or
/// which of something in the plural ("what branches", "who starred").
const LISTS: f32 = 1.4;

/// One tool's counts of a term, per field.
#[derive(Debug, Clone, Copy)]
struct Posting {
    tool: u32,
    counts: [u8; FIELDS],
}

pub struct SearchIndex {
    /// Every term (stemmed) with the tools that have it, sorted by term.
    terms: Vec<(Box<str>, Vec<Posting>)>,
    /// Each tool's field lengths, in words.
    lengths: Vec<[u16; FIELDS]>,
    /// The mean of each field's length.
    average: [f32; FIELDS],
    /// Each tool's name words as written (lower case, unstemmed, space-separated).
    names: Vec<Box<str>>,
}

/// Lower-case words, split on non-alphanumerics and camelCase humps.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// File name endings that make a dotted word a file's name ("package.json").
const EXTENSIONS: &[&str] = &[
    "json", "md", "yml", "yaml", "txt", "js", "ts", "py", "rs", "go", "toml", "lock", "xml", "html", "css", "sh",
    "java", "rb", "cfg", "ini", "csv", "png", "zip",
];

/// What a whitespace-separated piece of a query is: words saying which
/// operation, or a value the task is about (`octocat/hello-world`,
/// `v1.2.0`, `release/1.x`) whose words would find tools by accident
/// ("package" of `package.json`). A value has a dot or slash inside, with a
/// digit, a hyphen, a file name's ending or a second slash; `ci/cd` and a
/// tool's path (`issues.create`) are words. A file's name says a file is
/// meant, so it stands for the word "file".
fn piece_words(piece: &str) -> Vec<String> {
    let value = piece.trim_matches(|c: char| !c.is_alphanumeric());
    if !value.contains(['.', '/']) {
        return words(piece);
    }
    let extension = value.rsplit_once('.').map(|(_, end)| end.to_lowercase());
    if extension.is_some_and(|end| EXTENSIONS.contains(&end.as_str())) {
        return vec!["file".to_owned()];
    }
    if value.contains(|c: char| c.is_ascii_digit() || c == '-') || value.matches('/').count() > 1 {
        return Vec::new();
    }
    words(piece)
}

/// A query's words (`words`), its values left out (`piece_words`).
fn query_words(query: &str) -> Vec<String> {
    query.split_whitespace().flat_map(piece_words).collect()
}

/// A word's term: its stem.
fn term(word: &str) -> String {
    STEMMER.stem(word).into_owned()
}

/// A tool's text by field.
fn fields(tool: &ToolDef) -> [String; FIELDS] {
    let segments: Vec<&str> = tool.path.split('.').collect();
    let group = segments.get(1..segments.len().saturating_sub(1)).unwrap_or_default().join(" ");
    let mut lines: Vec<&str> = tool.description.lines().collect();
    let route = match &tool.target {
        Target::Http(op) => {
            // The description ends with the operation's method and path: the route says it.
            if lines.last().is_some_and(|last| *last == format!("{} {}", op.method, op.path)) {
                lines.pop();
            }
            op.path.split('/').filter(|segment| !segment.starts_with('{')).collect::<Vec<_>>().join(" ")
        }
        Target::Mcp { .. } | Target::Graphql(_) => String::new(),
    };
    let summary = lines.first().map_or("", |line| *line);
    let details = lines.get(1..).unwrap_or_default().join("\n");
    let mut out: [String; FIELDS] = Default::default();
    let name = words(tool.name());
    let split = name.iter().position(|w| vocabulary::is_preposition(w)).unwrap_or(name.len());
    out[NAME] = name[..split].join(" ");
    out[QUALIFIER] = name[split..].join(" ");
    out[SUMMARY] = summary.chars().take(DETAILS_CHARS).collect();
    out[GROUP] = group;
    out[ROUTE] = route;
    out[DETAILS] = details.chars().take(DETAILS_CHARS).collect();
    out
}

impl SearchIndex {
    pub fn build(tools: &[ToolDef]) -> Self {
        // Words repeat across tools: each is stemmed once.
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut stems: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<Posting>> = Vec::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut counts: Vec<(u32, [u8; FIELDS])> = Vec::new();
        let mut names = Vec::with_capacity(tools.len());
        for (at, tool) in tools.iter().enumerate() {
            let mut length = [0u16; FIELDS];
            let fields = fields(tool);
            // The name without the group it repeats (`teams.teams_list_repos`).
            let name = match fields[NAME].split_once(' ') {
                Some((first, rest)) if fields[GROUP].split(' ').any(|g| g == first) => rest,
                _ => &fields[NAME],
            };
            names.push(name.into());
            for (field, text) in fields.iter().enumerate() {
                for word in words(text).into_iter().filter(|w| !vocabulary::is_stop_word(w)) {
                    let id = match ids.get(&word) {
                        Some(id) => *id,
                        None => {
                            let next = stems.len() as u32;
                            let id = *stems.entry(term(&word)).or_insert(next);
                            if id == next {
                                postings.push(Vec::new());
                            }
                            ids.insert(word, id);
                            id
                        }
                    };
                    let at = match counts.iter().position(|(seen, _)| *seen == id) {
                        Some(at) => at,
                        None => {
                            counts.push((id, [0; FIELDS]));
                            counts.len() - 1
                        }
                    };
                    counts[at].1[field] = counts[at].1[field].saturating_add(1);
                    length[field] = length[field].saturating_add(1);
                }
            }
            for (id, counts) in counts.drain(..) {
                postings[id as usize].push(Posting { tool: at as u32, counts });
            }
            lengths.push(length);
        }
        let mut terms: Vec<(Box<str>, Vec<Posting>)> = stems
            .into_iter()
            .map(|(stem, id)| (stem.into_boxed_str(), std::mem::take(&mut postings[id as usize])))
            .collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut average = [0.0; FIELDS];
        for length in &lengths {
            for field in 0..FIELDS {
                average[field] += f32::from(length[field]);
            }
        }
        average.iter_mut().for_each(|sum| *sum /= tools.len().max(1) as f32);
        Self { terms, lengths, average, names }
    }

    /// The tools that have `term`.
    fn postings(&self, term: &str) -> &[Posting] {
        match self.terms.binary_search_by(|(t, _)| (**t).cmp(term)) {
            Ok(at) => &self.terms[at].1,
            Err(_) => &[],
        }
    }

    /// The terms that start with `prefix` and are longer.
    fn extending<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let start = self.terms.partition_point(|(t, _)| **t <= *prefix);
        self.terms[start..].iter().take_while(move |(t, _)| t.starts_with(prefix)).map(|(t, _)| &**t)
    }

    /// A tool's BM25F score for a term with inverse document frequency `idf`.
    fn score(&self, posting: &Posting, idf: f32) -> f32 {
        let length = &self.lengths[posting.tool as usize];
        let weighted: f32 = (0..FIELDS)
            .map(|field| {
                let count = f32::from(posting.counts[field]);
                if count == 0.0 {
                    return 0.0;
                }
                let relative = f32::from(length[field]) / self.average[field];
                WEIGHT[field] * count / (1.0 - B[field] + B[field] * relative)
            })
            .sum();
        idf * weighted * (K1 + 1.0) / (K1 + weighted)
    }
}

/// The matches of `query` across several indexed parts, ranked together:
/// the catalog's tools, and the tools of sources listed later (MCP servers
/// that list their tools only to a connected owner).
pub fn search_parts<'t>(
    parts: &[(&SearchIndex, &'t [ToolDef])],
    query: &str,
    include: impl Fn(&ToolDef) -> bool,
) -> Vec<&'t ToolDef> {
    // A query of values alone ("package.json") is searched for their words.
    let typed = Some(query_words(query)).filter(|w| !w.is_empty()).unwrap_or_else(|| words(query));
    if typed.is_empty() {
        let mut all: Vec<&ToolDef> = parts.iter().flat_map(|(_, tools)| tools.iter()).filter(|t| include(t)).collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        return all;
    }
    let asked = query::Query::new(parts, &typed);
    let mut hits: Vec<(f32, &ToolDef)> = Vec::new();
    for (index, part) in parts {
        hits.extend(
            asked.scores(index, part, query.trim()).into_iter().filter(|(score, tool)| *score > 0.0 && include(tool)),
        );
    }
    hits.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then(a.path.len().cmp(&b.path.len())).then(a.path.cmp(&b.path)));
    hits.into_iter().map(|(_, tool)| tool).collect()
}
