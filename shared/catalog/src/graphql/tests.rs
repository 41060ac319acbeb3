use super::*;
use crate::tool::graphql::{ArgumentError, MAX_PARSE_NESTING, MAX_SELECT_DEPTH};
use apollo_parser::cst::CstNode;

fn type_ref(text: &str) -> Value {
    if let Some(inner) = text.strip_suffix('!') {
        return json!({"kind": "NON_NULL", "name": null, "ofType": type_ref(inner)});
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return json!({"kind": "LIST", "name": null, "ofType": type_ref(inner)});
    }
    let kind = match text {
        "Int" | "String" | "ID" | "Boolean" | "Float" | "DateTime" => "SCALAR",
        "State" => "ENUM",
        "IssueInput" => "INPUT_OBJECT",
        "Node" => "INTERFACE",
        "Result" => "UNION",
        _ => "OBJECT",
    };
    json!({"kind": kind, "name": text, "ofType": null})
}

fn field(name: &str, ty: &str, args: &[(&str, &str)]) -> Value {
    let args: Vec<Value> = args.iter().map(|(n, t)| json!({"name": n, "type": type_ref(t)})).collect();
    json!({"name": name, "args": args, "type": type_ref(ty)})
}

fn schema() -> String {
    json!({"data": {"__schema": {
            "queryType": {"name": "Query"}, "mutationType": {"name": "Mutation"},
            "types": [
                {"kind": "OBJECT", "name": "Query", "fields": [
                    field("issue", "Issue", &[("id", "ID!")]),
                    field("issues", "[Issue!]!", &[("state", "State"), ("first", "Int")]),
                    field("count", "Int!", &[]),
                    field("search", "[Result]", &[("q", "String!")]),
                    field("__type", "String", &[]),
                ]},
                {"kind": "OBJECT", "name": "Mutation", "fields": [field("createIssue", "Issue!", &[("input", "IssueInput!")])]},
                {"kind": "OBJECT", "name": "Issue", "description": "An issue", "fields": [
                    field("id", "ID!", &[]), field("title", "String", &[]), field("state", "State!", &[]),
                    field("author", "User", &[]), field("comments", "[String]", &[("first", "Int!")]),
                    field("createdAt", "DateTime", &[]),
                ]},
                {"kind": "OBJECT", "name": "User", "fields": [field("login", "String!", &[])]},
                {"kind": "UNION", "name": "Result"},
                {"kind": "ENUM", "name": "State", "enumValues": [{"name": "OPEN"}, {"name": "CLOSED"}]},
                {"kind": "SCALAR", "name": "DateTime"},
                {"kind": "INPUT_OBJECT", "name": "IssueInput", "inputFields": [
                    {"name": "title", "type": type_ref("String!")}, {"name": "body", "type": type_ref("String")},
                ]},
            ]
        }}})
        .to_string()
}

fn operation(tools: &[ToolDef], path: &str) -> Arc<GraphqlOperation> {
    match &tools.iter().find(|t| t.path == path).unwrap().target {
        Target::Graphql(op) => op.clone(),
        _ => unreachable!(),
    }
}

#[test]
fn fields_become_tools_with_default_selections() {
    let tools = load("gh", &schema()).unwrap();
    let paths: Vec<(&str, Effect)> = tools.iter().map(|t| (t.path.as_str(), t.effect)).collect();
    assert_eq!(
        paths,
        [
            ("gh.query.count", Effect::Read),
            ("gh.query.issue", Effect::Read),
            ("gh.query.issues", Effect::Read),
            ("gh.query.search", Effect::Read),
            ("gh.mutation.createIssue", Effect::Write),
        ]
    );
    let issue = operation(&tools, "gh.query.issue");
    // Scalars and enums without required arguments; objects and `comments(first: Int!)` are left out.
    assert_eq!(issue.selection.as_deref(), Some("{ id title state createdAt }"));
    assert_eq!(operation(&tools, "gh.query.issues").selection, issue.selection, "shared per type");
    assert_eq!(operation(&tools, "gh.query.search").selection.as_deref(), Some("{ __typename }"));
    assert_eq!(operation(&tools, "gh.query.count").selection, None);
    assert_eq!(tools.iter().find(|t| t.path == "gh.query.issue").unwrap().description, "GraphQL query issue: Issue");
}

#[test]
fn typescript_declares_arguments_and_the_default_selection() {
    let tools = load("gh", &schema()).unwrap();
    let ts = tools.iter().find(|t| t.path == "gh.mutation.createIssue").unwrap().typescript().unwrap();
    assert!(ts.contains("type Input = { input: IssueInput; /** The GraphQL selection set"), "{ts}");
    assert!(ts.contains("type Output = Issue;"), "{ts}");
    // Fields in the schema's order.
    assert!(ts.contains("type IssueInput = { title: string; body?: string };"), "{ts}");
    assert!(ts.contains(r#"state: State"#) && ts.contains(r#"type State = "OPEN" | "CLOSED";"#), "{ts}");
    let issue = ts.lines().find(|l| l.starts_with("type Issue =")).unwrap();
    assert_eq!(issue, "type Issue = { id: string; title: string | null; state: State; createdAt: unknown };");
    let count = tools.iter().find(|t| t.path == "gh.query.count").unwrap().typescript().unwrap();
    assert!(count.contains("type Output = number;") && !count.contains("select"), "{count}");
    // No arguments and no selection: it takes nothing, and says so.
    assert!(count.contains("type Input = {};"), "{count}");
}

#[test]
fn a_summary_is_the_first_sentence_of_the_field_description() {
    let mut introspection: Value = serde_json::from_str(&schema()).unwrap();
    let fields = &mut introspection["data"]["__schema"]["types"][0]["fields"];
    fields[0]["description"] = json!("Look up an issue by its ID. Fails when it is gone.");
    fields[1]["description"] = json!("Issues, newest first\nPaginated.");
    let tools = load("gh", &introspection.to_string()).unwrap();
    let tool = |path: &str| tools.iter().find(|t| t.path == path).unwrap();
    let cases = [
        ("gh.query.issue", "Look up an issue by its ID."),
        ("gh.query.issues", "Issues, newest first"),
        // Without a description, the signature says what it is.
        ("gh.query.count", "GraphQL query count: Int!"),
    ];
    for (path, expected) in cases {
        assert_eq!(tool(path).summary, expected, "{path}");
    }
    assert_eq!(
        tool("gh.query.issue").description,
        "Look up an issue by its ID. Fails when it is gone.\nGraphQL query issue: Issue"
    );
}

#[test]
fn requests_declare_only_the_given_arguments() {
    let tools = load("gh", &schema()).unwrap();
    let issues = operation(&tools, "gh.query.issues");
    let request = issues.request(&json!({"state": "OPEN"})).unwrap();
    assert_eq!(request.query, "query($state: State) { issues(state: $state) { id title state createdAt } }");
    assert_eq!(Value::Object(request.variables), json!({"state": "OPEN"}));
    let custom = issues.request(&json!({"select": "id author { login }"})).unwrap();
    assert_eq!(custom.query, "query { issues { id author { login } } }");
    let create = operation(&tools, "gh.mutation.createIssue");
    let request = create.request(&json!({"input": {"title": "t"}})).unwrap();
    assert!(request.query.starts_with("mutation($input: IssueInput!) { createIssue(input: $input) {"));
    assert_eq!(operation(&tools, "gh.query.count").request(&Value::Null).unwrap().query, "query { count }");
}

#[test]
fn bad_arguments_are_refused_before_sending() {
    let tools = load("gh", &schema()).unwrap();
    let issue = operation(&tools, "gh.query.issue");
    let takes = "id, select?".to_owned();
    assert_eq!(issue.request(&json!({})), Err(ArgumentError::Missing { name: "id".into(), takes: takes.clone() }));
    assert_eq!(
        issue.request(&json!({"id": null})),
        Err(ArgumentError::Missing { name: "id".into(), takes: takes.clone() })
    );
    assert_eq!(issue.request(&json!({"id": "1", "x": 1})), Err(ArgumentError::Unknown { name: "x".into(), takes }));
    assert!(matches!(issue.request(&json!([1])), Err(ArgumentError::NotAnObject(_))));
    let count = operation(&tools, "gh.query.count");
    assert!(matches!(count.request(&json!({"select": "{ a }"})), Err(ArgumentError::Unknown { .. })));
}

fn nested(levels: usize) -> String {
    format!("{}x{}", "{ a ".repeat(levels), " }".repeat(levels))
}

#[test]
fn selects_that_leave_their_field_are_refused() {
    let tools = load("gh", &schema()).unwrap();
    let create = operation(&tools, "gh.mutation.createIssue");
    let deep = nested(MAX_SELECT_DEPTH + 1);
    let deeper = nested(MAX_PARSE_NESTING + 1);
    let refused = [
        // A comment ends at `\r` as at `\n`, so the selection closes and the rest is the operation's.
        (
            "{ id #\r } deleteAll again: createIssue(input: {title: \"y\"}) { id #\n }",
            "would select `createIssue`, `deleteAll`, `again: createIssue` at its root",
        ),
        ("{ id #\r\n } deleteAll { id }", "would select `createIssue`, `deleteAll` at its root"),
        ("id #\r } deleteAll { id #\n", "would select `createIssue`, `deleteAll` at its root"),
        // A BOM is ignored like white space: the select opens with its brace.
        ("\u{feff}{ id } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
        ("{ id }\u{feff} deleteAll", "would select `createIssue`, `deleteAll` at its root"),
        // Escapes mean something in strings only.
        ("{ id(q: \"\\u007d\") } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
        ("{ id \\u007d deleteAll { id }", "is not one GraphQL selection set"),
        // A block string ends at `"""`, not at `\"""`.
        ("{ a(q: \"\"\" \\\"\"\" } \"\"\") } deleteAll", "would select `createIssue`, `deleteAll` at its root"),
        ("{ a(q: \"\"\" } \"\"\") } } mutation X { deleteAll ", "would hold mutation, mutation X"),
        ("{ id } again: createIssue(input: {title: \"y\"}) { id }", "`createIssue`, `again: createIssue` at"),
        ("{ id } ...F } fragment F on Mutation { deleteAll ", "would hold mutation, fragment F"),
        ("{ ...F } } fragment F on Issue { id ", "would hold mutation, fragment F"),
        ("{ id ...F }", "spreads the fragment `F`, but no fragment can be defined"),
        ("{ id } ... on Mutation { deleteAll }", "would select `createIssue`, `... on Mutation` at its root"),
        ("{ id } ... { deleteAll }", "would select `createIssue`, `...` at its root"),
        ("{ id } deleteAll @include(if: true)", "would select `createIssue`, `deleteAll @include` at"),
        ("{ id } } mutation X { deleteAll { id } ", "would hold mutation, mutation X"),
        ("{ id } } subscription { issues { id } ", "would hold mutation, subscription"),
        ("{ a { b } } } { deleteAll ", "would hold mutation, query"),
        ("{ id } } }", "is not one GraphQL selection set"),
        ("id } deleteAll { id", "would select `createIssue`, `deleteAll` at its root"),
        ("{ a(q: \"x) }", "is not one GraphQL selection set"),
        ("{ }", "is not one GraphQL selection set"),
        ("", "is empty"),
        (" # only a comment", "is empty"),
        (&deep, "nests deeper than 8 levels"),
        (&deeper, "nests deeper than 8 levels"),
    ];
    for (select, expected) in refused {
        let refused = create.request(&json!({"input": {"title": "t"}, "select": select}));
        let Err(ArgumentError::Select(message)) = refused else { panic!("{select:?}: {refused:?}") };
        assert!(message.contains(expected), "{select:?}: {message}");
    }
    let not_text = create.request(&json!({"input": {"title": "t"}, "select": ["id"]}));
    assert_eq!(not_text, Err(ArgumentError::Select("must be a string".into())));
    let issue = operation(&tools, "gh.query.issue");
    let read = issue.request(&json!({"id": "1", "select": "{ id #\r } secret"})).unwrap_err();
    assert_eq!(
        read.to_string(),
        "`select` must be one selection set of `issue`, but the operation would select `issue`, `secret` at \
             its root: the selection closes early; pass a selection set such as `{ id name }`"
    );
}

#[test]
fn valid_selects_are_sent_as_parsed() {
    let tools = load("gh", &schema()).unwrap();
    let issue = operation(&tools, "gh.query.issue");
    let sent = |select: &str| issue.request(&json!({"id": "1", "select": select})).map(|r| r.query);
    let cases = [
        ("id title", "{ id title }"),
        ("\u{feff}id, title", "{ id, title }"),
        ("# why\n{ id # the id\r title }", "{ id title }"),
        ("{ a(q: \"} # {\") { b } me: title }", "{ a(q: \"} # {\") { b } me: title }"),
        ("{ a(q: \"\"\" } # \\\"\"\" \"\"\") }", "{ a(q: \" } # \\\"\\\"\\\" \") }"),
        ("{ a(q: \"\\u007d } deleteAll {\", r: \"\\u{1F600}\") }", "{ a(q: \"} } deleteAll {\", r: \"😀\") }"),
        ("{ a(n: [1, -2.5e3], o: {k: null}) }", "{ a(n: [1, -2.5e3], o: { k: null }) }"),
        (
            "{ id ... on Issue { title } author @include(if: true) { login } }",
            "{ id ... on Issue { title } author @include(if: true) { login } }",
        ),
    ];
    for (select, expected) in cases {
        assert_eq!(sent(select).unwrap(), format!("query($id: ID!) {{ issue(id: $id) {expected} }}"), "{select:?}");
    }
    let deepest = nested(MAX_SELECT_DEPTH);
    assert_eq!(sent(&deepest).unwrap(), format!("query($id: ID!) {{ issue(id: $id) {deepest} }}"));
}

#[test]
fn documents_are_refused_unless_they_are_the_tools_operation() {
    let tools = load("gh", &schema()).unwrap();
    let create = operation(&tools, "gh.mutation.createIssue");
    let cases = [
        ("subscription($input: IssueInput!) { createIssue(input: $input) { id } }", "a subscription rather"),
        ("query($input: IssueInput!) { createIssue(input: $input) { id } }", "a query rather than a mutation"),
        ("{ createIssue(input: $input) { id } }", "a query rather than a mutation"),
        ("mutation($input: IssueInput!) @x { createIssue(input: $input) { id } }", "would carry a directive"),
        ("mutation($input: IssueInput!) { a: createIssue(input: $input) { id } }", "select `a: createIssue` at"),
        ("mutation($i: IssueInput!) { createIssue(input: $i) @skip(if: true) { id } }", "`createIssue @skip` at"),
        ("mutation($input: IssueInput!) { createIssues(input: $input) { id } }", "`createIssues` at"),
        ("mutation { createIssue(input: {title: \"x\"}) { id } }", "must not change the arguments"),
        ("mutation($input: IssueInput!) { createIssue(input: $input, b: $input) { id } }", "must not change"),
        ("mutation($other: IssueInput!) { createIssue(input: $other) { id } }", "must not change"),
        ("fragment F on Mutation { deleteAll }", "would hold fragment F"),
        ("type Mutation { deleteAll: Int }", "would hold a type system definition"),
    ];
    for (document, expected) in cases {
        let error = create.checked(document, &["input"]).unwrap_err();
        assert!(error.contains(expected), "{document:?}: {error}");
    }
    let plain = "mutation($input: IssueInput!) { createIssue(input: $input) { id } }";
    assert_eq!(create.checked(plain, &["input"]).unwrap(), plain);
}

#[test]
fn names_the_schema_puts_in_documents_must_be_graphql() {
    let with = |query_fields: Value, issue_fields: Value| {
        json!({"__schema": {"queryType": {"name": "Query"}, "types": [
            {"kind": "OBJECT", "name": "Query", "fields": query_fields},
            {"kind": "OBJECT", "name": "Issue", "fields": issue_fields},
            {"kind": "INPUT_OBJECT", "name": "IssueInput", "inputFields": []},
        ]}})
        .to_string()
    };
    let id = json!([field("id", "ID!", &[])]);
    let non_null_twice = json!({"kind": "NON_NULL", "name": null, "ofType": type_ref("ID!")});
    let cases = [
        (json!([field("issue { id } secret", "Issue", &[])]), &id, "a field of `Query` named `issue { id } secret`"),
        (json!([field("issue", "Issue", &[("id: ID) { id } x(y", "ID")])]), &id, "an argument of `Query.issue`"),
        (
            json!([{"name": "issue", "type": type_ref("Issue"), "args": [{"name": "id", "type": non_null_twice}]}]),
            &id,
            "the argument `Query.issue(id)` of type `ID!!`",
        ),
        (json!([field("issue", "Issue", &[])]), &json!([field("9lives", "Int", &[])]), "a field of `Issue` named"),
    ];
    for (query_fields, issue_fields, expected) in cases {
        let error = load("gh", &with(query_fields, issue_fields.clone())).unwrap_err();
        assert!(matches!(error, SchemaError::NotGraphql { .. }), "{error}");
        assert!(error.to_string().contains(expected), "{error}");
        assert!(error.to_string().ends_with("fix the schema"), "{error}");
    }
    let fine = with(json!([field("issue", "Issue", &[("ids", "[ID!]!"), ("input", "IssueInput")])]), id);
    assert_eq!(load("gh", &fine).unwrap().len(), 1);
}

#[test]
fn broken_schemas_say_what_is_wrong() {
    assert!(matches!(load("gh", "<html>"), Err(SchemaError::Syntax(_))));
    assert!(matches!(load("gh", r#"{"data": null}"#), Err(SchemaError::Syntax(_))));
    let errors = load("gh", r#"{"errors": [{"message": "introspection is disabled"}]}"#).unwrap_err();
    assert_eq!(errors.to_string(), "the introspection answered with errors: introspection is disabled");
    let no_query = load("gh", r#"{"__schema": {"queryType": {"name": "Q"}, "types": []}}"#).unwrap_err();
    assert!(matches!(no_query, SchemaError::NoQueryType(_)));
}

/// The pieces hostile selects are made of: braces, strings and block strings,
/// escapes, comments and line ends, fragments, operations and directives.
const SELECT_PIECES: &[&str] = &[
    "{",
    "}",
    "{ ",
    " }",
    "id",
    "title",
    " ",
    "\n",
    "\r",
    "#",
    "\"",
    "\"\"\"",
    "\\",
    "\\\"",
    "\\u007d",
    "deleteAll",
    "...",
    " on ",
    "Mutation",
    "Issue",
    "F",
    "fragment ",
    "mutation ",
    "query ",
    "subscription ",
    "(",
    ")",
    ": ",
    "q",
    "$id",
    "@include(if: true)",
    ",",
    "\u{feff}",
    "a",
    "[",
    "]",
    "1",
    "-2.5e3",
    "null",
    "me: ",
    "(q: \"",
];

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(4000))]

    /// Whatever `select` holds, the document sent, parsed anew as the service
    /// would, is one query that selects `issue(id: $id)` and nothing else at
    /// its root, with no fragment; or the select is refused.
    #[test]
    fn a_select_never_adds_to_the_operation(
        pieces in proptest::collection::vec(proptest::sample::select(SELECT_PIECES), 1..14),
        braced in proptest::bool::ANY,
    ) {
        // Braced, most selects are whole, so the checks after sending are reached.
        let select = if braced { format!("{{ id {} }}", pieces.concat()) } else { pieces.concat() };
        let tools = load("gh", &schema()).unwrap();
        let issue = operation(&tools, "gh.query.issue");
        let Ok(request) = issue.request(&json!({"id": "1", "select": select})) else { return Ok(()) };
        let document = apollo_parser::Parser::new(&request.query).parse();
        proptest::prop_assert_eq!(document.errors().len(), 0, "{:?} sent as {}", select, request.query);
        let definitions: Vec<_> = document.document().definitions().collect();
        proptest::prop_assert_eq!(definitions.len(), 1, "{:?} sent as {}", select, request.query);
        let apollo_parser::cst::Definition::OperationDefinition(operation) = &definitions[0] else {
            return Err(proptest::test_runner::TestCaseError::fail(format!("{select:?} sent as {}", request.query)));
        };
        let kind = operation.operation_type().map(|t| t.syntax().text().to_string());
        proptest::prop_assert_eq!(kind.as_deref(), Some("query"), "{}", request.query);
        let roots: Vec<_> = operation.selection_set().into_iter().flat_map(|set| set.selections()).collect();
        proptest::prop_assert_eq!(roots.len(), 1, "{:?} sent as {}", select, request.query);
        let apollo_parser::cst::Selection::Field(root) = &roots[0] else {
            return Err(proptest::test_runner::TestCaseError::fail(format!("{select:?} sent as {}", request.query)));
        };
        proptest::prop_assert!(root.alias().is_none() && root.directives().is_none(), "{}", request.query);
        let name = root.name().map(|n| n.text().to_string());
        proptest::prop_assert_eq!(name.as_deref(), Some("issue"));
        let arguments: Vec<String> = root
            .arguments()
            .into_iter()
            .flat_map(|a| a.arguments())
            .map(|a| a.syntax().text().to_string().split_whitespace().collect::<String>())
            .collect();
        proptest::prop_assert_eq!(arguments, vec!["id:$id".to_owned()], "{}", request.query);
    }
}
