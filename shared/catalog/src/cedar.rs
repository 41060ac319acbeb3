//! Policies over arguments, in Cedar: a policy set parsed and validated once
//! at start, then asked about each call as two requests, `call` and
//! `call_unattended` (principal `Executor::Owner::"<owner>"`, resource
//! `Executor::Tool::"<path>"`):
//! - not permitted to `call`: `block`;
//! - permitted to `call_unattended`: `run`;
//! - otherwise `approve`.
//!
//! A policy's `@id("...")` names it in the approval message, the `blocked`
//! error and the audit trail; without one it is named `<file>:<line>`.
//!
//! `schema.rs` is the schema the set is validated against (what `executor
//! policy schema` prints), `validate.rs` the checks at start, `values.rs`
//! the call's arguments as Cedar values, `slice.rs` the policies that can
//! decide a tool's calls and what they say of a call without asking Cedar
//! (what keeps a call's cost down in sets of many policies), with the terms
//! of `terms.rs`.

mod schema;
mod slice;
mod terms;
mod validate;
mod values;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::LazyLock;

use cedar_policy::{
    Authorizer, Context, Decision, Entities, Entity, EntityUid, PolicySet, Request, RestrictedExpression,
};
use executor_core::{Effect, PolicyAction};
use executor_sandbox::PolicyCall;
use serde_json::Value;
use slice::{Answer, Args, Needs, Slices};

pub use schema::{DECLARATIONS, schema_text};
pub use validate::CedarError;

/// The id a decision is named by when no policy made it: nothing permits the
/// call (`block`), or nothing lets it run unattended (`approve`).
pub const NO_POLICY_ID: &str = "cedar:default";

/// A policy set's text and the file it was read from, as the sources file names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CedarSource {
    pub file: PathBuf,
    pub text: String,
}

impl CedarSource {
    /// Read `file`; a missing file is an error naming it.
    pub fn read(file: &Path) -> Result<Self, std::io::Error> {
        Ok(Self { file: file.to_owned(), text: std::fs::read_to_string(file)? })
    }
}

/// What the policies know of a tool: the `Executor::Tool` entity's attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFacts<'a> {
    pub namespace: &'a str,
    pub kind: Effect,
    /// `openapi`, `mcp` or `graphql`.
    pub source_kind: &'a str,
    /// The HTTP method (`""` where there is none).
    pub method: &'a str,
    /// The OpenAPI path, e.g. `/repos/{owner}/{repo}/git/refs/{ref}` (`""` where there is none).
    pub path_template: &'a str,
    /// The OpenAPI `operationId`, the MCP tool's name, or the GraphQL field.
    pub operation: &'a str,
    /// An HTTP `DELETE`, or an MCP tool that says `destructiveHint: true`.
    pub destructive: bool,
}

/// What a policy set says of one call, and the ids of the policies that said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CedarDecision {
    pub action: PolicyAction,
    /// Empty when no policy decided (see [`NO_POLICY_ID`]).
    pub policies: Vec<String>,
}

impl CedarDecision {
    /// The id the audit trail records: the deciding policies' ids, or [`NO_POLICY_ID`].
    pub fn id(&self) -> String {
        match self.policies.is_empty() {
            true => NO_POLICY_ID.to_owned(),
            false => self.policies.join(","),
        }
    }

    /// Why, in words, to follow "needs approval:" or "is blocked by": the
    /// policies that decided, or that none did.
    pub fn reason(&self) -> String {
        let named = self.policies.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", ");
        match (self.action, self.policies.len()) {
            (PolicyAction::Block, 0) => "the Cedar policies (none permits calling it)".to_owned(),
            (PolicyAction::Approve, 0) => "the Cedar policies (none lets it run unattended)".to_owned(),
            (_, 1) => format!("Cedar policy {named}"),
            _ => format!("Cedar policies {named}"),
        }
    }
}

/// A validated policy set, ready to be asked.
pub struct CedarPolicies {
    set: PolicySet,
    file: PathBuf,
    call: EntityUid,
    call_unattended: EntityUid,
    authorizer: Authorizer,
    slices: Slices,
}

impl std::fmt::Debug for CedarPolicies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CedarPolicies")
            .field("file", &self.file)
            .field("policies", &self.set.num_of_policies())
            .finish()
    }
}

impl CedarPolicies {
    /// Parse `source` and validate it against the schema; `has_tool` says
    /// whether a tool path a policy names exists (`None`: it cannot be told,
    /// e.g. an OAuth-protected MCP server not listed yet).
    pub fn load(source: &CedarSource, has_tool: &dyn Fn(&str) -> Option<bool>) -> Result<Self, CedarError> {
        let set = validate::load(source, has_tool)?;
        let slices = Slices::new(&set);
        let action = |name: &str| {
            EntityUid::from_str(&format!("Executor::Action::\"{name}\"")).expect("the action uids are well formed")
        };
        Ok(Self {
            set,
            file: source.file.clone(),
            call: action("call"),
            call_unattended: action("call_unattended"),
            authorizer: Authorizer::new(),
            slices,
        })
    }

    /// The file the set was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What the set says of `call` of `tool`: what the policies that can
    /// decide the tool's calls say (see `slice.rs`), or (beyond the tools
    /// whose slices are kept) what the whole set says.
    pub fn decide(&self, call: &PolicyCall<'_>, tool: &ToolFacts<'_>) -> CedarDecision {
        let resource = uid("Tool", call.path);
        let Some(slice) = self.slices.get(call.path, tool, &resource) else { return self.decide_whole(call, tool) };
        let answer = |unattended: bool| self.slices.answer(&slice, unattended, call, tool);
        let entity = Some((&slice.tool, &slice.tool_only));
        self.answer(call, &Tool { facts: tool, uid: resource, entity }, answer, &slice.needs)
    }

    /// What the whole set says, every policy asked.
    fn decide_whole(&self, call: &PolicyCall<'_>, tool: &ToolFacts<'_>) -> CedarDecision {
        let tool = Tool { facts: tool, uid: uid("Tool", call.path), entity: None };
        self.answer(call, &tool, |_| Answer::Ask(&self.set), &Needs::all())
    }

    /// `call`, then (permitted) `call_unattended`, each answered by
    /// `answer(unattended)`; Cedar's request is made at the first that must
    /// be asked, with what `needs` says is read of it.
    fn answer<'s>(
        &self,
        call: &PolicyCall<'_>,
        tool: &Tool<'_>,
        answer: impl Fn(bool) -> Answer<'s>,
        needs: &Needs,
    ) -> CedarDecision {
        let mut made: Option<(EntityUid, Context, Option<Entities>)> = None;
        let mut ask = |unattended: bool| -> (Decision, Vec<String>) {
            let set = match answer(unattended) {
                Answer::Ask(set) => set,
                Answer::Known(decision, ids) => return (decision, ids),
            };
            let (principal, context, entities) = made.get_or_insert_with(|| request(call, tool, needs));
            let entities = match (&*entities, tool.entity) {
                (Some(entities), _) => entities,
                (None, Some((_, tool_only))) => tool_only,
                (None, None) => unreachable!("without the tool's entity the request makes its own"),
            };
            let action = if unattended { &self.call_unattended } else { &self.call };
            let request = Request::new(principal.clone(), action.clone(), tool.uid.clone(), context.clone(), None)
                .expect("a request without a schema is always well formed");
            #[cfg(test)]
            CEDAR_ASKED.set(CEDAR_ASKED.get() + 1);
            let response = self.authorizer.is_authorized(&request, set, entities);
            for error in response.diagnostics().errors() {
                tracing::debug!(%error, "a Cedar policy did not apply: its condition failed to evaluate");
            }
            let ids = response.diagnostics().reason().map(|id| id.to_string()).collect::<Vec<_>>();
            (response.decision(), ids)
        };
        let (decision, ids) = ask(false);
        if decision == Decision::Deny {
            return CedarDecision { action: PolicyAction::Block, policies: forbids(&self.set, ids) };
        }
        match ask(true) {
            (Decision::Allow, ids) => CedarDecision { action: PolicyAction::Run, policies: sorted(ids) },
            (Decision::Deny, ids) => CedarDecision { action: PolicyAction::Approve, policies: forbids(&self.set, ids) },
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Cedar requests made on this thread, for the tests to tell the slicing works.
    static CEDAR_ASKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The tool called: its facts, its uid, and (sliced) its entity made once
/// and the entities of a request that needs no principal.
struct Tool<'a> {
    facts: &'a ToolFacts<'a>,
    uid: EntityUid,
    entity: Option<(&'a Entity, &'a Entities)>,
}

/// The principal, the context and (unless the tool's entity alone will do) the entities.
fn request(call: &PolicyCall<'_>, tool: &Tool<'_>, needs: &Needs) -> (EntityUid, Context, Option<Entities>) {
    let owner = call.owner.map_or("", |owner| owner.as_str());
    let principal = uid("Owner", owner);
    let entities = match tool.entity {
        Some(_) if !needs.principal => None,
        entity => {
            let toolkit = call.toolkit.map_or("", |toolkit| toolkit.as_str());
            let tool = entity.map_or_else(|| tool_entity(&tool.uid, tool.facts), |(entity, _)| entity.clone());
            let made = [owner_entity(&principal, toolkit), tool];
            Some(Entities::from_entities(made, None).expect("two entities of different types never clash"))
        }
    };
    (principal, context(call, needs), entities)
}

/// On a deny, the reasons are the forbids that applied (none: nothing permitted).
fn forbids(set: &PolicySet, ids: Vec<String>) -> Vec<String> {
    let forbid = |id: &String| {
        set.policy(&cedar_policy::PolicyId::new(id)).is_some_and(|p| p.effect() == cedar_policy::Effect::Forbid)
    };
    sorted(ids.into_iter().filter(forbid).collect())
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn uid(kind: &str, id: &str) -> EntityUid {
    // Parsed once: a call makes a uid or two.
    static TYPES: LazyLock<[cedar_policy::EntityTypeName; 2]> = LazyLock::new(|| {
        ["Owner", "Tool"].map(|kind| {
            cedar_policy::EntityTypeName::from_str(&format!("Executor::{kind}"))
                .expect("the entity types are well formed")
        })
    });
    let kind = match kind {
        "Owner" => TYPES[0].clone(),
        "Tool" => TYPES[1].clone(),
        other => unreachable!("no entity type Executor::{other}"),
    };
    EntityUid::from_type_name_and_id(kind, cedar_policy::EntityId::new(id))
}

fn kind(kind: Effect) -> &'static str {
    match kind {
        Effect::Read => "read",
        Effect::Write => "write",
    }
}

fn owner_entity(principal: &EntityUid, toolkit: &str) -> Entity {
    let owner = HashMap::from([("toolkit".to_owned(), RestrictedExpression::new_string(toolkit.to_owned()))]);
    Entity::new(principal.clone(), owner, Default::default()).expect("string attributes always evaluate")
}

fn tool_entity(resource: &EntityUid, tool: &ToolFacts<'_>) -> Entity {
    let text = |value: &str| RestrictedExpression::new_string(value.to_owned());
    let attributes = HashMap::from([
        ("namespace".to_owned(), text(tool.namespace)),
        ("kind".to_owned(), text(kind(tool.kind))),
        ("source_kind".to_owned(), text(tool.source_kind)),
        ("method".to_owned(), text(tool.method)),
        ("path_template".to_owned(), text(tool.path_template)),
        ("operation".to_owned(), text(tool.operation)),
        ("destructive".to_owned(), RestrictedExpression::new_bool(tool.destructive)),
    ]);
    Entity::new(resource.clone(), attributes, Default::default()).expect("string and bool attributes always evaluate")
}

/// `args` (all of it, or the arguments named) and `execution`, as far as `needs` says they are read.
fn context(call: &PolicyCall<'_>, needs: &Needs) -> Context {
    let count = |n: u32| RestrictedExpression::new_long(i64::from(n));
    let mut pairs = Vec::with_capacity(2);
    match &needs.args {
        Args::All => pairs.push(("args".to_owned(), values::args(call.args))),
        Args::Named(names) if names.is_empty() => {}
        Args::Named(names) => {
            let named = names.iter().filter_map(|name| Some((name.clone(), call.args.get(name)?.clone())));
            pairs.push(("args".to_owned(), values::args(&Value::Object(named.collect()))));
        }
    }
    if needs.execution {
        let execution = RestrictedExpression::new_record([
            ("calls".to_owned(), count(call.before.calls)),
            ("writes".to_owned(), count(call.before.writes)),
            ("calls_to_tool".to_owned(), count(call.before.calls_to_tool)),
        ])
        .expect("the count names are distinct");
        pairs.push(("execution".to_owned(), execution));
    }
    Context::from_pairs(pairs).expect("a record of args and execution is a context")
}

impl crate::tool::ToolDef {
    /// The tool as Cedar policies see it, in a source of kind `source_kind`.
    pub(crate) fn cedar_facts<'a>(&'a self, source_kind: &'a str) -> ToolFacts<'a> {
        use crate::tool::Target;
        let facts = ToolFacts {
            namespace: &self.namespace,
            kind: self.effect,
            source_kind,
            method: "",
            path_template: "",
            operation: "",
            destructive: false,
        };
        match &self.target {
            Target::Http(op) => ToolFacts {
                method: &op.method,
                path_template: &op.path,
                operation: &op.operation_id,
                destructive: op.method == "DELETE",
                ..facts
            },
            Target::Mcp { name, hints, .. } => ToolFacts {
                operation: name,
                destructive: hints.iter().any(|(hint, set)| *hint == "destructiveHint" && *set),
                ..facts
            },
            Target::Graphql(op) => ToolFacts { operation: &op.field, ..facts },
        }
    }
}
