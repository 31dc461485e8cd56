//! No input makes loading or checking panic: arbitrary text as type files, arbitrary type files made of valid
//! entries pointing anywhere (themselves included), and arbitrary bodies.

use std::collections::BTreeMap;

use cairn_extension_types::{Body, TypeSet, check_body, check_update, without_read_only};
use proptest::prelude::*;

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        "[a-z\\[\\]]{0,6}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One types-file entry pointing at indices below `n` (or one past, sometimes).
fn entry(n: usize) -> impl Strategy<Value = String> {
    let r = move || (0..n + 1).prop_map(|i| format!(r##"{{"$ref":"#/{i}"}}"##));
    let props = move || {
        prop::collection::btree_map("[a-z]{1,3}", (r(), 0u32..32), 0..4).prop_map(|m| {
            let members: Vec<String> = m
                .into_iter()
                .map(|(k, (t, f))| format!(r#""{k}":{{"type":{t},"flags":{f}}}"#))
                .collect();
            format!("{{{}}}", members.join(","))
        })
    };
    prop_oneof![
        Just(r#"{"$type":"AnyType"}"#.to_string()),
        Just(r#"{"$type":"StringType","minLength":1,"maxLength":3}"#.to_string()),
        Just(r#"{"$type":"IntegerType","minValue":-1,"maxValue":5}"#.to_string()),
        Just(r#"{"$type":"BooleanType"}"#.to_string()),
        Just(r#"{"$type":"NullType"}"#.to_string()),
        "[a-z]{0,3}".prop_map(|v| format!(r#"{{"$type":"StringLiteralType","value":"{v}"}}"#)),
        prop::collection::vec(r(), 0..4)
            .prop_map(|e| format!(r#"{{"$type":"UnionType","elements":[{}]}}"#, e.join(","))),
        r().prop_map(|t| format!(r#"{{"$type":"ArrayType","itemType":{t}}}"#)),
        (props(), prop::option::of(r())).prop_map(|(p, a)| match a {
            Some(a) => format!(r#"{{"$type":"ObjectType","name":"o","properties":{p},"additionalProperties":{a}}}"#),
            None => format!(r#"{{"$type":"ObjectType","name":"o","properties":{p}}}"#),
        }),
        (props(), r(), r()).prop_map(|(p, a, b)| format!(
            r#"{{"$type":"DiscriminatedObjectType","name":"d","discriminator":"k","baseProperties":{p},"elements":{{"a":{a},"b":{b}}}}}"#
        )),
        r().prop_map(|b| format!(r#"{{"$type":"ResourceType","name":"R@1","body":{b}}}"#)),
    ]
}

fn type_file() -> impl Strategy<Value = Vec<String>> {
    (1usize..8).prop_flat_map(|n| prop::collection::vec(entry(n), n..n + 1))
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(index in ".{0,200}", types in ".{0,200}") {
        let files = BTreeMap::from([("index.json".to_string(), index), ("types.json".to_string(), types)]);
        let _ = TypeSet::from_files(&files);
    }

    #[test]
    fn arbitrary_type_files_and_bodies_never_panic(
        entries in type_file(),
        resource in 0usize..9,
        body in json_value(),
        old in json_value(),
    ) {
        let types = format!("[{}]", entries.join(","));
        let index = format!(r##"{{"resources":{{"R@1":{{"$ref":"types.json#/{resource}"}}}},
            "fallbackResourceType":{{"$ref":"types.json#/{resource}"}}}}"##);
        let Ok(set) = TypeSet::load(&index, |_| Some(types.clone())) else { return Ok(()) };
        // What loads writes back and loads again, equal.
        let reloaded = TypeSet::from_files(&set.to_files()).ok();
        prop_assert_eq!(reloaded.as_ref(), Some(&set));
        let id = set.resource("R", None, None).expect("declared");
        let _ = check_body(&set, id, &Body::from_template_json(&body));
        let _ = check_update(&set, id, &Body::from_json(&old), &Body::from_json(&body));
        let mut value = body.clone();
        without_read_only(&set, id, &mut value);
    }
}
