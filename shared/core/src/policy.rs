//! The approval policy: whether a tool call runs, waits for a decision, or is
//! refused. Pure: the catalog says what a tool is (a read or a write) and
//! which source it belongs to; this module decides.
//!
//! The rule, in order:
//! 1. Among the source's rules whose pattern matches the tool's full path, the
//!    **most specific** wins: a pattern without `*` beats any pattern with one;
//!    otherwise the pattern with more literal (non-`*`) characters wins; on a
//!    tie the rule written **first** wins.
//! 2. No rule matches: the source's `default`, when it sets one.
//! 3. Otherwise reads run and writes need approval.
//!
//! A pattern is the tool path with `*` standing for any run of characters,
//! dots included: `github.issues.*`, `github.*.delete*`, `*`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What happens to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyAction {
    /// Runs without asking.
    Run,
    /// Pauses until a person or the model approves.
    Approve,
    /// Never runs.
    Block,
}

/// What a tool does to the world, as its source describes it: OpenAPI
/// GET/HEAD/OPTIONS and MCP tools annotated `readOnlyHint: true` are reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Read,
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("a tool pattern cannot be empty; use `*` to match every tool")]
    Empty,
    #[error(
        "tool pattern `{pattern}` has `{found}`; patterns are tool paths (letters, digits, `_`, `$`, `.`) \
         with `*` for any run of characters"
    )]
    InvalidCharacter { pattern: String, found: char },
}

/// A glob over tool paths; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolPattern(String);

impl ToolPattern {
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        if pattern.is_empty() {
            return Err(PatternError::Empty);
        }
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.' | '*');
        match pattern.chars().find(|c| !allowed(*c)) {
            Some(found) => Err(PatternError::InvalidCharacter { pattern: pattern.to_owned(), found }),
            None => Ok(Self(pattern.to_owned())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, path: &str) -> bool {
        glob_matches(self.0.as_bytes(), path.as_bytes())
    }

    /// Orders matching patterns: exact first, then more literal characters.
    fn specificity(&self) -> (bool, usize) {
        (!self.0.contains('*'), self.0.bytes().filter(|b| *b != b'*').count())
    }
}

impl TryFrom<String> for ToolPattern {
    type Error = PatternError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ToolPattern> for String {
    fn from(pattern: ToolPattern) -> Self {
        pattern.0
    }
}

impl fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `*` matches any run of bytes. Iterative with one backtrack point, so it is
/// linear-ish and cannot blow the stack on hostile patterns.
fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|b| *b == b'*')
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    pub pattern: ToolPattern,
    pub action: PolicyAction,
}

/// One source's policy, as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcePolicy {
    /// Applies when no rule matches; unset means reads run, writes need approval.
    #[serde(default)]
    pub default: Option<PolicyAction>,
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// Why a decision was made, so a message can say which setting to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionReason {
    Rule(ToolPattern),
    SourceDefault,
    Effect(Effect),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDecision {
    pub action: PolicyAction,
    pub reason: DecisionReason,
}

impl DecisionReason {
    /// The id the audit trail names this reason by, for a tool of source
    /// `namespace`: `source:<namespace>:rule:<pattern>`,
    /// `source:<namespace>:default`, or `default` (the built-in rule: reads
    /// run, writes ask).
    pub fn id(&self, namespace: &str) -> String {
        match self {
            Self::Rule(pattern) => format!("source:{namespace}:rule:{pattern}"),
            Self::SourceDefault => format!("source:{namespace}:default"),
            Self::Effect(_) => crate::DEFAULT_RULE.to_owned(),
        }
    }
}

impl SourcePolicy {
    pub fn decide(&self, path: &str, effect: Effect) -> PolicyDecision {
        // `max_by_key` keeps the last maximum; iterating in reverse makes the first rule win ties.
        let rule = self.rules.iter().rev().filter(|r| r.pattern.matches(path)).max_by_key(|r| r.pattern.specificity());
        match (rule, self.default) {
            (Some(rule), _) => {
                PolicyDecision { action: rule.action, reason: DecisionReason::Rule(rule.pattern.clone()) }
            }
            (None, Some(action)) => PolicyDecision { action, reason: DecisionReason::SourceDefault },
            (None, None) => PolicyDecision {
                action: match effect {
                    Effect::Read => PolicyAction::Run,
                    Effect::Write => PolicyAction::Approve,
                },
                reason: DecisionReason::Effect(effect),
            },
        }
    }
}

impl fmt::Display for DecisionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rule(pattern) => write!(f, "policy rule `{pattern}`"),
            Self::SourceDefault => f.write_str("the source's default policy"),
            Self::Effect(Effect::Read) => f.write_str("it only reads"),
            Self::Effect(Effect::Write) => f.write_str("it may change data"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PolicyAction::{Approve, Block, Run};

    fn rule(pattern: &str, action: PolicyAction) -> PolicyRule {
        PolicyRule { pattern: ToolPattern::parse(pattern).unwrap(), action }
    }

    #[test]
    fn each_reason_has_an_id() {
        let rule = DecisionReason::Rule(ToolPattern::parse("gh.issues.*").unwrap());
        let cases = [
            (rule, "source:gh:rule:gh.issues.*"),
            (DecisionReason::SourceDefault, "source:gh:default"),
            (DecisionReason::Effect(Effect::Write), "default"),
        ];
        for (reason, id) in cases {
            assert_eq!(reason.id("gh"), id);
        }
    }

    #[test]
    fn patterns_match_paths() {
        let cases = [
            ("github.issues.*", "github.issues.create", true),
            ("github.issues.*", "github.issues", false),
            ("github.issues.*", "github.pulls.list", false),
            ("github.*.delete*", "github.issues.deleteComment", true),
            ("github.*.delete*", "github.delete", false),
            ("*", "anything.at.all", true),
            ("*list", "gh.issues.list", true),
            ("gh.issues.list", "gh.issues.list", true),
            ("gh.issues.list", "gh.issues.listAll", false),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "aXcYb", false),
            ("**", "", true),
        ];
        for (pattern, path, expected) in cases {
            assert_eq!(ToolPattern::parse(pattern).unwrap().matches(path), expected, "{pattern} on {path}");
        }
    }

    #[test]
    fn invalid_patterns_are_refused_with_the_reason() {
        assert_eq!(ToolPattern::parse(""), Err(PatternError::Empty));
        let err = ToolPattern::parse("gh issues").unwrap_err();
        assert!(err.to_string().contains("`gh issues` has ` `"), "{err}");
        assert!(ToolPattern::parse("gh/issues").is_err());
    }

    #[test]
    fn decisions() {
        let rules = vec![
            rule("gh.*", Run),
            rule("gh.issues.*", Approve),
            rule("gh.issues.delete*", Block),
            rule("gh.issues.deleteLabel", Run),
            rule("gh.pulls.*", Block),
            rule("gh.pulls.*", Run),
        ];
        let configured = SourcePolicy { default: None, rules: rules.clone() };
        let defaulted = SourcePolicy { default: Some(Block), rules: vec![rule("gh.repos.get", Run)] };
        let plain = SourcePolicy::default();
        type Case<'a> = (&'a SourcePolicy, &'a str, Effect, PolicyAction, &'a str);
        let cases: [Case; 12] = [
            // No rule: reads run, writes ask.
            (&plain, "gh.issues.list", Effect::Read, Run, "it only reads"),
            (&plain, "gh.issues.create", Effect::Write, Approve, "it may change data"),
            // The most specific matching rule wins, whatever the effect.
            (&configured, "gh.repos.create", Effect::Write, Run, "`gh.*`"),
            (&configured, "gh.issues.list", Effect::Read, Approve, "`gh.issues.*`"),
            (&configured, "gh.issues.deleteComment", Effect::Write, Block, "`gh.issues.delete*`"),
            (&configured, "gh.issues.deleteLabel", Effect::Write, Run, "`gh.issues.deleteLabel`"),
            // Equal specificity: the first rule written wins.
            (&configured, "gh.pulls.merge", Effect::Write, Block, "`gh.pulls.*`"),
            // No match: effect default.
            (&configured, "other.thing", Effect::Write, Approve, "it may change data"),
            (&configured, "other.thing", Effect::Read, Run, "it only reads"),
            // The source default replaces the effect default, not the rules.
            (&defaulted, "gh.repos.list", Effect::Read, Block, "default"),
            (&defaulted, "gh.repos.get", Effect::Read, Run, "`gh.repos.get`"),
            (&defaulted, "gh.repos.delete", Effect::Write, Block, "default"),
        ];
        for (policy, path, effect, action, reason) in cases {
            let decision = policy.decide(path, effect);
            assert_eq!(decision.action, action, "{path} {effect:?}");
            assert!(decision.reason.to_string().contains(reason), "{path}: {}", decision.reason);
        }
    }

    #[test]
    fn policies_deserialise_and_check_patterns() {
        let policy: SourcePolicy = serde_json::from_value(
            serde_json::json!({"default": "approve", "rules": [{"pattern": "a.*", "action": "run"}]}),
        )
        .unwrap();
        assert_eq!(policy.default, Some(Approve));
        assert_eq!(policy.rules, [rule("a.*", Run)]);
        let bad =
            serde_json::from_value::<SourcePolicy>(serde_json::json!({"rules": [{"pattern": "a b", "action": "run"}]}));
        assert!(bad.unwrap_err().to_string().contains("`a b`"));
    }
}
