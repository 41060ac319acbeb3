//! Tool search, built once over all tools (and once over each source's
//! tools that are listed later).
//!
//! Ranking: the query is split into terms (lower case, on non-alphanumerics
//! and camelCase humps; one-letter terms are ignored). Each term scores its
//! best match in a tool:
//!
//! | match | points |
//! |---|---|
//! | a word of the tool's name (last path segment) | 8 |
//! | a word of its path | 5 |
//! | the start of a word of its path | 3 |
//! | a word of its description | 2 |
//! | the start of a word of its description (terms of 3+ letters) | 1 |
//!
//! A tool's score is the sum over terms, plus 100 when the query is exactly its
//! path. Tools scoring 0 are left out; ties go to the shorter, then the
//! alphabetically first path. An empty query lists every tool by path.

use crate::tool::ToolDef;

/// How much of a description is indexed: the summary and first lines carry the meaning.
const DESCRIPTION_CHARS: usize = 400;

struct Entry {
    name: Vec<String>,
    path: Vec<String>,
    description: Vec<String>,
}

pub struct SearchIndex {
    entries: Vec<Entry>,
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

impl SearchIndex {
    pub fn build(tools: &[ToolDef]) -> Self {
        let entries = tools
            .iter()
            .map(|tool| {
                let description: String = tool.description.chars().take(DESCRIPTION_CHARS).collect();
                Entry { name: words(tool.name()), path: words(&tool.path), description: words(&description) }
            })
            .collect();
        Self { entries }
    }

    /// Each accepted tool with its score (0 for all when there are no terms); `None` for no match.
    fn scored<'t>(
        &self,
        tools: &'t [ToolDef],
        terms: &[String],
        exact: &str,
        include: &impl Fn(&ToolDef) -> bool,
    ) -> impl Iterator<Item = (u32, &'t ToolDef)> {
        self.entries.iter().zip(tools).filter(|(_, tool)| include(tool)).filter_map(move |(entry, tool)| {
            if terms.is_empty() {
                return Some((0, tool));
            }
            let bonus = if tool.path == exact { 100 } else { 0 };
            let score: u32 = bonus + terms.iter().map(|term| entry.score(term)).sum::<u32>();
            (score > 0).then_some((score, tool))
        })
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
    let terms: Vec<String> = words(query).into_iter().filter(|t| t.chars().count() > 1).collect();
    let exact = query.trim();
    let mut hits: Vec<(u32, &ToolDef)> =
        parts.iter().flat_map(|(index, tools)| index.scored(tools, &terms, exact, &include)).collect();
    hits.sort_by(|(sa, a), (sb, b)| {
        let (pa, pb) = (&a.path, &b.path);
        match terms.is_empty() {
            true => pa.cmp(pb),
            false => sb.cmp(sa).then(pa.len().cmp(&pb.len())).then(pa.cmp(pb)),
        }
    });
    hits.into_iter().map(|(_, tool)| tool).collect()
}

impl Entry {
    fn score(&self, term: &str) -> u32 {
        let is = |words: &[String]| words.iter().any(|w| w == term);
        let starts = |words: &[String]| words.iter().any(|w| w.starts_with(term));
        if is(&self.name) {
            8
        } else if is(&self.path) {
            5
        } else if starts(&self.path) {
            3
        } else if is(&self.description) {
            2
        } else if term.len() >= 3 && starts(&self.description) {
            1
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Schemas, Target};
    use executor_core::Effect;

    fn tool(path: &str, description: &str) -> ToolDef {
        ToolDef {
            path: path.into(),
            namespace: path.split('.').next().unwrap().into(),
            description: description.into(),
            effect: Effect::Read,
            schemas: Schemas::Text { input: "{}".into(), output: None, root: None },
            target: Target::Mcp { name: path.into(), hints: Vec::new() },
        }
    }

    #[test]
    fn words_split_case_and_punctuation() {
        assert_eq!(words("gh.issues.listForRepo"), ["gh", "issues", "list", "for", "repo"]);
        assert_eq!(words("GET /repos/{owner}"), ["get", "repos", "owner"]);
        assert_eq!(words("HTTPServer v2"), ["httpserver", "v2"]);
    }

    #[test]
    fn ranking() {
        let tools = [
            tool("gh.issues.list", "List issues in a repository"),
            tool("gh.issues.create", "Create an issue"),
            tool("gh.repos.list", "List repositories; each has issues"),
            tool("gh.pulls.listFiles", "List files of a pull request"),
            tool("docs.search_docs", "Search the documentation"),
        ];
        let index = SearchIndex::build(&tools);
        let run = |query: &str| -> Vec<&str> {
            search_parts(&[(&index, &tools)], query, |_| true).into_iter().map(|t| t.path.as_str()).collect()
        };
        // name word (8) + path word (5) beats path word + description word.
        assert_eq!(run("list issues")[..2], ["gh.issues.list", "gh.repos.list"]);
        assert_eq!(run("create issue")[0], "gh.issues.create");
        // A camelCase hump in the name is a word.
        assert_eq!(run("files")[0], "gh.pulls.listFiles");
        // Prefixes of path words count.
        assert_eq!(run("doc"), ["docs.search_docs"]);
        // The exact path wins outright.
        assert_eq!(run("gh.repos.list")[0], "gh.repos.list");
        assert_eq!(run("nothing matches this"), Vec::<&str>::new());
        assert_eq!(run("").len(), 5);
        let gh_only = search_parts(&[(&index, &tools)], "search", |t| t.namespace == "gh");
        assert!(gh_only.is_empty());
    }
}
