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
//! | details | the rest of the description, its first 400 characters | 0.5 |
//!
//! Text is split into lower-case words (at non-alphanumerics and camelCase
//! humps; stop words and single letters are left out) and each word is
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
//! The sum is then multiplied by three factors, each measured on the
//! discovery evaluation (`tests/discovery.rs`, docs/benchmarks.md):
//! - coverage: the square root of the share of the query's concepts the tool
//!   matches, so a tool with all of them beats one with a rare word alone;
//! - precision: how much of the tool's name the query has, so `pulls.merge`
//!   beats `pulls.merge_async` for "merge a PR";
//! - intent: 1.4 for a tool that reads when the query asks to read ("what",
//!   "list", "show"), or writes when it asks to write ("open", "delete").
//!
//! Tools matching nothing are left out; ties go to the shorter, then the
//! alphabetically first path. A query that is exactly a tool's path ranks it
//! first. An empty query lists every tool by path.

use std::collections::HashMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::tool::{Target, ToolDef};
use crate::vocabulary::{self, Concept};

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
const DETAILS_CHARS: usize = 400;
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
        for (at, tool) in tools.iter().enumerate() {
            let mut length = [0u16; FIELDS];
            for (field, text) in fields(tool).iter().enumerate() {
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
        Self { terms, lengths, average }
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

/// The terms a query word may be, each with the factor it counts by.
type Variants = Vec<(String, f32)>;

/// A query's concept as the indexes' terms.
struct Resolved {
    /// How much the concept counts: less when it only says where (after "in", "of", ...).
    weight: f32,
    /// Each alternative's weight and its words, each word as the terms it
    /// may be (its stem, and at a lower factor the terms its stem starts).
    alternatives: Vec<(f32, Vec<Variants>)>,
}

/// The terms a query word may be: its stem, and the longer terms its stem
/// starts ("notif" finds "notifications", "review" finds "reviewers").
fn variants(parts: &[(&SearchIndex, &[ToolDef])], word: &str) -> Variants {
    let stem = term(word);
    let known = parts.iter().any(|(index, _)| !index.postings(&stem).is_empty());
    let mut out = Vec::new();
    let shortest = if known { PREFIX_CHARS_KNOWN } else { PREFIX_CHARS };
    if stem.chars().count() >= shortest {
        let mut extended: Vec<&str> = parts.iter().flat_map(|(index, _)| index.extending(&stem)).collect();
        extended.sort_unstable();
        extended.dedup();
        out.extend(extended.into_iter().map(|t| (t.to_owned(), PREFIX)));
    }
    out.push((stem, 1.0));
    out
}

fn resolve(parts: &[(&SearchIndex, &[ToolDef])], concept: &Concept) -> Resolved {
    let mut alternatives: Vec<(f32, Vec<Variants>)> = concept
        .alternatives
        .iter()
        .map(|alternative| {
            let words = alternative.words.iter().map(|word| variants(parts, word)).collect();
            (alternative.weight, words)
        })
        .collect();
    // Words typed that no tool has leave what they stand for as sure as they would have been.
    let unknown = |words: &Vec<Variants>| {
        words.iter().flatten().all(|(term, _)| parts.iter().all(|(index, _)| index.postings(term).is_empty()))
    };
    if concept.typed && alternatives.first().is_some_and(|(_, words)| unknown(words)) {
        alternatives.iter_mut().skip(1).for_each(|(weight, _)| *weight = 1.0);
    }
    Resolved { weight: concept.weight, alternatives }
}

/// Scores of one part's tools, with the tools that have one, so that reading
/// them out leaves all at zero again.
struct Scores {
    values: Vec<f32>,
    touched: Vec<usize>,
}

impl Scores {
    fn new(tools: usize) -> Self {
        Self { values: vec![0.0; tools], touched: Vec::new() }
    }

    fn touch(&mut self, at: usize) {
        if self.values[at] == 0.0 {
            self.touched.push(at);
        }
    }

    fn add(&mut self, at: usize, value: f32) {
        self.touch(at);
        self.values[at] += value;
    }

    fn max(&mut self, at: usize, value: f32) {
        self.touch(at);
        self.values[at] = self.values[at].max(value);
    }

    /// Each touched tool's score, reset to zero.
    fn take(&mut self) -> Vec<(usize, f32)> {
        let values = &mut self.values;
        self.touched.drain(..).map(|at| (at, std::mem::take(&mut values[at]))).collect()
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
    let typed = words(query);
    if typed.is_empty() {
        let mut all: Vec<&ToolDef> = parts.iter().flat_map(|(_, tools)| tools.iter()).filter(|t| include(t)).collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        return all;
    }
    let exact = query.trim();
    let concepts: Vec<Resolved> = vocabulary::concepts(&typed).iter().map(|concept| resolve(parts, concept)).collect();
    let intent = vocabulary::intent(&typed);
    let tools: usize = parts.iter().map(|(_, tools)| tools.len()).sum();
    let mut idf: HashMap<&str, f32> = HashMap::new();
    for (term, _) in concepts.iter().flat_map(|c| &c.alternatives).flat_map(|(_, words)| words).flatten() {
        let found: usize = parts.iter().map(|(index, _)| index.postings(term).len()).sum();
        let (n, found) = (tools as f32, found as f32);
        idf.insert(term, (1.0 + (n - found + 0.5) / (found + 0.5)).ln());
    }
    let mut hits: Vec<(f32, &ToolDef)> = Vec::new();
    for (index, part) in parts {
        let mut total = vec![0.0f32; part.len()];
        let mut matched = vec![0.0f32; part.len()];
        // How many words of each tool's name the query has (each term once, however many concepts have it).
        let mut named = vec![0u16; part.len()];
        for term in idf.keys() {
            for posting in index.postings(term) {
                named[posting.tool as usize] += u16::from(posting.counts[NAME]);
            }
        }
        let (mut word, mut alternative, mut concept) =
            (Scores::new(part.len()), Scores::new(part.len()), Scores::new(part.len()));
        for resolved in &concepts {
            for (weight, words) in &resolved.alternatives {
                for variants in words {
                    for (term, factor) in variants {
                        for posting in index.postings(term) {
                            let at = posting.tool as usize;
                            word.max(at, factor * index.score(posting, idf[term.as_str()]));
                        }
                    }
                    for (at, score) in word.take() {
                        alternative.add(at, score);
                    }
                }
                for (at, score) in alternative.take() {
                    concept.max(at, weight * score);
                }
            }
            for (at, score) in concept.take() {
                total[at] += resolved.weight * score;
                matched[at] += 1.0;
            }
        }
        for (at, tool) in part.iter().enumerate() {
            let coverage = (matched[at] / concepts.len() as f32).powf(COVERAGE);
            let intended = if intent == Some(tool.effect) { INTENT } else { 1.0 };
            let name = f32::from(index.lengths[at][NAME]).max(1.0);
            let share = (f32::from(named[at]) / name).min(1.0);
            let precision = (UNNAMED + (1.0 - UNNAMED) * share) * (1.0 + share);
            let score = match tool.path == exact {
                true => f32::INFINITY,
                false => total[at] * coverage * intended * precision,
            };
            if score > 0.0 && include(tool) {
                hits.push((score, tool));
            }
        }
    }
    hits.sort_by(|(sa, a), (sb, b)| sb.total_cmp(sa).then(a.path.len().cmp(&b.path.len())).then(a.path.cmp(&b.path)));
    hits.into_iter().map(|(_, tool)| tool).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Schemas;
    use executor_core::Effect;

    fn tool(path: &str, description: &str) -> ToolDef {
        ToolDef {
            path: path.into(),
            namespace: path.split('.').next().unwrap().into(),
            description: description.into(),
            summary: description.into(),
            effect: Effect::Read,
            schemas: Schemas::Text { input: "{}".into(), output: None, root: None },
            target: Target::Mcp { name: path.into(), hints: Vec::new(), input: Default::default(), ui: None },
        }
    }

    #[test]
    fn words_split_case_and_punctuation() {
        assert_eq!(words("gh.issues.listForRepo"), ["gh", "issues", "list", "for", "repo"]);
        assert_eq!(words("GET /repos/{owner}"), ["get", "repos", "owner"]);
        assert_eq!(words("HTTPServer v2"), ["httpserver", "v2"]);
    }

    #[test]
    fn terms_are_stems() {
        let table = [("branches", "branch"), ("merging", "merg"), ("merge", "merg"), ("repositories", "repositori")];
        for (word, stem) in table {
            assert_eq!(term(word), stem, "{word}");
        }
    }

    #[test]
    fn ranking() {
        let tools = [
            tool("gh.issues.list", "List issues in a repository"),
            tool("gh.issues.create", "Create an issue"),
            tool("gh.repos.list", "List repositories; each has issues"),
            tool("gh.pulls.listFiles", "List files of a pull request"),
            tool("gh.pulls.merge", "Merge a pull request"),
            tool("gh.pulls.mergeAsync", "Merge a pull request in the background"),
            tool("gh.notifications.list", "List notifications"),
            tool("docs.search_docs", "Search the documentation"),
        ];
        let index = SearchIndex::build(&tools);
        let run = |query: &str| -> Vec<&str> {
            search_parts(&[(&index, &tools)], query, |_| true).into_iter().map(|t| t.path.as_str()).collect()
        };
        let table: &[(&str, &[&str])] = &[
            // Name and summary beat a word of another tool's description.
            ("list issues", &["gh.issues.list", "gh.repos.list"]),
            ("create issue", &["gh.issues.create"]),
            // A camelCase hump in the name is a word; word forms are one term.
            ("file", &["gh.pulls.listFiles"]),
            // The name that is all query beats one with more in it.
            ("merging a PR", &["gh.pulls.merge", "gh.pulls.mergeAsync"]),
            // What follows "of" says where: the files are wanted.
            ("the files of a pull request", &["gh.pulls.listFiles"]),
            ("doc", &["docs.search_docs"]),
            // A word no tool has matches the words it starts.
            ("notif", &["gh.notifications.list"]),
            // The exact path wins outright.
            ("gh.repos.list", &["gh.repos.list"]),
            ("nothing matches this", &[]),
        ];
        for (query, expected) in table {
            let found = run(query);
            assert_eq!(&found[..expected.len().min(found.len())], *expected, "{query}: {found:?}");
            if expected.is_empty() {
                assert!(found.is_empty(), "{query}: {found:?}");
            }
        }
        assert_eq!(run("").len(), tools.len());
        let gh_only = search_parts(&[(&index, &tools)], "search", |t| t.namespace == "gh");
        assert!(gh_only.is_empty());
    }

    #[test]
    fn rare_terms_count_more() {
        // "repository" is in every tool, "branches" in one.
        let tools = [
            tool("gh.a.teams", "Remove a team from a repository"),
            tool("gh.a.secrets", "List repository secrets for the repository"),
            tool("gh.a.branches", "List branches"),
            tool("gh.a.other", "Get a repository"),
        ];
        let index = SearchIndex::build(&tools);
        let found = search_parts(&[(&index, &tools)], "what branches does this repository have", |_| true);
        assert_eq!(found[0].path, "gh.a.branches");
    }
}
