//! The policies that can decide one tool's calls, found once per tool, and
//! what they say of a call without asking Cedar where they can. Cedar
//! evaluates every policy of a set for each request (about a microsecond
//! each on the machines of `docs/benchmarks.md`), and most of a set's
//! policies name another action, another tool, or attributes of the tool
//! (`resource.operation == "..."`) another tool has.
//!
//! At load each policy's scope and conditions are compiled into terms
//! (`terms.rs`). At the first call of a tool each policy is judged, per
//! action, from what the tool fixes (the action, the path, the tool's
//! attributes): known not to apply (dropped), known to apply whatever the
//! call, or depending on the call. At each call the policies that depend on
//! it are judged again with the call's arguments, counts, owner and toolkit;
//! when every one is known to apply or not, so is Cedar's answer. Otherwise
//! Cedar is asked of the tool's kept policies, given only the parts of the
//! request they read (the arguments they name, the principal's entity when
//! they read its attributes).
//!
//! "Known not to apply" is sound under Cedar's errors: a policy whose
//! condition is false *or fails to evaluate* does not apply either way (so a
//! policy that would have failed is no longer evaluated, nor logged). The
//! decisions and the ids that name them are the whole set's (`tests.rs`
//! compares them call by call).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use cedar_policy::pst::{
    self, ActionConstraint, BinaryOp, Clause, EntityOrSlot, Expr, PrincipalConstraint, ResourceConstraint, Var,
};
use cedar_policy::{Decision, Entities, Entity, EntityUid, Policy, PolicySet};
use executor_core::Effect;
use executor_sandbox::PolicyCall;

use super::ToolFacts;
use super::terms::{Env, Lit, Term, boxed, entity, eval, term};

/// Tools whose slices are kept; calls of any further tool are asked of the whole set.
const CAP: usize = 4096;

/// What the policies Cedar is asked of read of a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Needs {
    /// The principal's entity (its attributes, or `in`).
    pub principal: bool,
    /// `context.execution`.
    pub execution: bool,
    pub args: Args,
}

/// Which of `context.args` is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Args {
    /// Only these top-level arguments (none: `args` is not read).
    Named(BTreeSet<String>),
    All,
}

impl Default for Args {
    fn default() -> Self {
        Self::Named(BTreeSet::new())
    }
}

impl Needs {
    /// Everything: what the whole set is given.
    pub(super) fn all() -> Self {
        Self { principal: true, execution: true, args: Args::All }
    }

    fn whole_context(&mut self) {
        self.execution = true;
        self.args = Args::All;
    }

    fn add(&mut self, other: &Needs) {
        self.principal |= other.principal;
        self.execution |= other.execution;
        match (&mut self.args, &other.args) {
            (Args::All, _) => {}
            (mine, Args::All) => *mine = Args::All,
            (Args::Named(mine), Args::Named(theirs)) => mine.extend(theirs.iter().cloned()),
        }
    }
}

/// One action's request for one tool.
pub(super) enum Ask {
    /// No kept policy depends on the call: Cedar's decision and reasons, known.
    Known(Decision, Vec<String>),
    /// The kept policies: those that apply to every call, those that depend on
    /// the call (indices into [`Slices`]' policies), and the set Cedar is
    /// asked of when one of the latter is not known.
    Evaluate { applying: Vec<usize>, depending: Vec<usize>, set: Box<PolicySet> },
}

/// What an action's request comes to for one call.
pub(super) enum Answer<'a> {
    Known(Decision, Vec<String>),
    Ask(&'a PolicySet),
}

/// What one tool's calls are asked of.
pub(super) struct Slice {
    facts: Facts,
    call: Ask,
    call_unattended: Ask,
    /// What the policies of the [`Ask::Evaluate`]s read of a call.
    pub needs: Needs,
    /// The tool's entity, and the entities of a request that needs no principal.
    pub tool: Entity,
    pub tool_only: Entities,
}

#[cfg(test)]
impl Slice {
    /// How many policies Cedar would be asked of, per action (`None`: known without asking).
    pub(super) fn asked_of(&self) -> [Option<usize>; 2] {
        [&self.call, &self.call_unattended].map(|ask| match ask {
            Ask::Known(..) => None,
            Ask::Evaluate { set, .. } => Some(set.num_of_policies()),
        })
    }
}

/// The tool's attributes, to tell a cached slice is this tool's.
#[derive(Debug, PartialEq, Eq)]
struct Facts {
    namespace: String,
    kind: Effect,
    source_kind: String,
    method: String,
    path_template: String,
    operation: String,
    destructive: bool,
}

impl Facts {
    fn new(tool: &ToolFacts<'_>) -> Self {
        Self {
            namespace: tool.namespace.to_owned(),
            kind: tool.kind,
            source_kind: tool.source_kind.to_owned(),
            method: tool.method.to_owned(),
            path_template: tool.path_template.to_owned(),
            operation: tool.operation.to_owned(),
            destructive: tool.destructive,
        }
    }

    fn is(&self, tool: &ToolFacts<'_>) -> bool {
        (self.namespace.as_str(), self.kind, self.source_kind.as_str(), self.method.as_str())
            == (tool.namespace, tool.kind, tool.source_kind, tool.method)
            && (self.path_template.as_str(), self.operation.as_str(), self.destructive)
                == (tool.path_template, tool.operation, tool.destructive)
    }
}

/// A policy set compiled for slicing, and the slices made so far, by tool path.
pub(super) struct Slices {
    policies: Vec<Compiled>,
    cache: Mutex<HashMap<String, Arc<Slice>>>,
}

struct Compiled {
    policy: Policy,
    id: String,
    forbid: bool,
    /// Scope and conditions.
    condition: Term,
    needs: Needs,
}

impl Slices {
    pub(super) fn new(set: &PolicySet) -> Self {
        let policies = set.policies().map(compile).collect();
        Self { policies, cache: Mutex::new(HashMap::new()) }
    }

    /// The slice for `path`, made at its first call; `None` beyond [`CAP`] tools.
    pub(super) fn get(&self, path: &str, tool: &ToolFacts<'_>, entity: &EntityUid) -> Option<Arc<Slice>> {
        {
            let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            match cache.get(path) {
                Some(slice) if slice.facts.is(tool) => return Some(slice.clone()),
                None if cache.len() >= CAP => return None,
                _ => {}
            }
        }
        let slice = Arc::new(self.slice(path, tool, entity));
        self.cache.lock().unwrap_or_else(PoisonError::into_inner).insert(path.to_owned(), slice.clone());
        Some(slice)
    }

    fn slice(&self, path: &str, tool: &ToolFacts<'_>, entity: &EntityUid) -> Slice {
        let mut needs = Needs::default();
        let mut ask = |action: &str| {
            let env = Env { action, path, tool, call: None };
            let (mut applying, mut depending) = (Vec::new(), Vec::new());
            for (index, compiled) in self.policies.iter().enumerate() {
                match eval(&compiled.condition, &env) {
                    known if known.is_false() => {}
                    known if known.is_true() => applying.push(index),
                    _ => depending.push(index),
                }
            }
            if depending.is_empty() {
                let (decision, ids) = self.known(applying.iter().copied());
                return Ask::Known(decision, ids);
            }
            let mut set = PolicySet::new();
            for &index in applying.iter().chain(&depending) {
                needs.add(&self.policies[index].needs);
                set.add(self.policies[index].policy.clone()).expect("the whole set's policies have distinct ids");
            }
            Ask::Evaluate { applying, depending, set: Box::new(set) }
        };
        let (call, call_unattended) = (ask("call"), ask("call_unattended"));
        let entity = super::tool_entity(entity, tool);
        let tool_only = Entities::from_entities([entity.clone()], None).expect("one entity never clashes with itself");
        Slice { facts: Facts::new(tool), call, call_unattended, needs, tool: entity, tool_only }
    }

    /// What `slice` comes to for `call`, for `call_unattended` or (not) `call`.
    pub(super) fn answer<'s>(
        &self,
        slice: &'s Slice,
        unattended: bool,
        call: &PolicyCall<'_>,
        tool: &ToolFacts<'_>,
    ) -> Answer<'s> {
        let (ask, action) = match unattended {
            false => (&slice.call, "call"),
            true => (&slice.call_unattended, "call_unattended"),
        };
        let (applying, depending, set) = match ask {
            Ask::Known(decision, ids) => return Answer::Known(*decision, ids.clone()),
            Ask::Evaluate { applying, depending, set } => (applying, depending, set),
        };
        let env = Env { action, path: call.path, tool, call: Some(call) };
        let mut applying_now = applying.clone();
        for &index in depending {
            match eval(&self.policies[index].condition, &env) {
                known if known.is_false() => {}
                known if known.is_true() => applying_now.push(index),
                _ => return Answer::Ask(set),
            }
        }
        let (decision, ids) = self.known(applying_now.into_iter());
        Answer::Known(decision, ids)
    }

    /// Cedar's answer when exactly these policies apply: denied by any
    /// forbid, allowed by any permit, denied when there is none; the reasons
    /// are the forbids, or (none) the permits.
    fn known(&self, applying: impl Iterator<Item = usize>) -> (Decision, Vec<String>) {
        let (mut forbids, mut permits) = (Vec::new(), Vec::new());
        for compiled in applying.map(|index| &self.policies[index]) {
            match compiled.forbid {
                true => forbids.push(compiled.id.clone()),
                false => permits.push(compiled.id.clone()),
            }
        }
        match (forbids.is_empty(), permits.is_empty()) {
            (true, false) => (Decision::Allow, permits),
            (true, true) => (Decision::Deny, permits),
            (false, _) => (Decision::Deny, forbids),
        }
    }
}

fn compile(policy: &Policy) -> Compiled {
    let forbid = policy.effect() == cedar_policy::Effect::Forbid;
    let (condition, needs) = match policy.to_pst() {
        Ok(pst::Policy::Static(body)) => {
            let body = body.body();
            let mut needs = Needs {
                principal: matches!(body.principal, PrincipalConstraint::In(_) | PrincipalConstraint::IsIn(..)),
                ..Needs::default()
            };
            let mut condition = Term::Lit(Lit::Bool(true));
            for clause in body.clauses().iter().rev() {
                let (expr, term) = match clause {
                    Clause::When(expr) => (expr, term(expr)),
                    Clause::Unless(expr) => (expr, Term::Not(boxed(term(expr)))),
                };
                reads(expr, &mut needs);
                condition = Term::And(boxed(term), boxed(condition));
            }
            for scope in [resource(&body.resource), action(&body.action), principal(&body.principal)] {
                condition = Term::And(boxed(scope), boxed(condition));
            }
            (condition, needs)
        }
        _ => (Term::Opaque, Needs::all()),
    };
    Compiled { policy: policy.clone(), id: policy.id().to_string(), forbid, condition, needs }
}

fn principal(scope: &PrincipalConstraint) -> Term {
    match scope {
        PrincipalConstraint::Any => Term::Lit(Lit::Bool(true)),
        PrincipalConstraint::Eq(EntityOrSlot::Entity(uid)) => Term::Eq(boxed(Term::Principal), boxed(entity(uid))),
        _ => Term::Opaque,
    }
}

/// No action entities are given, so `action in [..]` is `action` being one of them.
fn action(scope: &ActionConstraint) -> Term {
    match scope {
        ActionConstraint::Any => Term::Lit(Lit::Bool(true)),
        ActionConstraint::Eq(uid) => Term::Eq(boxed(Term::Action), boxed(entity(uid))),
        ActionConstraint::In(uids) => {
            Term::Contains(boxed(Term::Set(uids.iter().map(entity).collect())), boxed(Term::Action))
        }
    }
}

fn resource(scope: &ResourceConstraint) -> Term {
    match scope {
        ResourceConstraint::Any => Term::Lit(Lit::Bool(true)),
        ResourceConstraint::Eq(EntityOrSlot::Entity(uid)) => Term::Eq(boxed(Term::Resource), boxed(entity(uid))),
        _ => Term::Opaque,
    }
}

/// What `expr` reads of the request beyond the tool.
fn reads(expr: &Expr, needs: &mut Needs) {
    match expr {
        Expr::Var(Var::Context) => needs.whole_context(),
        Expr::Literal(_) | Expr::Var(_) | Expr::Slot(_) | Expr::Unknown { .. } => {}
        Expr::GetAttr { expr, attr } => attribute(expr, vec![attr.as_str()], needs),
        Expr::HasAttr { expr, attrs } => attribute(expr, attrs.iter().map(|a| a.as_str()).collect(), needs),
        Expr::UnaryOp { expr, .. } | Expr::Like { expr, .. } => reads(expr, needs),
        Expr::BinaryOp { op, left, right } => {
            needs.principal |= matches!(op, BinaryOp::In | BinaryOp::GetTag | BinaryOp::HasTag);
            reads(left, needs);
            reads(right, needs);
        }
        Expr::Is { expr, in_expr, .. } => {
            needs.principal |= in_expr.is_some();
            reads(expr, needs);
            in_expr.iter().for_each(|e| reads(e, needs));
        }
        Expr::IfThenElse { cond, then_expr, else_expr } => {
            [cond, then_expr, else_expr].into_iter().for_each(|e| reads(e, needs));
        }
        Expr::Set(items) => items.iter().for_each(|e| reads(e, needs)),
        Expr::Record(fields) => fields.values().for_each(|e| reads(e, needs)),
        _ => *needs = Needs::all(),
    }
}

/// `<expr>.<names...>` (or `<expr> has <names...>`): the resource's
/// attributes are always there; `context.args.<name>` reads that argument,
/// `context.execution` the counts; any other entity's attributes need the principal's.
fn attribute<'a>(mut expr: &'a Expr, mut names: Vec<&'a str>, needs: &mut Needs) {
    while let Expr::GetAttr { expr: inner, attr } = expr {
        names.insert(0, attr.as_str());
        expr = inner;
    }
    match (expr, names.as_slice()) {
        (Expr::Var(Var::Resource), _) => {}
        (Expr::Var(Var::Context), ["execution", ..]) => needs.execution = true,
        (Expr::Var(Var::Context), ["args", name, ..]) => match &mut needs.args {
            Args::Named(named) => {
                named.insert((*name).to_owned());
            }
            Args::All => {}
        },
        (Expr::Var(Var::Context), _) => needs.whole_context(),
        (other, _) => {
            needs.principal = true;
            reads(other, needs);
        }
    }
}
