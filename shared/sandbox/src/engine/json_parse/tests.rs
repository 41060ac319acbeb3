//! The reader against QuickJS's own `JSON.parse`, on generated texts: the
//! same value whenever the reader answers, an answer for every text of
//! plain JSON, and never a value where QuickJS's own throws.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use rquickjs::{Ctx, Function, Runtime, Value};

use super::host_parse;

/// JSON text with the whitespace, escapes and numbers people and encoders write.
fn json() -> BoxedStrategy<String> {
    let space = prop::sample::select(vec!["", " ", "\n", "\t", "\r\n  "]);
    let number = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(|x| format!("{x:e}")),
        prop::sample::select(vec![
            "0",
            "-0",
            "-0.0",
            "1.5",
            "1E3",
            "1e+3",
            "2e-3",
            "123456789012345678901234567890",
            "1e400",
            "-1e-400",
            "0.1",
            "9007199254740993",
            "4.9406564584124654e-324",
        ])
        .prop_map(String::from),
    ];
    let piece = prop_oneof![
        "[a-z]{0,3}".prop_map(String::from),
        prop::sample::select(vec![
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\r",
            "\\t",
            "\\u0000",
            "\\u00e9",
            "\\u2028",
            "\\ud83d\\ude00",
            "é",
            "😀",
            "\\uD834\\uDD1E",
            "__proto__",
        ])
        .prop_map(String::from),
    ];
    let string = prop::collection::vec(piece, 0..4).prop_map(|pieces| format!("\"{}\"", pieces.concat()));
    let leaf =
        prop_oneof![number, string.clone(), prop::sample::select(vec!["true", "false", "null"]).prop_map(String::from)];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        let space = space.clone();
        prop_oneof![
            (prop::collection::vec(inner.clone(), 0..6), space.clone())
                .prop_map(|(items, s)| format!("[{s}{}{s}]", items.join(&format!("{s},{s}")))),
            (prop::collection::vec((string.clone(), inner), 0..6), space).prop_map(|(members, s)| {
                let members: Vec<String> = members.into_iter().map(|(k, v)| format!("{k}{s}:{s}{v}")).collect();
                format!("{{{s}{}{s}}}", members.join(","))
            }),
        ]
    })
    .boxed()
}

/// Texts that are not JSON, or that only QuickJS's own may read: a valid
/// text cut, grown or with one byte changed, and known traps.
fn broken() -> BoxedStrategy<String> {
    let traps = prop::sample::select(vec![
        "01",
        "1.",
        ".5",
        "+1",
        "-",
        "1e",
        "1e+",
        "[1,]",
        "{\"a\":1,}",
        "{a:1}",
        "'a'",
        "\"\\x41\"",
        "\"\\u12\"",
        "\"\t\"",
        "\"\\ud800\"",
        "\"\\udc00x\"",
        "NaN",
        "Infinity",
        "tru",
        "nul",
        "[1 2]",
        "{\"a\" 1}",
        "\u{feff}1",
        "1 2",
        "",
        " ",
        "[",
        "{",
        "\"a",
        "\u{a0}1",
        "0x10",
        "1_000",
    ])
    .prop_map(String::from);
    prop_oneof![
        traps,
        (json(), any::<prop::sample::Index>()).prop_map(|(text, at)| {
            let mut cut = at.index(text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_owned()
        }),
        (
            json(),
            any::<prop::sample::Index>(),
            prop::sample::select(vec!['x', ',', '"', '\\', ']', '}', '0', '-', ' '])
        )
            .prop_map(|(text, at, c)| {
                let mut text = text;
                let at = text.char_indices().map(|(i, _)| i).nth(at.index(text.chars().count().max(1))).unwrap_or(0);
                text.insert(at, c);
                text
            }),
    ]
    .boxed()
}

/// The reader's value (None: it declined) and QuickJS's own (Err: it threw),
/// and whether the two are the same value, compared in JavaScript.
fn both(text: &str) -> (Option<bool>, Result<(), String>) {
    let runtime = Runtime::new().expect("runtime");
    let context = super::super::new_context(&runtime).expect("context");
    context.with(|ctx| {
        let source = rquickjs::String::from_str(ctx.clone(), text).expect("string");
        let reader = host_parse(&ctx).expect("host function");
        let ours: Value = reader.call((source.clone(),)).expect("the reader raises nothing here");
        let own = ctx.json_parse(text);
        let own = match own {
            Ok(value) => value,
            Err(e) => {
                let _ = ctx.catch();
                return ((!ours.is_undefined()).then_some(false), Err(e.to_string()));
            }
        };
        if ours.is_undefined() {
            return (None, Ok(()));
        }
        (Some(same(&ctx).call((ours, own)).expect("compared")), Ok(()))
    })
}

/// Deep equality as JavaScript sees it: `Object.is` for leaves, own keys in order, prototypes.
fn same<'js>(ctx: &Ctx<'js>) -> Function<'js> {
    ctx.eval(
        "(function same(a, b) {
           if (typeof a !== 'object' || a === null) return Object.is(a, b);
           if (typeof b !== 'object' || b === null) return false;
           if (Array.isArray(a) !== Array.isArray(b) || Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
           const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
           if (ka.length !== kb.length) return false;
           for (let i = 0; i < ka.length; i++) {
             if (ka[i] !== kb[i]) return false;
             const da = Object.getOwnPropertyDescriptor(a, ka[i]), db = Object.getOwnPropertyDescriptor(b, kb[i]);
             if (da.writable !== db.writable || da.enumerable !== db.enumerable || da.configurable !== db.configurable) return false;
             if (!same(da.value, db.value)) return false;
           }
           return true;
         })",
    )
    .expect("the comparison compiles")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn json_is_read_as_quickjs_reads_it(text in json()) {
        let (ours, own) = both(&text);
        prop_assert_eq!(own, Ok(()), "{}", text);
        prop_assert_eq!(ours, Some(true), "{}", text);
    }

    #[test]
    fn what_quickjs_refuses_the_reader_never_reads(text in broken()) {
        let (ours, own) = both(&text);
        match own {
            Err(_) => prop_assert_eq!(ours, None, "{}", text),
            Ok(()) => prop_assert!(ours != Some(false), "{}", text),
        }
    }
}

#[test]
fn what_only_quickjs_may_read_is_left_to_it() {
    for text in ["\"\\ud800\"", "[\"\\udc00\"]", &format!("{}1{}", "[".repeat(65), "]".repeat(65))] {
        let (ours, own) = both(text);
        assert_eq!((ours, own), (None, Ok(())), "{text}");
    }
    let (ours, _) = both(&format!("{}1{}", "[".repeat(64), "]".repeat(64)));
    assert_eq!(ours, Some(true), "64 levels are read");
    // An own `__proto__`, not a prototype; a repeated key in its first place with its last value.
    assert_eq!(both(r#"{"__proto__": [1], "a": 1, "b": 2, "a": 3}"#), (Some(true), Ok(())));
}
