//! A GraphQL tool's call: what it needs to become a request
//! ([`GraphqlOperation`]), and its arguments made into one document with
//! its variables. Pure: the schema is read in `graphql.rs`, the request sent
//! in `catalog/graphql_upstream.rs`.
//!
//! The document a call makes is parsed (apollo-parser, as the GraphQL
//! specification reads it) and checked before it is sent: one query or
//! mutation, as the tool is, whose root selects the tool's field alone,
//! with the given arguments as variables, its selection set nested at most
//! [`MAX_SELECT_DEPTH`] levels and spreading no fragment. What is sent is
//! that parsed document printed again without comments or ignored
//! characters, so the service reads what was checked. So `select` can never
//! carry another root field or a second operation past the approval policy.

use std::fmt::Write as _;
use std::sync::Arc;

use apollo_parser::cst::{self, CstNode};
use apollo_parser::{Lexer, Parser, SyntaxKind, SyntaxNode, TokenKind};
use serde_json::{Map, Value};

/// The argument holding a caller's own selection set.
pub const SELECT_ARGUMENT: &str = "select";
/// How deeply `select` may nest fields: deep selections are how a single
/// GraphQL request gets expensive.
pub const MAX_SELECT_DEPTH: usize = 8;
/// The parser's bound on nesting (selection sets, list and object values,
/// list types): deeper input is refused without recursing further. Well
/// above what a document within [`MAX_SELECT_DEPTH`] needs.
pub(crate) const MAX_PARSE_NESTING: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    Query,
    Mutation,
}

impl OperationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Query => "query",
            Self::Mutation => "mutation",
        }
    }
}

/// What a call needs to become a GraphQL request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlOperation {
    pub kind: OperationKind,
    pub field: String,
    pub args: Vec<Argument>,
    /// The default selection set (`{ id name }`) when the field returns an
    /// object, interface or union; shared by the fields returning one type.
    pub selection: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    /// As GraphQL writes it, for the variable's declaration: `[ID!]!`.
    pub type_text: String,
    /// Non-null without a default: the call must give it.
    pub required: bool,
}

/// One request: the document and its variables.
#[derive(Debug, PartialEq)]
pub struct GraphqlRequest {
    pub query: String,
    pub variables: Map<String, Value>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgumentError {
    #[error("arguments must be an object; this tool takes: {0}")]
    NotAnObject(String),
    #[error("missing required argument `{name}`; this tool takes: {takes}")]
    Missing { name: String, takes: String },
    #[error("unknown argument `{name}`; this tool takes: {takes}")]
    Unknown { name: String, takes: String },
    #[error("`select` {0}; pass a selection set such as `{{ id name }}`")]
    Select(String),
}

impl GraphqlOperation {
    fn takes(&self) -> String {
        let mut names: Vec<String> =
            self.args.iter().map(|a| format!("{}{}", a.name, if a.required { "" } else { "?" })).collect();
        if self.selection.is_some() {
            names.push(format!("{SELECT_ARGUMENT}?"));
        }
        match names.is_empty() {
            true => "no arguments".into(),
            false => names.join(", "),
        }
    }

    /// The document and variables for `args`. Arguments left out are left
    /// out of the document too, so the service's defaults apply.
    pub fn request(&self, args: &Value) -> Result<GraphqlRequest, ArgumentError> {
        let empty = Map::new();
        let given = match args {
            Value::Object(map) => map,
            Value::Null => &empty,
            _ => return Err(ArgumentError::NotAnObject(self.takes())),
        };
        let known = |name: &str| {
            self.args.iter().any(|a| a.name == name) || (name == SELECT_ARGUMENT && self.selection.is_some())
        };
        if let Some(name) = given.keys().find(|k| !known(k)) {
            return Err(ArgumentError::Unknown { name: name.clone(), takes: self.takes() });
        }
        let mut declarations = Vec::new();
        let mut passed = Vec::new();
        let mut variables = Map::new();
        for arg in &self.args {
            match given.get(&arg.name) {
                // An explicit null is a value GraphQL distinguishes from absence; a required one stays missing.
                Some(Value::Null) | None if arg.required => {
                    return Err(ArgumentError::Missing { name: arg.name.clone(), takes: self.takes() });
                }
                None => {}
                Some(value) => {
                    declarations.push(format!("${}: {}", arg.name, arg.type_text));
                    passed.push(arg.name.as_str());
                    variables.insert(arg.name.clone(), value.clone());
                }
            }
        }
        let selection = match (given.get(SELECT_ARGUMENT), &self.selection) {
            (Some(Value::String(text)), Some(_)) => braced(text).map_err(ArgumentError::Select)?,
            (Some(_), Some(_)) => return Err(ArgumentError::Select("must be a string".into())),
            (None, Some(default)) => default.to_string(),
            (_, None) => String::new(),
        };
        let mut query = String::from(self.kind.as_str());
        if !declarations.is_empty() {
            let _ = write!(query, "({})", declarations.join(", "));
        }
        let _ = write!(query, " {{ {}", self.field);
        if !passed.is_empty() {
            let arguments: Vec<String> = passed.iter().map(|name| format!("{name}: ${name}")).collect();
            let _ = write!(query, "({})", arguments.join(", "));
        }
        // Line breaks around the selection: a comment inside it ends at its line.
        let _ = write!(query, "\n{selection}\n}}");
        // Everything but `select` is the schema's names, checked when it was loaded.
        let query = self.checked(&query, &passed).map_err(ArgumentError::Select)?;
        Ok(GraphqlRequest { query, variables })
    }

    /// `document` parsed and checked to be this tool's operation: one query
    /// or mutation, as the tool is, without directives, whose root selects
    /// only its field (unaliased, without directives, exactly the `passed`
    /// arguments as variables) with a selection set at most
    /// [`MAX_SELECT_DEPTH`] deep that spreads no fragment. An alias or a
    /// directive at the root is refused rather than reasoned about: the
    /// documents made here have none, and the answer is read at the field's
    /// name. Returned printed again, as it is sent.
    pub(crate) fn checked(&self, document: &str, passed: &[&str]) -> Result<String, String> {
        let tree = Parser::new(document).recursion_limit(MAX_PARSE_NESTING).parse();
        if let Some(error) = tree.errors().next() {
            // The text at fault, shortened: it may be a long string.
            let at: String = error.data().chars().take(40).collect();
            return Err(match error.is_limit() {
                true => format!("nests deeper than {MAX_SELECT_DEPTH} levels"),
                false => format!("is not one GraphQL selection set: {} at `{at}`", error.message()),
            });
        }
        let document = tree.document();
        let field = &self.field;
        let definitions: Vec<cst::Definition> = document.definitions().collect();
        let [cst::Definition::OperationDefinition(operation)] = definitions.as_slice() else {
            let found: Vec<String> = definitions.iter().map(definition).collect();
            return Err(format!(
                "must be one selection set of `{field}`, but the document would hold {}: \
                 nothing may follow the selection's closing brace",
                found.join(", ")
            ));
        };
        let kind = match operation.operation_type() {
            // `{ ... }` alone is a query.
            None => Some(OperationKind::Query),
            Some(t) if t.query_token().is_some() => Some(OperationKind::Query),
            Some(t) if t.mutation_token().is_some() => Some(OperationKind::Mutation),
            Some(_) => None,
        };
        if kind != Some(self.kind) {
            return Err(format!(
                "must be one selection set of `{field}`, but the document would be a {} rather than a {}",
                definition(&definitions[0]),
                self.kind.as_str()
            ));
        }
        if has_directives(operation.directives()) {
            return Err(format!("must be one selection set of `{field}`, but the operation would carry a directive"));
        }
        let roots: Vec<cst::Selection> = operation.selection_set().iter().flat_map(|s| s.selections()).collect();
        let root = match roots.as_slice() {
            [cst::Selection::Field(root)]
                if root.alias().is_none() && !has_directives(root.directives()) && name(root.name()) == *field =>
            {
                root
            }
            _ => {
                let found: Vec<String> = roots.iter().map(|s| format!("`{}`", selection(s))).collect();
                return Err(format!(
                    "must be one selection set of `{field}`, but the operation would select {} at its root: \
                     the selection closes early",
                    found.join(", ")
                ));
            }
        };
        let arguments: Vec<(String, Option<String>)> = (root.arguments().iter().flat_map(|a| a.arguments()))
            .map(|a| match a.value() {
                Some(cst::Value::Variable(variable)) => (name(a.name()), Some(name(variable.name()))),
                _ => (name(a.name()), None),
            })
            .collect();
        let expected: Vec<(String, Option<String>)> =
            passed.iter().map(|p| ((*p).to_owned(), Some((*p).to_owned()))).collect();
        if arguments != expected {
            return Err(format!("must not change the arguments of `{field}`"));
        }
        if let Some(set) = root.selection_set()
            && depth(&set)? > MAX_SELECT_DEPTH
        {
            return Err(format!("nests deeper than {MAX_SELECT_DEPTH} levels"));
        }
        Ok(print(document.syntax()))
    }
}

/// `text` as a selection set: braces added when it does not open with one
/// (after what GraphQL ignores: white space, a BOM, comments, commas).
fn braced(text: &str) -> Result<String, String> {
    let first = Lexer::new(text)
        .map_while(Result::ok)
        .map(|token| token.kind())
        .find(|kind| !matches!(kind, TokenKind::Whitespace | TokenKind::Comment | TokenKind::Comma));
    match first {
        Some(TokenKind::LCurly) => Ok(text.to_owned()),
        Some(TokenKind::Eof) => Err("is empty".into()),
        // Line breaks: a comment at its end ends before the added brace.
        _ => Ok(format!("{{\n{text}\n}}")),
    }
}

/// How many levels of selection sets `set` nests (itself one); a fragment
/// spread is refused, since no fragment can be defined. The parser's bound
/// on nesting bounds this recursion.
fn depth(set: &cst::SelectionSet) -> Result<usize, String> {
    let mut deepest = 0;
    for selection in set.selections() {
        let inner = match selection {
            cst::Selection::Field(field) => field.selection_set(),
            cst::Selection::InlineFragment(fragment) => fragment.selection_set(),
            cst::Selection::FragmentSpread(spread) => {
                let fragment = name(spread.fragment_name().and_then(|f| f.name()));
                return Err(format!(
                    "spreads the fragment `{fragment}`, but no fragment can be defined: \
                     write an inline fragment (`... on Type {{ field }}`) instead"
                ));
            }
        };
        if let Some(inner) = inner {
            deepest = deepest.max(depth(&inner)?);
        }
    }
    Ok(deepest + 1)
}

fn has_directives(directives: Option<cst::Directives>) -> bool {
    directives.is_some_and(|d| d.directives().next().is_some())
}

fn name(name: Option<cst::Name>) -> String {
    name.map(|n| n.text().to_string()).unwrap_or_default()
}

/// A definition as an error names it: `mutation`, `fragment F`.
fn definition(definition: &cst::Definition) -> String {
    match definition {
        cst::Definition::OperationDefinition(operation) => {
            let kind = operation.operation_type().and_then(|t| t.syntax().first_token());
            let kind = kind.map_or("query".to_owned(), |t| t.text().to_owned());
            match operation.name() {
                Some(named) => format!("{kind} {}", name(Some(named))),
                None => kind,
            }
        }
        cst::Definition::FragmentDefinition(fragment) => {
            format!("fragment {}", name(fragment.fragment_name().and_then(|f| f.name())))
        }
        _ => "a type system definition".into(),
    }
}

/// A root selection as an error names it: `deleteAll`, `again: createItem`, `...F`, `... on Mutation`.
fn selection(selection: &cst::Selection) -> String {
    match selection {
        cst::Selection::Field(field) => {
            let alias = field.alias().map(|a| format!("{}: ", name(a.name()))).unwrap_or_default();
            let directives: String = (field.directives().iter().flat_map(|d| d.directives()))
                .map(|d| format!(" @{}", name(d.name())))
                .collect();
            format!("{alias}{}{directives}", name(field.name()))
        }
        cst::Selection::FragmentSpread(spread) => format!("...{}", name(spread.fragment_name().and_then(|f| f.name()))),
        cst::Selection::InlineFragment(fragment) => match fragment.type_condition().and_then(|t| t.named_type()) {
            Some(on) => format!("... on {}", name(on.name())),
            None => "...".into(),
        },
    }
}

/// The parsed document as it is sent: its tokens one space apart (none
/// where GraphQL writes none), without comments, white space or a BOM, and
/// every string as a JSON string (which is a GraphQL string), so block
/// strings and `\u{...}` escapes reach the service as plain strings.
fn print(document: &SyntaxNode) -> String {
    let mut out = String::with_capacity(document.text().len().into());
    let mut glued = true;
    for token in document.descendants_with_tokens().filter_map(|e| e.into_token()) {
        let kind = token.kind();
        if matches!(kind, SyntaxKind::WHITESPACE | SyntaxKind::COMMENT) {
            continue;
        }
        let tight = matches!(
            kind,
            SyntaxKind::L_PAREN
                | SyntaxKind::R_PAREN
                | SyntaxKind::R_BRACK
                | SyntaxKind::COLON
                | SyntaxKind::BANG
                | SyntaxKind::COMMA
        );
        if !glued && !tight {
            out.push(' ');
        }
        match token.parent().and_then(cst::StringValue::cast) {
            Some(string) if kind == SyntaxKind::STRING => {
                out.push_str(&Value::String(String::from(&string)).to_string())
            }
            _ => out.push_str(token.text()),
        }
        glued = matches!(kind, SyntaxKind::DOLLAR | SyntaxKind::AT | SyntaxKind::L_PAREN | SyntaxKind::L_BRACK);
    }
    out
}
