//! Toolkits: narrower views of the same executor, each served at
//! `/mcp/toolkits/{name}` with the tools its patterns select and, optionally,
//! a policy of its own.
//!
//! A toolkit can only tighten: the action that applies to a call is the
//! stricter of the source's and the toolkit's (`block` > `approve` > `run`).
//! A toolkit rule that would loosen a source's decision has no effect; the
//! hosts report it as a warning at start.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{DecisionReason, Effect, PolicyAction, SourcePolicy, ToolPattern};

/// Toolkit names are path segments of the endpoint's URL.
pub const MAX_TOOLKIT_NAME_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolkitNameError {
    #[error(
        "toolkit name {0:?} is not valid: use 1 to {MAX_TOOLKIT_NAME_LEN} lowercase letters, digits, `-` or `_` \
         (it is part of the endpoint's URL, /mcp/toolkits/<name>)"
    )]
    Invalid(String),
}

/// A toolkit's name, as it appears in `/mcp/toolkits/{name}` and on scoped keys.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolkitName(String);

impl ToolkitName {
    pub fn parse(name: &str) -> Result<Self, ToolkitNameError> {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_');
        if name.is_empty() || name.len() > MAX_TOOLKIT_NAME_LEN || !name.chars().all(allowed) {
            return Err(ToolkitNameError::Invalid(name.to_owned()));
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ToolkitName {
    type Error = ToolkitNameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ToolkitName> for String {
    fn from(name: ToolkitName) -> Self {
        name.0
    }
}

/// Routes look a toolkit up by the path segment.
impl std::borrow::Borrow<str> for ToolkitName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolkitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One toolkit, as configured (`[[toolkits]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolkit {
    pub name: ToolkitName,
    /// The tools it shows: a tool is in the toolkit when any pattern matches its path.
    pub tools: Vec<ToolPattern>,
    /// Rules that tighten the sources' decisions for its calls.
    pub policy: SourcePolicy,
}

/// What the toolkit's own policy says about a tool, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolkitDecision {
    pub action: PolicyAction,
    /// A rule's pattern, or `None` for the toolkit's default.
    pub rule: Option<ToolPattern>,
}

impl ToolkitDecision {
    /// The id the audit trail names it by, in toolkit `toolkit`:
    /// `toolkit:<name>:rule:<pattern>` or `toolkit:<name>:default`.
    pub fn id(&self, toolkit: &ToolkitName) -> String {
        match &self.rule {
            Some(pattern) => format!("toolkit:{toolkit}:rule:{pattern}"),
            None => format!("toolkit:{toolkit}:default"),
        }
    }
}

impl Toolkit {
    /// Whether the tool at `path` is part of this toolkit.
    pub fn includes(&self, path: &str) -> bool {
        self.tools.iter().any(|pattern| pattern.matches(path))
    }

    /// Whether some tool of `namespace` may be part of this toolkit (for the
    /// namespaces `execute`'s description lists): a pattern's literal start
    /// agrees with `<namespace>.`.
    pub fn may_include_namespace(&self, namespace: &str) -> bool {
        let scope = format!("{namespace}.");
        self.tools.iter().any(|pattern| {
            let literal = pattern.as_str().split('*').next().unwrap_or_default();
            literal.starts_with(&scope) || scope.starts_with(literal)
        })
    }

    /// The toolkit's own rule for `path` (the most specific, as for sources),
    /// else its default; `None` when it says nothing about the tool.
    pub fn decide(&self, path: &str) -> Option<ToolkitDecision> {
        // The effect only matters when neither a rule nor the default applies,
        // which is exactly the case answered with `None`.
        let decision = self.policy.decide(path, Effect::Read);
        match decision.reason {
            DecisionReason::Rule(pattern) => Some(ToolkitDecision { action: decision.action, rule: Some(pattern) }),
            DecisionReason::SourceDefault => Some(ToolkitDecision { action: decision.action, rule: None }),
            DecisionReason::Effect(_) => None,
        }
    }

    /// The toolkit's decision when it is stricter than `source`'s action;
    /// `None` when the source's decision stands.
    pub fn tightens(&self, path: &str, source: PolicyAction) -> Option<ToolkitDecision> {
        self.decide(path).filter(|own| strictness(own.action) > strictness(source))
    }

    /// The toolkit's decision when it would loosen `source`'s action (and so
    /// has no effect): what the start-up warning reports.
    pub fn would_loosen(&self, path: &str, source: PolicyAction) -> Option<ToolkitDecision> {
        self.decide(path).filter(|own| strictness(own.action) < strictness(source))
    }
}

impl fmt::Display for ToolkitDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(pattern) => write!(f, "rule `{pattern}`"),
            None => f.write_str("default policy"),
        }
    }
}

/// `run` < `approve` < `block`: the stricter action wins.
pub fn strictness(action: PolicyAction) -> u8 {
    match action {
        PolicyAction::Run => 0,
        PolicyAction::Approve => 1,
        PolicyAction::Block => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PolicyRule;
    use PolicyAction::{Approve, Block, Run};

    fn toolkit(tools: &[&str], default: Option<PolicyAction>, rules: &[(&str, PolicyAction)]) -> Toolkit {
        Toolkit {
            name: ToolkitName::parse("support").unwrap(),
            tools: tools.iter().map(|p| ToolPattern::parse(p).unwrap()).collect(),
            policy: SourcePolicy {
                default,
                rules: rules
                    .iter()
                    .map(|(p, action)| PolicyRule { pattern: ToolPattern::parse(p).unwrap(), action: *action })
                    .collect(),
            },
        }
    }

    #[test]
    fn names_are_url_segments() {
        for good in ["support", "ci-bot", "a_1"] {
            assert!(ToolkitName::parse(good).is_ok(), "{good}");
        }
        let long = "x".repeat(MAX_TOOLKIT_NAME_LEN + 1);
        for bad in ["", "Support", "a/b", "a b", "..", "ü", long.as_str()] {
            assert!(ToolkitName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn membership_and_namespaces() {
        let kit = toolkit(&["tickets.*", "crm.contacts.get"], None, &[]);
        assert!(kit.includes("tickets.create"));
        assert!(kit.includes("crm.contacts.get"));
        assert!(!kit.includes("crm.contacts.delete"));
        assert!(!kit.includes("ticketsx.create"));
        assert!(kit.may_include_namespace("tickets"));
        assert!(kit.may_include_namespace("crm"));
        assert!(!kit.may_include_namespace("github"));
        let all = toolkit(&["*"], None, &[]);
        assert!(all.may_include_namespace("github"));
        let prefix = toolkit(&["gi*"], None, &[]);
        assert!(prefix.may_include_namespace("github") && !prefix.may_include_namespace("crm"));
    }

    #[test]
    fn the_stricter_action_wins() {
        let kit = toolkit(&["*"], None, &[("t.*", Approve), ("t.list", Run), ("t.drop", Block)]);
        // (path, source's action, the toolkit's when it tightens, when it would loosen)
        let cases = [
            ("t.create", Run, Some(Approve), None),
            ("t.create", Approve, None, None),
            ("t.create", Block, None, Some(Approve)),
            ("t.list", Approve, None, Some(Run)),
            ("t.drop", Approve, Some(Block), None),
            ("other.x", Run, None, None),
        ];
        for (path, source, tightens, loosens) in cases {
            assert_eq!(kit.tightens(path, source).map(|d| d.action), tightens, "{path} from {source:?}");
            assert_eq!(kit.would_loosen(path, source).map(|d| d.action), loosens, "{path} from {source:?}");
        }
        let defaulted = toolkit(&["*"], Some(Approve), &[]);
        let decision = defaulted.tightens("a.b", Run).unwrap();
        assert_eq!(decision.to_string(), "default policy");
        assert_eq!(kit.decide("t.x").unwrap().to_string(), "rule `t.*`");
    }
}
