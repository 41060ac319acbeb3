//! Remembered approvals: a person (never the model) may answer "always allow"
//! for a tool, so its calls by the same owner stop asking until the grant
//! expires or is revoked. A grant only turns "needs approval" into "runs";
//! a blocked tool stays blocked.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{GrantId, Principal, Timestamp, ToolkitName};

/// How long a grant lives unless configured (`EXECUTOR_GRANT_TTL_MS`): 30 days.
pub const DEFAULT_GRANT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Whether an accepted approval is remembered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Remember {
    /// This call only.
    #[default]
    Once,
    /// This call and every later call of the same tool by the same owner.
    Always,
}

impl Remember {
    /// `once` or `always`, as the JSON API and native elicitation send it.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "once" => Ok(Self::Once),
            "always" => Ok(Self::Always),
            other => Err(format!("`remember` must be \"once\" or \"always\", not {other:?}")),
        }
    }
}

/// Which person granted it: each is someone the pause asked, never the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantedBy {
    /// The person at the browser approval link.
    ApprovalPage,
    /// The owner, through the JSON API (`/api/executions/{id}/resume`).
    OwnerApi,
    /// The person answering the elicitation in their own MCP client.
    Client,
    /// The owner, signed in to the console.
    Console,
}

impl GrantedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApprovalPage => "approval_page",
            Self::OwnerApi => "owner_api",
            Self::Client => "client",
            Self::Console => "console",
        }
    }
}

/// "Always allow `tool`" for `owner`, until `expires_at`: everywhere, or only
/// on one toolkit's endpoint when it was given there (a key scoped to a
/// toolkit can never loosen anything outside it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: GrantId,
    pub owner: Principal,
    /// The tool path, as the code calls it (`tools.<tool>`).
    pub tool: String,
    pub granted_by: GrantedBy,
    pub created_at: Timestamp,
    pub expires_at: Timestamp,
    /// The toolkit it was given for, whose endpoint alone it applies on;
    /// `None`: given on `/mcp`, it applies everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<ToolkitName>,
}

impl Grant {
    pub fn new(
        id: GrantId,
        owner: Principal,
        tool: impl Into<String>,
        granted_by: GrantedBy,
        now: Timestamp,
        ttl: Duration,
    ) -> Self {
        Self { id, owner, tool: tool.into(), granted_by, created_at: now, expires_at: now.plus(ttl), toolkit: None }
    }

    /// The same grant, given for `toolkit`'s endpoint only.
    pub fn in_toolkit(self, toolkit: Option<ToolkitName>) -> Self {
        Self { toolkit, ..self }
    }

    /// Whether it applies to a run on `endpoint` (`None`: `/mcp`).
    pub fn applies_on(&self, endpoint: Option<&ToolkitName>) -> bool {
        self.toolkit.is_none() || self.toolkit.as_ref() == endpoint
    }

    /// Whether it still lets calls run at `now`.
    pub fn is_live(&self, now: Timestamp) -> bool {
        now < self.expires_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remember_parses_once_and_always_only() {
        assert_eq!(Remember::parse("once"), Ok(Remember::Once));
        assert_eq!(Remember::parse("always"), Ok(Remember::Always));
        for other in ["", "Always", "forever", "true"] {
            assert!(Remember::parse(other).is_err(), "{other}");
        }
        assert_eq!(Remember::default(), Remember::Once);
    }

    #[test]
    fn a_toolkit_grant_applies_on_its_toolkit_only() {
        let (a, b) = (ToolkitName::parse("a").unwrap(), ToolkitName::parse("b").unwrap());
        let grant = |toolkit: Option<&ToolkitName>| {
            let owner = Principal::parse("alice").unwrap();
            let id = GrantId::parse("g1").unwrap();
            Grant::new(id, owner, "gh.create", GrantedBy::OwnerApi, Timestamp::from_millis(0), Duration::from_secs(1))
                .in_toolkit(toolkit.cloned())
        };
        // (given for, endpoint of the run, applies)
        let cases = [
            (None, None, true),
            (None, Some(&a), true),
            (Some(&a), Some(&a), true),
            (Some(&a), None, false),
            (Some(&a), Some(&b), false),
        ];
        for (given, endpoint, applies) in cases {
            assert_eq!(grant(given).applies_on(endpoint), applies, "given {given:?}, run on {endpoint:?}");
        }
    }

    #[test]
    fn a_grant_lives_until_its_expiry() {
        let now = Timestamp::from_millis(1_000);
        let owner = Principal::parse("alice").unwrap();
        let grant = Grant::new(
            GrantId::parse("g1").unwrap(),
            owner,
            "gh.create",
            GrantedBy::ApprovalPage,
            now,
            Duration::from_secs(10),
        );
        assert_eq!(grant.expires_at, Timestamp::from_millis(11_000));
        let cases = [(0, true), (1_000, true), (10_999, true), (11_000, false), (20_000, false)];
        for (at, live) in cases {
            assert_eq!(grant.is_live(Timestamp::from_millis(at)), live, "{at}");
        }
    }
}
