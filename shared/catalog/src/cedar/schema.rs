//! The schema Cedar policies are validated against, and that `executor policy
//! schema` prints: the principal, the tool's attributes, the execution's
//! counts. `context.args` differs per tool, so it is an open record: in the
//! printed (Cedar syntax) schema it reads `{}`, and the validator is told it
//! may hold any attribute (see `validate.rs` for what is and is not checked).

use cedar_policy::{Schema, SchemaFragment};
use serde_json::Value;

/// The schema's declarations, `args` closed (`{}`). A file of its own: the
/// CDK stack validates the policies it ships against the same file at synth.
pub const DECLARATIONS: &str = include_str!("executor.cedarschema");

/// The schema as `executor policy schema` prints it, with the catalog's
/// namespaces (name, source kind, tool count) named in its header.
pub fn schema_text(namespaces: &[(String, &str, usize)]) -> String {
    let mut text = String::from("// The schema of this executor's Cedar policies, made from its catalog:\n");
    for (namespace, kind, tools) in namespaces {
        text.push_str(&format!("//   {namespace}: {kind}, {tools} tools\n"));
    }
    text.push_str(
        "// Requests: `call` (not permitted: blocked) and `call_unattended` (permitted: runs; otherwise asks).\n",
    );
    text.push_str(DECLARATIONS);
    text
}

/// The schema with `args` closed, for the checks that open records would weaken.
pub(super) fn closed() -> Schema {
    let (schema, _) = Schema::from_cedarschema_str(DECLARATIONS).expect("the schema's declarations parse");
    schema
}

/// The schema with `args` open: any attribute may be there, of any type.
pub(super) fn open() -> Schema {
    let (fragment, _) = SchemaFragment::from_cedarschema_str(DECLARATIONS).expect("the schema's declarations parse");
    let mut json = fragment.to_json_value().expect("the declarations have a JSON form");
    for action in json["Executor"]["actions"].as_object_mut().into_iter().flat_map(|a| a.values_mut()) {
        if let Some(args) = action.pointer_mut("/appliesTo/context/attributes/args") {
            args["additionalAttributes"] = Value::Bool(true);
        }
    }
    Schema::from_json_value(json).expect("the open schema is the closed one with `args` open")
}
