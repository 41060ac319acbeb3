//! A policy set's checks at start: it parses, each policy has a unique id,
//! it validates against the schema, and the tools it names exist. Every
//! error names the file and the line.
//!
//! What validation checks: entity types and actions, every attribute of the
//! principal and the tool, the counts, and the types of whatever compares
//! them. What it does not: `context.args` (each tool's arguments differ), so
//! `context.args.id == 7` is accepted, and a misspelt argument makes the
//! condition fail to evaluate (the policy then does not apply). Two passes
//! make that so: with `args` closed, everything except accesses of
//! `context.args` (the entity and action checks, which an open schema skips);
//! with `args` open, everything else, also behind a `context.args has x`
//! (which a closed `args` would have typed `false`, hiding what follows it).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cedar_policy::{Policy, PolicyId, PolicySet, ValidationMode, Validator};
use miette::Diagnostic;
use serde_json::Value;

use super::CedarSource;
use super::schema;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CedarError {
    #[error("cannot read the Cedar policies {file}: {error}; check `cedar` in the sources file (relative to it)")]
    Read { file: PathBuf, error: String },
    #[error("{file}:{line}: {message}")]
    Syntax { file: PathBuf, line: usize, message: String },
    #[error("{file}:{line}: policy `{policy}`: {message}")]
    Invalid { file: PathBuf, line: usize, policy: String, message: String },
    #[error("{file}:{line}: two policies have the id `{policy}`; give each its own @id(\"...\")")]
    DuplicateId { file: PathBuf, line: usize, policy: String },
    #[error(
        "{file}:{line}: policy `{policy}` names Executor::Tool::\"{tool}\", which no source has; check the path with tools.search"
    )]
    UnknownTool { file: PathBuf, line: usize, policy: String, tool: String },
    #[error("{file}:{line}: policy templates (`?principal`, `?resource`) are not supported; write each policy out")]
    Template { file: PathBuf, line: usize },
}

/// The line of byte `offset` of `text`, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// Where a diagnostic points, or `None`.
fn offset(diagnostic: &dyn Diagnostic) -> Option<usize> {
    diagnostic.labels()?.next().map(|label| label.offset())
}

pub(super) fn load(source: &CedarSource, has_tool: &dyn Fn(&str) -> Option<bool>) -> Result<PolicySet, CedarError> {
    let CedarSource { file, text } = source;
    let parsed = PolicySet::from_str(text).map_err(|errors| CedarError::Syntax {
        file: file.clone(),
        line: line_of(text, offset(&errors).unwrap_or(0)),
        message: errors.to_string(),
    })?;
    if let Some(template) = parsed.templates().next() {
        let at = text.find(&template.to_cedar()).unwrap_or(0);
        return Err(CedarError::Template { file: file.clone(), line: line_of(text, at) });
    }
    let set = named(&parsed, file, text)?;
    check(&set, file, text)?;
    for policy in set.policies() {
        let Ok(json) = policy.to_json() else { continue };
        let mut tools = BTreeSet::new();
        tool_literals(&json, &mut tools);
        if let Some(tool) = tools.into_iter().find(|tool| has_tool(tool) == Some(false)) {
            let line = line_of(text, text.find(&policy.to_cedar().unwrap_or_default()).unwrap_or(0));
            return Err(CedarError::UnknownTool { file: file.clone(), line, policy: policy.id().to_string(), tool });
        }
    }
    Ok(set)
}

/// The set with each policy renamed by its `@id`, or `<file name>:<line>`.
fn named(parsed: &PolicySet, file: &Path, text: &str) -> Result<PolicySet, CedarError> {
    // The parser names them `policy0`, `policy1`, ... in the order of the text.
    let mut policies: Vec<&Policy> = parsed.policies().collect();
    policies.sort_by_key(|p| p.id().to_string().trim_start_matches("policy").parse::<usize>().unwrap_or(usize::MAX));
    let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
    let (mut set, mut seen, mut from) = (PolicySet::new(), HashSet::new(), 0);
    for policy in policies {
        let at = policy.to_cedar().and_then(|own| text[from..].find(&own).map(|i| from + i)).unwrap_or(from);
        from = at;
        let line = line_of(text, at);
        let id = policy.annotation("id").map_or_else(|| format!("{name}:{line}"), str::to_owned);
        if !seen.insert(id.clone()) {
            return Err(CedarError::DuplicateId { file: file.to_owned(), line, policy: id });
        }
        set.add(policy.new_id(PolicyId::new(&id))).expect("ids are unique and no policy is a template");
    }
    Ok(set)
}

/// Both validation passes; the first error, by line.
fn check(set: &PolicySet, file: &Path, text: &str) -> Result<(), CedarError> {
    let closed = Validator::new(schema::closed());
    let open = Validator::new(schema::open());
    let mut errors: Vec<(usize, String, String)> = Vec::new();
    let closed_result = closed.validate(set, ValidationMode::Strict);
    let open_result = open.validate(set, ValidationMode::Partial);
    let kept = closed_result.validation_errors().filter(|e| !on_args(e, text)).chain(open_result.validation_errors());
    for error in kept {
        let line = offset(error).map_or(0, |at| line_of(text, at));
        let entry = (line, error.policy_id().to_string(), error.to_string());
        if !errors.contains(&entry) {
            errors.push(entry);
        }
    }
    errors.sort();
    match errors.into_iter().next() {
        None => Ok(()),
        Some((line, policy, message)) => Err(CedarError::Invalid { file: file.to_owned(), line, policy, message }),
    }
}

/// An attribute access the closed schema refuses only because `args` is closed.
fn on_args(error: &cedar_policy::ValidationError, text: &str) -> bool {
    matches!(error, cedar_policy::ValidationError::UnsafeAttributeAccess(_))
        && error.labels().and_then(|mut l| l.next()).is_some_and(|label| {
            let (start, end) = (label.offset(), label.offset() + label.len());
            text.get(start..end)
                .is_some_and(|snippet| snippet.replace(char::is_whitespace, "").starts_with("context.args"))
        })
}

/// Every `Executor::Tool` id the policy's JSON form names.
fn tool_literals(json: &Value, found: &mut BTreeSet<String>) {
    match json {
        Value::Object(fields) => {
            if fields.get("type").and_then(Value::as_str) == Some("Executor::Tool")
                && let Some(id) = fields.get("id").and_then(Value::as_str)
            {
                found.insert(id.to_owned());
            }
            fields.values().for_each(|v| tool_literals(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| tool_literals(v, found)),
        _ => {}
    }
}
