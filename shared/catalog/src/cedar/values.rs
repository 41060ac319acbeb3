//! A call's arguments as the Cedar value `context.args`, built value by value
//! (never through Cedar's JSON form, where an argument shaped like
//! `{"__entity": ...}` would become an entity reference a policy could mistake
//! for a principal).
//!
//! JSON has what Cedar lacks, so: `null` is left out (an absent attribute, as
//! `has` sees it); a number that is not a 64-bit integer is its JSON text, a
//! string; values nested deeper than [`MAX_DEPTH`] are their JSON text too.

use cedar_policy::RestrictedExpression;
use serde_json::Value;

/// Deeper than any argument a policy reasonably looks at; bounds the work a
/// hostile argument can cause.
pub(super) const MAX_DEPTH: usize = 16;

/// `args` as a record (arguments that are not an object: an empty record).
pub(super) fn args(args: &Value) -> RestrictedExpression {
    match args {
        Value::Object(_) => value(args, 0).unwrap_or_else(empty),
        _ => empty(),
    }
}

fn empty() -> RestrictedExpression {
    RestrictedExpression::new_record([]).expect("an empty record has no duplicate keys")
}

/// `None` for `null`.
fn value(value: &Value, depth: usize) -> Option<RestrictedExpression> {
    if depth > MAX_DEPTH && (value.is_object() || value.is_array()) {
        return Some(RestrictedExpression::new_string(value.to_string()));
    }
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(long) => RestrictedExpression::new_long(long),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(text) => RestrictedExpression::new_string(text.clone()),
        Value::Array(items) => {
            RestrictedExpression::new_set(items.iter().filter_map(|item| self::value(item, depth + 1)))
        }
        Value::Object(fields) => {
            let fields = fields.iter().filter_map(|(key, field)| Some((key.clone(), self::value(field, depth + 1)?)));
            // JSON object keys are unique once parsed.
            RestrictedExpression::new_record(fields).expect("JSON object keys are distinct")
        }
    })
}
