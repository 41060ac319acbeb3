//! Conditions as far as `slice.rs` follows them, and their values: for a
//! tool (the action, the tool's path and attributes), then for a call (its
//! arguments, counts, owner and toolkit too).
//!
//! A [`Known`] is exact only where Cedar's evaluation gives that value and
//! cannot fail: arguments are read as `values.rs` makes them (`null` absent,
//! a number that is no 64-bit integer its text), a missing argument or a
//! value of an unexpected type is not known (Cedar would fail, or this code
//! does not follow it), and whatever is not followed here (records, `in`,
//! extension functions, arithmetic) is [`Term::Opaque`]. `Maybe(b)` is `b`
//! or a failure, which is what a conjunction with a part known false is,
//! whatever fails before it: either way its policy does not apply.

use std::borrow::Cow;

use cedar_policy::pst::{BinaryOp, Expr, Literal, PatternElem, UnaryOp, Var};
use executor_sandbox::PolicyCall;
use serde_json::Value;

use super::ToolFacts;

pub(super) const ACTION: &str = "Executor::Action";
pub(super) const TOOL: &str = "Executor::Tool";
const OWNER: &str = "Executor::Owner";
/// Argument paths followed at most this deep (well inside `values::MAX_DEPTH`).
const DEPTH: usize = 8;

/// What is known of a value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val<'a> {
    Bool(bool),
    Long(i64),
    Str(Cow<'a, str>),
    /// Type and id.
    Entity(&'a str, &'a str),
    Set(Vec<Val<'a>>),
}

/// A value as the slicing knows it: `Exact` (evaluating gives this value),
/// `Maybe` (this boolean, or evaluating fails), or not known.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Known<'a> {
    Exact(Val<'a>),
    Maybe(bool),
    Unknown,
}

impl Known<'_> {
    /// The policy cannot apply.
    pub(super) fn is_false(&self) -> bool {
        matches!(self, Known::Exact(Val::Bool(false)) | Known::Maybe(false))
    }

    /// The policy applies, and nothing in it can fail.
    pub(super) fn is_true(&self) -> bool {
        matches!(self, Known::Exact(Val::Bool(true)))
    }
}

/// A literal, kept to be lent as a [`Val`].
pub(super) enum Lit {
    Bool(bool),
    Long(i64),
    Str(String),
    Entity(String, String),
}

#[derive(Clone, Copy)]
pub(super) enum Order {
    Less,
    LessEq,
    Greater,
    GreaterEq,
}

#[derive(Clone, Copy)]
pub(super) enum Count {
    Calls,
    Writes,
    CallsToTool,
}

/// A part of a condition.
pub(super) enum Term {
    Lit(Lit),
    Action,
    Resource,
    Principal,
    /// `resource.<attribute>`, `resource has <attribute>`
    Attribute(String),
    ResourceHas(String),
    /// `principal.toolkit`
    Toolkit,
    /// `context.execution.<count>`
    Count(Count),
    /// `context.args.<path>`
    Arg(Vec<String>),
    /// `context.args.<path> has <names>`
    ArgHas(Vec<String>, Vec<String>),
    Not(Box<Term>),
    And(Box<Term>, Box<Term>),
    Or(Box<Term>, Box<Term>),
    Eq(Box<Term>, Box<Term>),
    Compare(Order, Box<Term>, Box<Term>),
    Contains(Box<Term>, Box<Term>),
    Like(Box<Term>, Vec<PatternElem>),
    If(Box<Term>, Box<Term>, Box<Term>),
    Set(Vec<Term>),
    /// Not followed here.
    Opaque,
}

/// What a term is evaluated with: a tool, and (per call) the call.
pub(super) struct Env<'a> {
    pub action: &'a str,
    pub path: &'a str,
    pub tool: &'a ToolFacts<'a>,
    pub call: Option<&'a PolicyCall<'a>>,
}

pub(super) fn boxed(term: Term) -> Box<Term> {
    Box::new(term)
}

pub(super) fn entity(uid: &cedar_policy::pst::EntityUID) -> Term {
    Term::Lit(Lit::Entity(uid.ty.to_string(), uid.eid.to_string()))
}

pub(super) fn term(expr: &Expr) -> Term {
    let sub = |expr: &Expr| boxed(term(expr));
    match expr {
        Expr::Literal(Literal::Bool(b)) => Term::Lit(Lit::Bool(*b)),
        Expr::Literal(Literal::Long(n)) => Term::Lit(Lit::Long(*n)),
        Expr::Literal(Literal::String(s)) => Term::Lit(Lit::Str(s.to_string())),
        Expr::Literal(Literal::EntityUID(uid)) => entity(uid),
        Expr::Var(Var::Action) => Term::Action,
        Expr::Var(Var::Resource) => Term::Resource,
        Expr::Var(Var::Principal) => Term::Principal,
        Expr::GetAttr { .. } | Expr::HasAttr { .. } => attribute(expr),
        Expr::UnaryOp { op: UnaryOp::Not, expr } => Term::Not(sub(expr)),
        Expr::BinaryOp { op, left, right } => {
            let order = |order| Term::Compare(order, sub(left), sub(right));
            match op {
                BinaryOp::And => Term::And(sub(left), sub(right)),
                BinaryOp::Or => Term::Or(sub(left), sub(right)),
                BinaryOp::Eq => Term::Eq(sub(left), sub(right)),
                BinaryOp::NotEq => Term::Not(boxed(Term::Eq(sub(left), sub(right)))),
                BinaryOp::Less => order(Order::Less),
                BinaryOp::LessEq => order(Order::LessEq),
                BinaryOp::Greater => order(Order::Greater),
                BinaryOp::GreaterEq => order(Order::GreaterEq),
                BinaryOp::Contains => Term::Contains(sub(left), sub(right)),
                _ => Term::Opaque,
            }
        }
        Expr::Like { expr, pattern } => Term::Like(sub(expr), pattern.clone()),
        Expr::IfThenElse { cond, then_expr, else_expr } => Term::If(sub(cond), sub(then_expr), sub(else_expr)),
        Expr::Set(items) => Term::Set(items.iter().map(|item| term(item)).collect()),
        _ => Term::Opaque,
    }
}

/// `<root>.<names...>`, or `<root>.<names...> has <attrs...>`.
fn attribute(expr: &Expr) -> Term {
    let (mut at, has) = match expr {
        Expr::HasAttr { expr, attrs } => (&**expr, Some(attrs.iter().map(|a| a.to_string()).collect::<Vec<_>>())),
        _ => (expr, None),
    };
    let mut names = Vec::new();
    while let Expr::GetAttr { expr, attr } = at {
        names.insert(0, attr.as_str());
        at = expr;
    }
    let owned = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    match (at, names.as_slice(), has) {
        (Expr::Var(Var::Resource), [name], None) => Term::Attribute((*name).to_owned()),
        (Expr::Var(Var::Resource), [], Some(attrs)) if attrs.len() == 1 => Term::ResourceHas(attrs[0].clone()),
        (Expr::Var(Var::Principal), ["toolkit"], None) => Term::Toolkit,
        (Expr::Var(Var::Context), ["execution", count], None) => match *count {
            "calls" => Term::Count(Count::Calls),
            "writes" => Term::Count(Count::Writes),
            "calls_to_tool" => Term::Count(Count::CallsToTool),
            _ => Term::Opaque,
        },
        (Expr::Var(Var::Context), ["args", path @ ..], None) if !path.is_empty() && path.len() <= DEPTH => {
            Term::Arg(owned(path))
        }
        (Expr::Var(Var::Context), ["args", path @ ..], Some(attrs)) if path.len() + attrs.len() <= DEPTH => {
            Term::ArgHas(owned(path), attrs)
        }
        _ => Term::Opaque,
    }
}

pub(super) fn eval<'a>(term: &'a Term, env: &Env<'a>) -> Known<'a> {
    use Known::{Exact, Unknown};
    let exact = |value: Option<Val<'a>>| value.map_or(Unknown, Exact);
    match term {
        Term::Lit(Lit::Bool(b)) => Exact(Val::Bool(*b)),
        Term::Lit(Lit::Long(n)) => Exact(Val::Long(*n)),
        Term::Lit(Lit::Str(s)) => Exact(Val::Str(Cow::Borrowed(s))),
        Term::Lit(Lit::Entity(ty, id)) => Exact(Val::Entity(ty, id)),
        Term::Action => Exact(Val::Entity(ACTION, env.action)),
        Term::Resource => Exact(Val::Entity(TOOL, env.path)),
        Term::Principal => exact(env.call.map(|call| Val::Entity(OWNER, call.owner.map_or("", |o| o.as_str())))),
        Term::Attribute(name) => exact(attribute_of(env.tool, name)),
        Term::ResourceHas(name) => Exact(Val::Bool(attribute_of(env.tool, name).is_some())),
        Term::Toolkit => exact(env.call.map(|call| Val::Str(Cow::Borrowed(call.toolkit.map_or("", |t| t.as_str()))))),
        Term::Count(count) => exact(env.call.map(|call| Val::Long(i64::from(counted(call, *count))))),
        Term::Arg(path) => env.call.and_then(|call| argument(call.args, path)).map_or(Unknown, json),
        Term::ArgHas(path, names) => env.call.map_or(Unknown, |call| has(call.args, path, names)),
        Term::Not(inner) => match boolean(eval(inner, env)) {
            Exact(Val::Bool(b)) => Exact(Val::Bool(!b)),
            Known::Maybe(b) => Known::Maybe(!b),
            _ => Unknown,
        },
        Term::And(left, right) => junction(false, eval(left, env), || eval(right, env)),
        Term::Or(left, right) => junction(true, eval(left, env), || eval(right, env)),
        Term::Eq(left, right) => match (eval(left, env), eval(right, env)) {
            (Exact(a), Exact(b)) if !matches!(a, Val::Set(_)) && !matches!(b, Val::Set(_)) => Exact(Val::Bool(a == b)),
            _ => Unknown,
        },
        Term::Compare(order, left, right) => match (eval(left, env), eval(right, env)) {
            (Exact(Val::Long(a)), Exact(Val::Long(b))) => Exact(Val::Bool(match order {
                Order::Less => a < b,
                Order::LessEq => a <= b,
                Order::Greater => a > b,
                Order::GreaterEq => a >= b,
            })),
            _ => Unknown,
        },
        Term::Contains(set, item) => match (eval(set, env), eval(item, env)) {
            (Exact(Val::Set(items)), Exact(item))
                if !matches!(item, Val::Set(_)) && !items.iter().any(|i| matches!(i, Val::Set(_))) =>
            {
                Exact(Val::Bool(items.contains(&item)))
            }
            _ => Unknown,
        },
        Term::Like(text, pattern) => match eval(text, env) {
            Exact(Val::Str(text)) => Exact(Val::Bool(like(&text, pattern))),
            _ => Unknown,
        },
        Term::If(cond, then, otherwise) => match eval(cond, env) {
            Exact(Val::Bool(true)) => eval(then, env),
            Exact(Val::Bool(false)) => eval(otherwise, env),
            _ => Unknown,
        },
        Term::Set(items) => {
            let value = |item: &'a Term| match eval(item, env) {
                Exact(value) => Some(value),
                _ => None,
            };
            exact(items.iter().map(value).collect::<Option<Vec<_>>>().map(Val::Set))
        }
        Term::Opaque => Unknown,
    }
}

/// `&&` (`short` false) or `||` (`short` true), which stop at `short`.
fn junction<'a>(short: bool, left: Known<'a>, right: impl FnOnce() -> Known<'a>) -> Known<'a> {
    use Known::{Exact, Maybe, Unknown};
    match boolean(left) {
        Exact(Val::Bool(b)) if b == short => Exact(Val::Bool(b)),
        Maybe(b) if b == short => Maybe(b),
        Exact(Val::Bool(_)) => boolean(right()),
        Maybe(_) => match boolean(right()) {
            Exact(Val::Bool(b)) | Maybe(b) => Maybe(b),
            _ => Unknown,
        },
        // The left side is not known (or fails): a right side that stops
        // says what the whole is, unless the left side fails first.
        _ => match boolean(right()) {
            Exact(Val::Bool(b)) | Maybe(b) if b == short => Maybe(b),
            _ => Unknown,
        },
    }
}

/// A value that is not a boolean where one is wanted fails: not known.
fn boolean(known: Known<'_>) -> Known<'_> {
    match known {
        Known::Exact(Val::Bool(_)) | Known::Maybe(_) => known,
        _ => Known::Unknown,
    }
}

fn attribute_of<'a>(tool: &ToolFacts<'a>, name: &str) -> Option<Val<'a>> {
    let text = |s: &'a str| Some(Val::Str(Cow::Borrowed(s)));
    match name {
        "namespace" => text(tool.namespace),
        "kind" => text(super::kind(tool.kind)),
        "source_kind" => text(tool.source_kind),
        "method" => text(tool.method),
        "path_template" => text(tool.path_template),
        "operation" => text(tool.operation),
        "destructive" => Some(Val::Bool(tool.destructive)),
        _ => None,
    }
}

fn counted(call: &PolicyCall<'_>, count: Count) -> u32 {
    match count {
        Count::Calls => call.before.calls,
        Count::Writes => call.before.writes,
        Count::CallsToTool => call.before.calls_to_tool,
    }
}

/// The argument at `path`; `None` where Cedar finds none (absent, `null`, or under a value that is no record).
fn argument<'a>(args: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut at = args;
    for name in path {
        at = at.as_object()?.get(name).filter(|value| !value.is_null())?;
    }
    Some(at)
}

/// An argument's value as `values.rs` makes it; records (and sets of anything but plain values) are not followed.
fn json(value: &Value) -> Known<'_> {
    fn plain(value: &Value) -> Option<Val<'_>> {
        match value {
            Value::Bool(b) => Some(Val::Bool(*b)),
            Value::Number(n) => Some(n.as_i64().map_or_else(|| Val::Str(Cow::Owned(n.to_string())), Val::Long)),
            Value::String(s) => Some(Val::Str(Cow::Borrowed(s))),
            _ => None,
        }
    }
    match value {
        Value::Array(items) => {
            let items = items.iter().filter(|item| !item.is_null()).map(plain).collect::<Option<Vec<_>>>();
            items.map_or(Known::Unknown, |items| Known::Exact(Val::Set(items)))
        }
        value => plain(value).map_or(Known::Unknown, Known::Exact),
    }
}

/// `context.args.<path> has <names...>` (`has a.b` is `has a && a has b`).
fn has(args: &Value, path: &[String], names: &[String]) -> Known<'static> {
    let record = match (path.is_empty(), args.is_object()) {
        // Arguments that are not an object are an empty record.
        (true, false) => return Known::Exact(Val::Bool(false)),
        (true, true) => args,
        (false, _) => match argument(args, path) {
            Some(record) => record,
            None => return Known::Unknown,
        },
    };
    let mut at = record;
    for name in names {
        let Some(fields) = at.as_object() else { return Known::Unknown };
        match fields.get(name).filter(|value| !value.is_null()) {
            Some(value) => at = value,
            None => return Known::Exact(Val::Bool(false)),
        }
    }
    Known::Exact(Val::Bool(true))
}

/// Cedar's `like`: `*` matches any run of characters (one backtrack point,
/// by byte offsets into `text`, so nothing is allocated).
fn like(text: &str, pattern: &[PatternElem]) -> bool {
    let (mut p, mut t, mut star) = (0, 0, None);
    while let Some(c) = text[t..].chars().next() {
        match pattern.get(p) {
            Some(PatternElem::Wildcard) => {
                star = Some((p, t));
                p += 1;
            }
            Some(PatternElem::Char(want)) if *want == c => {
                p += 1;
                t += c.len_utf8();
            }
            _ => match star {
                Some((sp, st)) => {
                    let next = st + text[st..].chars().next().map_or(1, char::len_utf8);
                    (p, t, star) = (sp + 1, next, Some((sp, next)));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|e| matches!(e, PatternElem::Wildcard))
}
