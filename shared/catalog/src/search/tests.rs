//! The ranking on small made-up catalogs.

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
fn values_in_a_query_are_not_its_words() {
    let table: &[(&str, &[&str])] = &[
        ("read package.json off main", &["read", "file", "off", "main"]),
        ("branches on octocat/hello-world", &["branches", "on"]),
        ("diff between v1.2.0 and v1.3.0", &["diff", "between", "and"]),
        ("rules on release/1.x?", &["rules", "on"]),
        ("edit docs/setup.md", &["edit", "file"]),
        ("a/b/c", &[]),
        // Words joined, a tool's path, a dot file: still words.
        ("our ci/cd setup", &["our", "ci", "cd", "setup"]),
        ("issues.create", &["issues", "create"]),
        ("my .gitignore", &["my", "gitignore"]),
        ("self-hosted runners", &["self", "hosted", "runners"]),
    ];
    for (query, expected) in table {
        assert_eq!(query_words(query), *expected, "{query}");
    }
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
        tool("gh.repos.getBranch", "Get a branch"),
        tool("gh.repos.listBranches", "List branches"),
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
        // A name with the word as typed beats one with it in another form.
        ("what branches are there", &["gh.repos.listBranches", "gh.repos.getBranch"]),
        ("get the branch", &["gh.repos.getBranch", "gh.repos.listBranches"]),
        // "Is there ..." asks for a list.
        ("is there a branch", &["gh.repos.listBranches", "gh.repos.getBranch"]),
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
