//! The walk against QuickJS's own `JSON.stringify`, on generated values: the
//! same text whenever the walk answers, and an answer for all plain data.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use rquickjs::Runtime;

use super::{Plain, object_class, text};

/// A JavaScript string literal of these UTF-16 code units, lone surrogates included.
fn literal(units: &[u16]) -> String {
    let escaped: String = units.iter().map(|unit| format!("\\u{unit:04x}")).collect();
    format!("\"{escaped}\"")
}

fn string() -> BoxedStrategy<String> {
    let unit = prop_oneof![0u16..0x80, 0xD800u16..0xE000, any::<u16>(), Just(0x2028u16)];
    prop::collection::vec(unit, 0..8).prop_map(|units| literal(&units)).boxed()
}

fn number() -> BoxedStrategy<String> {
    let special = [
        "-0",
        "NaN",
        "Infinity",
        "-Infinity",
        "1e21",
        "1e-7",
        "0.1",
        "5e-324",
        "1.7976931348623157e308",
        "2**31",
        "-(2**31)",
        "2**53 + 2",
        "123456789012345680000",
        "0.000001",
    ];
    prop_oneof![
        any::<i32>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(|x| format!("{x:e}")),
        prop::sample::select(special.to_vec()).prop_map(String::from),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    let numeric = ["\"0\"", "\"1\"", "\"10\"", "\"01\"", "\"-1\"", "\"1.5\"", "\"4294967294\"", "\"4294967295\""];
    prop_oneof![string(), prop::sample::select(numeric.to_vec()).prop_map(String::from), Just("\"toJSONx\"".to_owned())]
        .boxed()
}

fn leaf() -> BoxedStrategy<String> {
    prop_oneof![
        number(),
        string(),
        prop::sample::select(vec!["true", "false", "null", "undefined"]).prop_map(String::from)
    ]
    .boxed()
}

/// Plain data: what the walk must always answer.
fn plain() -> BoxedStrategy<String> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(|items| format!("[{}]", items.join(", "))),
                prop::collection::vec((key(), inner), 0..6).prop_map(|entries| {
                    let entries: Vec<String> = entries.into_iter().map(|(k, v)| format!("[{k}]: {v}")).collect();
                    format!("({{{}}})", entries.join(", "))
                }),
            ]
        })
        .boxed()
}

/// Values the walk may leave to QuickJS's own, each a way of making it
/// give other text than a walk of own properties would.
fn tricky(inner: BoxedStrategy<String>) -> BoxedStrategy<String> {
    let fixed = [
        "new Date(0)",
        "new Number(1)",
        "new String(\"s\")",
        "new Boolean(false)",
        "Symbol(\"s\")",
        "10n",
        "() => 1",
        "[1, , 2]",
        "new Proxy({a: 1}, {})",
        "new Proxy([1], {})",
        "({toJSON() { return 5 }})",
        "Object.defineProperty({a: 1}, \"toJSON\", {value: () => 7, enumerable: false})",
        "Object.create({toJSON() { return \"from the prototype\" }})",
        "Object.create(new Proxy({}, {get: () => () => \"trap\"}))",
        "({get a() { return 1 }})",
        "Object.defineProperty([1, 2], 0, {get: () => 9})",
        "(() => { const o = {}; o.self = o; return o })()",
        "(() => { const a = []; a.push(a); return a })()",
        "(() => { const a = [1, 2]; a.length = 4; return a })()",
        "new Map([[1, 2]])",
        "new Error(\"e\")",
        "(function () { return arguments })(1, 2)",
        "Object.assign(Object.create(Array.prototype), {0: 1})",
        "({[Symbol(\"k\")]: 1, a: 2})",
        "({a: Symbol(\"v\")})",
        "[Symbol(\"v\")]",
        "({a: 1n})",
    ];
    prop_oneof![
        prop::sample::select(fixed.to_vec()).prop_map(String::from),
        inner.clone().prop_map(|v| format!("Object.freeze({v})")),
        inner.clone().prop_map(|v| format!("Object.assign(Object.create(null), {v})")),
        inner
            .clone()
            .prop_map(|v| format!("Object.defineProperty({{b: {v}}}, \"hidden\", {{value: {v}, enumerable: false}})")),
        inner.clone().prop_map(|v| format!("Object.assign([1, 2], {{extra: {v}}})")),
        inner
            .clone()
            .prop_map(|v| format!("(() => {{ const o = {{a: 1, b: {v}, c: 3}}; delete o.b; o.b = {v}; return o }})()")),
        inner.prop_map(|v| format!("new (class {{ constructor() {{ this.x = {v} }} }})()")),
    ]
    .boxed()
}

fn mixed() -> BoxedStrategy<String> {
    plain()
        .prop_recursive(3, 32, 4, |inner| {
            prop_oneof![
                tricky(inner.clone()),
                prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(", "))),
                prop::collection::vec((key(), inner), 0..4).prop_map(|entries| {
                    let entries: Vec<String> = entries.into_iter().map(|(k, v)| format!("[{k}]: {v}")).collect();
                    format!("({{{}}})", entries.join(", "))
                }),
            ]
        })
        .boxed()
}

/// The walk's answer and QuickJS's own (`Err` when it throws) for `expression`.
fn both(expression: &str) -> (Plain, Result<Option<String>, String>) {
    let runtime = Runtime::new().expect("runtime");
    let context = super::super::new_context(&runtime).expect("context");
    context.with(|ctx| {
        let value: rquickjs::Value = ctx.eval(format!("({expression})")).expect("the generated value evaluates");
        let walked = text(&ctx, &value, object_class(&ctx).expect("class")).expect("no exception");
        let own = ctx.json_stringify(value).map(|s| s.map(|s| s.to_string().expect("utf-8"))).map_err(|e| {
            let _ = ctx.catch();
            e.to_string()
        });
        (walked, own)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plain_data_is_written_as_quickjs_writes_it(expression in plain()) {
        match both(&expression) {
            (Plain::Text(walked), Ok(Some(own))) => prop_assert_eq!(walked, own, "{}", expression),
            (Plain::Undefined, Ok(None)) => {}
            (walked, own) => prop_assert!(false, "{expression}: walked {:?}, QuickJS {own:?}", describe(&walked)),
        }
    }

    #[test]
    fn any_value_is_written_as_quickjs_writes_it_or_left_to_it(expression in mixed()) {
        match both(&expression) {
            (Plain::Text(walked), own) => prop_assert_eq!(Ok(Some(walked)), own, "{}", expression),
            (Plain::Undefined, own) => prop_assert_eq!(Ok(None), own, "{}", expression),
            (Plain::No, _) => {}
        }
    }
}

fn describe(plain: &Plain) -> String {
    match plain {
        Plain::Text(text) => text.clone(),
        Plain::Undefined => "undefined".into(),
        Plain::No => "not plain".into(),
    }
}

#[test]
fn what_a_walk_of_own_properties_would_get_wrong_is_left_to_quickjs() {
    for expression in [
        "({toJSON() { return 5 }})",
        "Object.defineProperty({a: 1}, \"toJSON\", {value: () => 7, enumerable: false})",
        "Object.create({toJSON() { return 1 }})",
        "({get a() { return 1 }})",
        "[1, , 2]",
        "new Proxy({a: 1}, {})",
        "(() => { const o = {}; o.self = o; return o })()",
        "({a: () => 1})",
        "({a: Symbol()})",
        "new Date(0)",
        "new String(\"s\")",
        // Text over the host's cap, however it is made.
        "new Array(1500000).fill(undefined)",
        "new Array(1500000).fill({})",
        "({a: new Array(1500000).fill([]), b: 1})",
        "\"x\".repeat(5000000)",
    ] {
        assert!(matches!(both(expression).0, Plain::No), "{expression}");
    }
}
