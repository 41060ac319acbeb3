//! A query against the search indexes: its concepts as the indexes' terms,
//! and each tool's score for it (`search.rs` says how a tool scores).

use std::collections::HashMap;

use executor_core::Effect;

use super::{
    COVERAGE, FORM, INTENT, LISTS, NAME, PREFIX, PREFIX_CHARS, PREFIX_CHARS_KNOWN, SearchIndex, UNNAMED, term,
};
use crate::tool::ToolDef;
use crate::vocabulary::{self, Concept};

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

pub(super) struct Query {
    concepts: Vec<Resolved>,
    intent: Option<Effect>,
    /// Every term of the query's concepts with its inverse document frequency.
    idf: HashMap<String, f32>,
    /// Every term with the weight of the surest concept that has it: a name
    /// word the query has after a preposition is less the query's than one before.
    sure: HashMap<String, f32>,
    /// The words typed that carry a concept, each with its stem.
    forms: Vec<(String, String)>,
    /// Whether the query asks who, or what or which of something in the
    /// plural: a tool that lists answers it.
    asks_many: bool,
}

impl Query {
    /// `typed`: the query's words (`search::query_words`), at least one.
    pub(super) fn new(parts: &[(&SearchIndex, &[ToolDef])], typed: &[String]) -> Self {
        let said = vocabulary::concepts(typed);
        let mut forms: Vec<(String, String)> = said
            .iter()
            .filter(|c| c.typed)
            .flat_map(|c| &c.alternatives[0].words)
            .map(|w| (w.clone(), term(w)))
            .collect();
        forms.sort_unstable();
        forms.dedup();
        let concepts: Vec<Resolved> = said.iter().map(|concept| resolve(parts, concept)).collect();
        let tools: usize = parts.iter().map(|(_, tools)| tools.len()).sum();
        let (mut idf, mut sure) = (HashMap::new(), HashMap::<String, f32>::new());
        for resolved in &concepts {
            for (term, _) in resolved.alternatives.iter().flat_map(|(_, words)| words).flatten() {
                let found: usize = parts.iter().map(|(index, _)| index.postings(term).len()).sum();
                let (n, found) = (tools as f32, found as f32);
                idf.insert(term.clone(), (1.0 + (n - found + 0.5) / (found + 0.5)).ln());
                let best = sure.entry(term.clone()).or_default();
                *best = best.max(resolved.weight);
            }
        }
        let has = |word: &str| typed.iter().any(|t| t == word);
        let plural = forms.iter().any(|(word, stem)| word.len() > 3 && word.ends_with('s') && word != stem);
        // "Is there a ..." asks what there is.
        let there = matches!(typed, [first, second, ..] if (first == "is" || first == "are") && second == "there");
        let asks_many = has("who") || there || ((has("what") || has("which")) && plural);
        Self { concepts, intent: vocabulary::intent(typed), idf, sure, forms, asks_many }
    }

    /// Each tool's sum over concepts, and how many concepts it matches.
    fn totals(&self, index: &SearchIndex, tools: usize) -> (Vec<f32>, Vec<f32>) {
        let mut total = vec![0.0f32; tools];
        let mut matched = vec![0.0f32; tools];
        let (mut word, mut alternative, mut concept) = (Scores::new(tools), Scores::new(tools), Scores::new(tools));
        for resolved in &self.concepts {
            for (weight, words) in &resolved.alternatives {
                for variants in words {
                    for (term, factor) in variants {
                        for posting in index.postings(term) {
                            let at = posting.tool as usize;
                            word.max(at, factor * index.score(posting, self.idf[term]));
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
        (total, matched)
    }

    /// How much of each tool's name the query has (each term once, however
    /// many concepts have it, as sure as the surest).
    fn named(&self, index: &SearchIndex, tools: usize) -> Vec<f32> {
        let mut named = vec![0.0f32; tools];
        for (term, sure) in &self.sure {
            for posting in index.postings(term) {
                named[posting.tool as usize] += sure * f32::from(posting.counts[NAME]);
            }
        }
        named
    }

    /// Per tool, how many of the words typed its name has as typed, and
    /// how many in another form ("merge" for "merged", "branch" for "branches").
    fn agreement(&self, index: &SearchIndex, tools: usize) -> Vec<(u16, u16)> {
        let mut agree = vec![(0u16, 0u16); tools];
        for (word, stem) in &self.forms {
            for posting in index.postings(stem).iter().filter(|p| p.counts[NAME] > 0) {
                let at = posting.tool as usize;
                match index.names[at].split(' ').any(|name| name == word) {
                    true => agree[at].0 += 1,
                    false => agree[at].1 += 1,
                }
            }
        }
        agree
    }

    /// Each tool of one part with its score, when it has one.
    /// A tool whose path is `exact` ranks first.
    pub(super) fn scores<'t>(&self, index: &SearchIndex, part: &'t [ToolDef], exact: &str) -> Vec<(f32, &'t ToolDef)> {
        let (total, matched) = self.totals(index, part.len());
        let named = self.named(index, part.len());
        let agree = self.agreement(index, part.len());
        let mut out = Vec::new();
        for (at, tool) in part.iter().enumerate() {
            if tool.path == exact {
                out.push((f32::INFINITY, tool));
                continue;
            }
            if total[at] == 0.0 {
                continue;
            }
            let coverage = (matched[at] / self.concepts.len() as f32).powf(COVERAGE);
            let intended = if self.intent == Some(tool.effect) { INTENT } else { 1.0 };
            let name = f32::from(index.lengths[at][NAME]).max(1.0);
            let share = (named[at] / name).min(1.0);
            let precision = (UNNAMED + (1.0 - UNNAMED) * share) * (1.0 + share);
            let form = match agree[at] {
                (_, 0) => 1.0,
                (same, other) => 1.0 - FORM * f32::from(other) / f32::from(same + other),
            };
            let lists = self.asks_many && index.names[at].split(' ').any(|w| w == "list");
            let lists = if lists { LISTS } else { 1.0 };
            out.push((total[at] * coverage * intended * precision * form * lists, tool));
        }
        out
    }
}
