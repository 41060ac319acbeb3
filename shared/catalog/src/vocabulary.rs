//! How people ask for an API's operations, for search: the words that carry
//! nothing ("the", "a", "does"), the words and phrases that name what
//! operations call otherwise ("PR": pull request, "logged in":
//! authenticated, "show": list or get), and whether a query reads or writes.
//!
//! A query becomes concepts, one per word or phrase that carries something;
//! each concept has alternatives (its own words first), and a tool scores the
//! best of them (`search.rs`), so a synonym never counts twice and the words
//! a person typed count more than what they were taken for.

mod tables;

use executor_core::Effect;
use tables::{ALSO, MEANS, Table};

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
                let (length, meant) =
                    if describes(words, at) { (1, &[][..]) } else { phrase_at(ALSO, words, at).unwrap_or((1, &[])) };
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
