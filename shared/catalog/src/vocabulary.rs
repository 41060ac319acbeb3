//! How people ask for an API's operations, for search: the words that carry
//! nothing ("the", "a", "does"), the words and phrases that name what
//! operations call otherwise ("PR": pull request, "logged in":
//! authenticated, "show": list or get), and whether a query reads or writes.
//!
//! A query becomes concepts, one per word or phrase that carries something;
//! each concept has alternatives (its own words first), and a tool scores the
//! best of them (`search.rs`), so a synonym never counts twice and the words
//! a person typed count more than what they were taken for.

use executor_core::Effect;

/// How much a tool matching an alternative counts against matching the words
/// typed: "creation" found for "open" is less sure than "open" itself.
const ALTERNATIVE: f32 = 0.7;

/// Words that say nothing about which operation is meant.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "by", "can", "could", "details",
    "did", "do", "does", "for", "from", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on",
    "or", "our", "should", "so", "some", "that", "the", "their", "them", "there", "these", "this", "those", "to", "us",
    "use", "uses", "was", "we", "were", "what", "when", "where", "which", "who", "will", "with", "would", "you",
    "your",
];

/// Words and phrases (lower case, as `search::words` splits them; the last
/// word also in the plural, with an `s`), each with what operations call it.
type Table = &'static [(&'static str, &'static [&'static str])];

/// Phrases that stand for something else: the words typed say nothing on
/// their own ("logged" is not about logs).
const MEANS: Table = &[
    ("who am i", &["authenticated user", "current user", "me"]),
    ("logged in", &["authenticated", "current user"]),
    ("signed in", &["authenticated", "current user"]),
    ("log in", &["login", "authenticate"]),
    ("sign in", &["login", "authenticate"]),
    ("log out", &["logout"]),
    ("sign out", &["logout"]),
    ("thumbs up", &["reaction"]),
    ("thumbs down", &["reaction"]),
    ("what changed", &["activity", "revision"]),
    ("who starred", &["stargazer", "star"]),
    ("turn on", &["enable", "create"]),
    ("turn off", &["disable", "delete"]),
    ("file a", &["create"]),
    ("back up", &["snapshot", "export"]),
    ("take down", &["delete", "remove"]),
    ("spin up", &["create", "start"]),
    ("bring back", &["restore"]),
    ("commit history", &["commits"]),
    ("start with", &["matching", "prefix"]),
    ("throw away", &["delete"]),
    ("stop watching", &["delete subscription"]),
    ("older version", &["revision"]),
    ("take away", &["remove", "cancel", "revoke"]),
    ("most visited", &["top", "popular"]),
    ("get rid of", &["delete", "remove"]),
    ("kick off", &["dispatch", "start", "create"]),
    ("run again", &["rerun", "rerequest"]),
    ("sign off", &["approve", "review"]),
    ("number of", &["count"]),
    ("page views", &["views", "traffic"]),
    ("who did what", &["audit log"]),
    ("set up", &["create", "configure"]),
    ("look for", &["search"]),
    ("pull up", &["get"]),
    ("switch on", &["enable"]),
    ("switch off", &["disable"]),
    ("ask for", &["request"]),
    ("env var", &["variable"]),
    ("environment variable", &["variable"]),
    ("dev environment", &["codespace"]),
    ("bill of materials", &["sbom"]),
    ("static analysis", &["code scanning"]),
    ("code owners", &["codeowners"]),
    ("dev container", &["devcontainer"]),
    ("hand over", &["transfer"]),
    ("lock down", &["protection", "restriction"]),
    ("spending limit", &["budget"]),
    ("clean up", &["delete"]),
    ("roll out", &["deployment"]),
    ("how much", &["usage"]),
    ("stop getting", &["delete subscription"]),
    ("been up to", &["event", "activity"]),
];

/// Words and phrases that also name something else: abbreviations, nouns
/// APIs call otherwise, the verbs people use for reading and writing.
/// Written over the whole domain rather than from one evaluation's misses
/// (an entry kept only when it moves the tuned tasks serves no task not yet
/// written), and kept unless they lower the discovery evaluation
/// (docs/benchmarks.md).
const ALSO: Table = &[
    // Abbreviations.
    ("pr", &["pull request"]),
    ("mr", &["merge request", "pull request"]),
    ("repo", &["repository"]),
    ("repository", &["repo"]),
    ("org", &["organization"]),
    ("organization", &["org"]),
    ("pull request", &["pull"]),
    ("ci", &["workflow run", "check"]),
    ("dm", &["direct message"]),
    ("env", &["environment"]),
    ("environment", &["env"]),
    ("config", &["configuration", "settings"]),
    ("configuration", &["config", "settings"]),
    ("perms", &["permission"]),
    ("auth", &["authentication"]),
    ("2fa", &["tfa", "two factor"]),
    ("mfa", &["tfa", "two factor"]),
    // Who is asking.
    ("i", &["my", "authenticated user", "current user"]),
    ("me", &["my", "authenticated user", "current user"]),
    ("my", &["me", "authenticated user", "current user"]),
    ("mine", &["my", "authenticated user", "current user"]),
    ("myself", &["my", "authenticated user", "current user"]),
    // Things by other names.
    ("emoji", &["reaction"]),
    ("bug", &["issue"]),
    ("ticket", &["issue"]),
    ("file", &["content"]),
    ("build", &["workflow run"]),
    ("branch", &["ref"]),
    ("username", &["login", "user"]),
    ("people", &["member", "user"]),
    ("someone", &["user", "member"]),
    ("access", &["collaborator", "permission"]),
    ("record", &["item", "entry"]),
    ("table", &["collection"]),
    ("column", &["field"]),
    ("left", &["remaining", "limit"]),
    ("quota", &["rate limit"]),
    ("history", &["revision", "activity", "log", "commits"]),
    ("automation", &["flow", "workflow"]),
    ("backup", &["snapshot", "export"]),
    ("model", &["schema"]),
    ("leaked", &["secret scanning"]),
    ("notified", &["notification", "subscription"]),
    ("forgot", &["reset", "request"]),
    ("pass", &["status", "success"]),
    ("off", &["remove", "delete"]),
    ("how many", &["count"]),
    ("many", &["multiple"]),
    ("several", &["multiple"]),
    ("bulk", &["multiple"]),
    ("pause", &["disable", "suspend"]),
    ("happened", &["event", "timeline", "activity"]),
    ("bookmark", &["preset", "star"]),
    ("reorder", &["sort"]),
    ("draft", &["version"]),
    ("relationship", &["relation"]),
    ("link", &["relation"]),
    ("google", &["oauth"]),
    ("successful", &["success", "status"]),
    ("attach", &["upload", "add"]),
    ("convert", &["render"]),
    ("discussion", &["comment"]),
    ("conversation", &["comment"]),
    ("spend", &["billing usage"]),
    ("spent", &["billing usage"]),
    ("cost", &["billing usage"]),
    ("doing", &["activity", "event"]),
    ("activity", &["event"]),
    ("token", &["credential"]),
    ("get a token", &["create token"]),
    ("heart", &["reaction"]),
    ("star", &["stargazer"]),
    ("grep", &["search"]),
    ("outstanding", &["pending"]),
    ("using", &["usage"]),
    ("sub", &["child"]),
    ("failed", &["status"]),
    ("fix", &["autofix"]),
    ("raw", &["blob"]),
    ("pipeline", &["workflow"]),
    ("callback", &["webhook", "hook"]),
    ("snippet", &["gist"]),
    ("paste", &["gist"]),
    ("problem", &["issue"]),
    ("defect", &["issue"]),
    ("feedback", &["comment", "review"]),
    ("note", &["comment"]),
    ("remark", &["comment"]),
    ("upvote", &["reaction"]),
    ("like", &["reaction"]),
    ("favorite", &["star"]),
    ("favourite", &["star"]),
    ("inbox", &["notification"]),
    ("unread", &["notification"]),
    ("mention", &["notification"]),
    ("fan", &["follower"]),
    ("squad", &["team"]),
    ("company", &["organization"]),
    ("codebase", &["repository"]),
    ("folder", &["content", "directory", "tree"]),
    ("bio", &["profile", "user"]),
    ("avatar", &["profile", "user"]),
    ("mail", &["email"]),
    ("keyword", &["topic"]),
    ("licence", &["license"]),
    ("visitor", &["views", "traffic"]),
    ("visit", &["views", "traffic"]),
    ("website", &["pages"]),
    ("invoice", &["billing"]),
    ("payment", &["billing"]),
    ("charges", &["billing"]),
    ("minutes", &["usage", "billing"]),
    ("consumption", &["usage"]),
    ("throttle", &["rate limit"]),
    ("throttling", &["rate limit"]),
    ("green", &["status", "success"]),
    ("passing", &["status", "success"]),
    ("output", &["logs", "artifact"]),
    ("console", &["logs"]),
    ("step", &["job"]),
    ("worker", &["runner"]),
    ("container", &["package", "docker"]),
    ("binary", &["artifact", "asset"]),
    ("attachment", &["asset"]),
    ("zip", &["zipball", "archive"]),
    ("tar", &["tarball"]),
    ("changelog", &["release", "notes"]),
    ("sprint", &["milestone"]),
    ("deadline", &["milestone"]),
    ("category", &["label"]),
    ("maintainer", &["collaborator", "member"]),
    ("teammate", &["collaborator", "member"]),
    ("outsider", &["outside collaborator"]),
    ("contractor", &["outside collaborator"]),
    ("guest", &["outside collaborator"]),
    ("employee", &["member"]),
    ("staff", &["member"]),
    ("difference", &["compare"]),
    ("vuln", &["vulnerability"]),
    ("sha", &["commit"]),
    ("pgp", &["gpg"]),
    ("ide", &["codespace"]),
    ("devbox", &["codespace"]),
    ("bot", &["app", "installation"]),
    ("provenance", &["attestation"]),
    ("override", &["bypass"]),
    ("exemption", &["bypass", "exclusion"]),
    ("exclude", &["exclusion"]),
    ("include", &["inclusion"]),
    ("expire", &["retention", "expiration"]),
    ("expiry", &["retention", "expiration"]),
    ("whitelist", &["allowed"]),
    ("allowlist", &["allowed"]),
    ("blacklist", &["block"]),
    ("blocklist", &["block"]),
    ("prioritize", &["reprioritize"]),
    ("statistics", &["stats"]),
    ("analytics", &["stats", "traffic", "metrics"]),
    ("insights", &["stats", "traffic"]),
    ("total", &["count", "stats"]),
    ("number", &["count"]),
    ("newest", &["latest"]),
    ("last", &["latest"]),
    ("popular", &["top"]),
    ("everyone", &["member", "user"]),
    ("anyone", &["user"]),
    ("somebody", &["user"]),
    ("openid", &["oidc"]),
    ("diff", &["compare"]),
    ("succeeded", &["success", "status"]),
    ("codeql", &["code scanning"]),
    ("dep", &["dependency"]),
    ("vulnerable", &["vulnerability", "alert"]),
    ("flagged", &["alert"]),
    ("covenant", &["code of conduct"]),
    ("shortcode", &["emojis"]),
    ("ip", &["meta"]),
    ("lately", &["recent"]),
    ("rights", &["permission"]),
    ("privileges", &["permission"]),
    ("todo", &["issue"]),
    ("backlog", &["issue", "project"]),
    ("subtask", &["sub issue"]),
    ("epic", &["parent"]),
    ("cron", &["workflow", "schedule"]),
    ("nightly", &["workflow", "schedule"]),
    ("password", &["secret"]),
    ("api key", &["token", "secret"]),
    ("contact", &["email"]),
    ("handle", &["login", "username"]),
    ("pastebin", &["gist"]),
    ("workspace", &["organization"]),
    ("subteam", &["child team"]),
    ("payload", &["delivery"]),
    ("prod", &["production", "environment"]),
    ("staging", &["environment"]),
    ("failing", &["failure", "status"]),
    ("broken", &["failure", "status"]),
    ("red", &["failure", "status"]),
    ("hole", &["vulnerability"]),
    ("exploit", &["vulnerability"]),
    ("sast", &["code scanning"]),
    ("leak", &["secret scanning"]),
    ("exposed", &["secret scanning", "alert"]),
    ("outdated", &["dependabot", "vulnerability"]),
    ("library", &["dependency", "package"]),
    ("guardrail", &["ruleset", "protection"]),
    ("domain", &["pages"]),
    ("cname", &["pages"]),
    ("ghcr", &["container package"]),
    ("spam", &["interaction limit", "block"]),
    ("cooldown", &["interaction limit"]),
    ("troll", &["block", "interaction limit"]),
    ("federation", &["oidc"]),
    ("jira", &["autolink"]),
    ("board", &["project"]),
    ("kanban", &["project"]),
    ("feed", &["event", "feeds"]),
    ("pointer", &["ref"]),
    ("preview", &["render"]),
    ("ignore file", &["gitignore"]),
    // Verbs: writing.
    ("open", &["create"]),
    ("new", &["create"]),
    ("make", &["create"]),
    ("add", &["create"]),
    ("publish", &["create", "promote"]),
    ("share", &["create"]),
    ("upload", &["create"]),
    ("put", &["add", "set"]),
    ("save", &["create", "update"]),
    ("join", &["member", "invitation"]),
    ("give", &["add", "grant"]),
    ("set", &["update", "create"]),
    ("remove", &["delete"]),
    ("delete", &["remove"]),
    ("drop", &["delete"]),
    ("edit", &["update"]),
    ("change", &["update"]),
    ("modify", &["update"]),
    ("rename", &["update"]),
    ("close", &["update"]),
    ("reopen", &["update"]),
    ("archive", &["update"]),
    ("comment", &["create comment"]),
    ("reply", &["create comment"]),
    ("deploy", &["create deployment"]),
    ("watch", &["subscription", "subscribe"]),
    ("subscribe", &["subscription"]),
    ("assign", &["assignee"]),
    ("approve", &["review"]),
    ("ask", &["request"]),
    ("stop", &["cancel"]),
    ("detach", &["remove", "delete"]),
    ("invite", &["add"]),
    ("retry", &["rerun"]),
    ("rerun", &["rerequest"]),
    ("rebuild", &["build"]),
    ("store", &["create", "set"]),
    ("trigger", &["dispatch"]),
    ("erase", &["delete"]),
    ("wipe", &["delete"]),
    ("purge", &["delete"]),
    ("nuke", &["delete"]),
    ("trash", &["delete"]),
    ("destroy", &["delete"]),
    ("discard", &["delete"]),
    ("scrap", &["delete"]),
    ("abort", &["cancel"]),
    ("kill", &["cancel"]),
    ("halt", &["cancel"]),
    ("terminate", &["cancel"]),
    ("launch", &["dispatch", "create", "start"]),
    ("kick", &["dispatch", "create", "start"]),
    ("begin", &["start", "create"]),
    ("tweak", &["update"]),
    ("adjust", &["update"]),
    ("alter", &["update"]),
    ("amend", &["update"]),
    ("revise", &["update"]),
    ("bump", &["update"]),
    ("land", &["merge"]),
    ("combine", &["merge"]),
    ("ship", &["release", "deployment"]),
    ("rollout", &["deployment"]),
    ("lgtm", &["approve", "review"]),
    ("resend", &["redeliver"]),
    ("replay", &["redeliver"]),
    ("activate", &["enable"]),
    ("deactivate", &["disable", "suspend"]),
    ("reject", &["decline", "dismiss"]),
    ("refuse", &["decline"]),
    ("ignore", &["dismiss"]),
    ("kick out", &["remove"]),
    ("expel", &["remove"]),
    ("unsubscribe", &["delete subscription"]),
    ("unwatch", &["delete subscription"]),
    ("move", &["transfer"]),
    ("unprotect", &["delete protection"]),
    ("unassign", &["remove assignee"]),
    ("confirm", &["verify"]),
    ("validate", &["verify"]),
    ("produce", &["generate"]),
    ("send", &["create"]),
    ("write", &["create", "update"]),
    ("post", &["create"]),
    ("respond", &["reply", "create comment"]),
    ("answer", &["reply", "create comment"]),
    ("ban", &["block"]),
    ("freeze", &["lock", "suspend"]),
    ("copy", &["fork", "generate"]),
    ("slap", &["add"]),
    ("cut", &["create"]),
    ("prune", &["delete"]),
    ("sync", &["merge upstream"]),
    ("rebase", &["update branch", "merge"]),
    ("squash", &["merge"]),
    ("upgrade", &["update"]),
    ("downgrade", &["update"]),
    ("undelete", &["restore"]),
    ("invalidate", &["revoke", "delete"]),
    ("notify", &["notification"]),
    ("quit", &["remove membership", "leave"]),
    // Verbs: reading.
    ("show", &["list", "get"]),
    ("see", &["list", "get"]),
    ("view", &["list", "get"]),
    ("read", &["get"]),
    ("fetch", &["get"]),
    ("look up", &["get"]),
    ("find", &["search"]),
    ("retrieve", &["get"]),
    ("inspect", &["get"]),
    ("display", &["get", "list"]),
    ("obtain", &["get"]),
    ("grab", &["get", "download"]),
    ("browse", &["list"]),
    ("enumerate", &["list"]),
    ("filter", &["list", "search"]),
    ("query", &["search"]),
];

/// Words after which the query says where, not what: in "list the commits
/// in a pull request", the commits are wanted, and "pull request" says where.
const PREPOSITIONS: &[&str] =
    &["of", "in", "on", "to", "from", "for", "into", "at", "by", "with", "within", "inside", "about", "between"];

/// Whether `word` opens what says where, not what.
pub fn is_preposition(word: &str) -> bool {
    PREPOSITIONS.contains(&word)
}

/// How much a concept after a preposition counts.
const CONTEXT: f32 = 0.6;

/// Words that ask to read: the first word of these or [`WRITES`] in a query says what it wants.
const READS: &[&str] = &[
    "list",
    "get",
    "show",
    "see",
    "view",
    "read",
    "fetch",
    "find",
    "search",
    "look",
    "what",
    "which",
    "who",
    "how",
    "is",
    "has",
    "did",
    "does",
    "check",
    "download",
    "are",
    "was",
    "were",
    "retrieve",
    "inspect",
    "display",
    "obtain",
    "grab",
    "browse",
    "enumerate",
    "tell",
];

const WRITES: &[&str] = &[
    "create",
    "add",
    "new",
    "open",
    "make",
    "publish",
    "share",
    "give",
    "grant",
    "set",
    "update",
    "edit",
    "change",
    "modify",
    "rename",
    "close",
    "reopen",
    "delete",
    "remove",
    "drop",
    "merge",
    "approve",
    "assign",
    "ask",
    "comment",
    "star",
    "unstar",
    "follow",
    "unfollow",
    "fork",
    "lock",
    "unlock",
    "invite",
    "upload",
    "send",
    "cancel",
    "stop",
    "retry",
    "rerun",
    "trigger",
    "mark",
    "enable",
    "disable",
    "turn",
    "protect",
    "commit",
    "file",
    "thumbs",
    "post",
    "put",
    "write",
    "sign",
    "log",
    "deploy",
    "watch",
    "subscribe",
    "reply",
    "archive",
    "block",
    "unblock",
    "pin",
    "unpin",
    "transfer",
    "move",
    "accept",
    "decline",
    "dismiss",
    "sync",
    "attach",
    "reorder",
    "sort",
    "link",
    "save",
    "pause",
    "resume",
    "start",
    "restart",
    "suspend",
    "revoke",
    "reset",
    "redeliver",
    "import",
    "install",
    "uninstall",
    "apply",
    "promote",
    "join",
    "leave",
    "hide",
    "mute",
    "review",
    "submit",
    "replace",
    "rotate",
    "generate",
    "clear",
    "spin",
    "take",
    "tag",
    "label",
    "configure",
    "register",
    "verify",
    "rebuild",
    "report",
    "store",
    "erase",
    "wipe",
    "purge",
    "nuke",
    "trash",
    "destroy",
    "discard",
    "scrap",
    "abort",
    "kill",
    "halt",
    "terminate",
    "launch",
    "kick",
    "begin",
    "tweak",
    "adjust",
    "alter",
    "amend",
    "revise",
    "bump",
    "land",
    "combine",
    "ship",
    "lgtm",
    "resend",
    "replay",
    "activate",
    "deactivate",
    "reject",
    "refuse",
    "ignore",
    "expel",
    "unsubscribe",
    "unwatch",
    "unprotect",
    "unassign",
    "respond",
    "answer",
    "ban",
    "freeze",
    "copy",
    "upvote",
    "like",
    "favorite",
    "favourite",
    "slap",
    "cut",
    "prune",
    "rebase",
    "squash",
    "upgrade",
    "downgrade",
    "undelete",
    "invalidate",
    "notify",
    "quit",
];

/// One thing the query asks for, in the ways a tool may say it.
#[derive(Debug, Clone, PartialEq)]
pub struct Concept {
    /// How much it counts: [`CONTEXT`] after a preposition, else 1.
    pub weight: f32,
    /// Whether the first alternative is the words typed (weight 1); the
    /// others are what they stand for.
    pub typed: bool,
    pub alternatives: Vec<Alternative>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    pub weight: f32,
    /// Lower case, unstemmed.
    pub words: Vec<String>,
}

/// The longest phrase of `table` at `words[at..]` (its last word also in
/// the plural, with an `s`): its length and what it stands for.
fn phrase_at(table: Table, words: &[String], at: usize) -> Option<(usize, &'static [&'static str])> {
    (1..=3.min(words.len() - at)).rev().find_map(|length| {
        let phrase = words[at..at + length].join(" ");
        let plural = |said: &str| phrase.strip_suffix('s') == Some(said);
        table.iter().find(|(said, _)| *said == phrase || plural(said)).map(|(_, meant)| (length, *meant))
    })
}

/// Whether `words[at]` describes what follows rather than asking to do it:
/// "open" before a plural ("all open issues") is a state, not "create".
fn describes(words: &[String], at: usize) -> bool {
    words[at] == "open" && words.get(at + 1).is_some_and(|next| next.len() > 3 && next.ends_with('s'))
}

/// Stop words, and single letters outside a phrase: never a term, in a
/// query or a tool.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.contains(&word) || word.chars().count() < 2
}

/// The concepts of a query's words (lower case, in order; `search::words`).
pub fn concepts(words: &[String]) -> Vec<Concept> {
    let mut out = Vec::new();
    let mut weight = 1.0;
    let mut at = 0;
    while at < words.len() {
        if PREPOSITIONS.contains(&words[at].as_str()) {
            weight = CONTEXT;
        }
        let (typed, length, meant) = match phrase_at(MEANS, words, at) {
            Some((length, meant)) => (Vec::new(), length, meant),
            None => {
                let (length, meant) = match describes(words, at) {
                    true => (1, &[][..]),
                    false => phrase_at(ALSO, words, at).unwrap_or((1, &[])),
                };
                let typed: Vec<String> = words[at..at + length].iter().filter(|w| !is_stop_word(w)).cloned().collect();
                (typed, length, meant)
            }
        };
        at += length;
        let mut alternatives = Vec::new();
        let is_typed = !typed.is_empty();
        if is_typed {
            alternatives.push(Alternative { weight: 1.0, words: typed });
        }
        alternatives.extend(
            meant.iter().map(|phrase| Alternative {
                weight: ALTERNATIVE,
                words: phrase.split(' ').map(str::to_owned).collect(),
            }),
        );
        if !alternatives.is_empty() {
            out.push(Concept { weight, typed: is_typed, alternatives });
        }
    }
    out
}

/// Whether a query asks to read or to write, when it says so.
pub fn intent(words: &[String]) -> Option<Effect> {
    words.iter().enumerate().find_map(|(at, word)| {
        // "Get rid of" writes, though "get" reads.
        if word == "get" && words.get(at + 1).is_some_and(|next| next == "rid") {
            Some(Effect::Write)
        } else if describes(words, at) {
            None
        } else if READS.contains(&word.as_str()) {
            Some(Effect::Read)
        } else if WRITES.contains(&word.as_str()) {
            Some(Effect::Write)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_owned).collect()
    }

    /// Each concept as its alternatives' words, `|` between alternatives.
    fn shown(query: &str) -> Vec<String> {
        concepts(&words(query))
            .iter()
            .map(|c| c.alternatives.iter().map(|a| a.words.join(" ")).collect::<Vec<_>>().join(" | "))
            .collect()
    }

    #[test]
    fn queries_become_concepts() {
        let table: &[(&str, &[&str])] = &[
            ("open a pr", &["open | create", "pr | pull request"]),
            ("list prs", &["list", "prs | pull request"]),
            // A phrase that stands for something else is only that.
            ("who am i logged in as", &["authenticated user | current user | me", "authenticated | current user"]),
            ("the of a", &[]),
            ("list issues", &["list", "issues"]),
            // The longest phrase wins over its first word.
            ("log in", &["login | authenticate"]),
            ("log files", &["log", "files | content"]),
            ("how many stars", &["many | count", "stars | stargazer"]),
            ("open issues", &["open", "issues"]),
        ];
        for (query, expected) in table {
            assert_eq!(shown(query), *expected, "{query}");
        }
    }

    #[test]
    fn what_follows_a_preposition_counts_less() {
        let weights: Vec<f32> =
            concepts(&words("list the commits in a pull request")).iter().map(|c| c.weight).collect();
        assert_eq!(weights, [1.0, 1.0, CONTEXT]);
    }

    #[test]
    fn the_typed_words_weigh_most() {
        let concepts = concepts(&words("repo"));
        let weights: Vec<f32> = concepts[0].alternatives.iter().map(|a| a.weight).collect();
        assert_eq!(weights, [1.0, ALTERNATIVE]);
    }

    #[test]
    fn the_first_verb_says_read_or_write() {
        let table = [
            ("what branches does this repo have", Some(Effect::Read)),
            ("list the comments on an issue", Some(Effect::Read)),
            ("comment on an issue", Some(Effect::Write)),
            ("open a pull request", Some(Effect::Write)),
            // Not "who": the verb before it.
            ("block a user who keeps spamming me", Some(Effect::Write)),
            ("store a secret that only production can read", Some(Effect::Write)),
            ("get rid of a stale branch", Some(Effect::Write)),
            // "Open" before a plural is a state: the verb comes later, or none.
            ("open issues assigned to me", None),
            ("list open pull requests", Some(Effect::Read)),
            ("the rate limit", None),
        ];
        for (query, expected) in table {
            assert_eq!(intent(&words(query)), expected, "{query}");
        }
    }

    #[test]
    fn every_phrase_is_lower_case_words() {
        let lists = [STOP_WORDS, READS, WRITES];
        let phrases = MEANS.iter().chain(ALSO).flat_map(|(said, meant)| std::iter::once(said).chain(meant.iter()));
        for phrase in phrases.chain(lists.iter().flat_map(|list| list.iter())) {
            let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_lowercase() || c.is_ascii_digit());
            assert!(phrase.split(' ').all(word), "{phrase}");
        }
    }
}
