//! Object functions: `createObject`, `items`, `json`, `objectKeys`, `shallowMerge`, `tryGet`, and the safe access
//! chain that `tryGet` and `tryIndexFromEnd` share.

use super::array::{fold_case_utf16, require_known};
use super::string::parse_json_text;
use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Object, Value};

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("createObject", 0, None, create_object).passes_unevaluated(),
    FunctionDef::eager("items", 1, Some(1), items).passes_unevaluated(),
    FunctionDef::eager("json", 1, Some(1), json),
    FunctionDef::eager("objectKeys", 1, Some(1), object_keys).passes_unevaluated(),
    FunctionDef::eager("shallowMerge", 1, Some(1), shallow_merge).passes_unevaluated(),
    FunctionDef::eager("tryGet", 2, None, try_get).passes_unevaluated(),
];

/// `createObject(k1, v1, k2, v2, ...)`: string keys, even argument count, no duplicate keys. Keys differing only
/// in case count as duplicates too: ARM objects are looked up case-insensitively and our object cannot hold both.
fn create_object(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    if !args.len().is_multiple_of(2) {
        return Err(FnError::msg(format!(
            "the function expects an even number of arguments (key-value pairs), but {} were given.",
            args.len()
        )));
    }
    let mut out = Object::with_capacity(args.len() / 2);
    let mut values = args.into_vec().into_iter().enumerate();
    while let (Some((i, key)), Some((_, value))) = (values.next(), values.next()) {
        let key = match key {
            Value::String(key) => key,
            Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
            other => {
                return Err(FnError::msg(format!(
                    "the property name at position {} must be of type 'String', but the provided value is of type '{}'.",
                    i + 1,
                    other.value_type()
                )));
            }
        };
        if out.contains_key(&key) {
            return Err(FnError::msg(format!(
                "the property name '{key}' is given more than once."
            )));
        }
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// `items(obj)`: `[{key, value}]` sorted by key, ordinal ignoring case, stable (keys equal but for case keep
/// their object order: `abcKey` before `ABCKey` when declared so).
fn items(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let object = match args.take(0) {
        Value::Object(o) => o,
        Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
        other => {
            return Err(FnError::msg(format!(
                "the argument at position 1 must be of type 'Object', but the provided value is of type '{}'.",
                other.value_type()
            )));
        }
    };
    let mut entries: Vec<(String, Value)> = object.into_iter().collect();
    // `sort_by_cached_key` is stable.
    entries.sort_by_cached_key(|(k, _)| fold_case_utf16(k));
    Ok(Value::Array(
        entries
            .into_iter()
            .map(|(key, value)| {
                let mut entry = Object::with_capacity(2);
                entry.insert("key", Value::String(key));
                entry.insert("value", value);
                Value::Object(entry)
            })
            .collect(),
    ))
}

fn object_keys(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match require_known(&args.as_slice()[0])? {
        Value::Object(o) => Ok(Value::Array(o.keys().cloned().map(Value::String).collect())),
        _ => Err(args.type_error(0, "Object")),
    }
}

/// `shallowMerge([obj, ...])`: top-level merge, later objects win. Null entries are skipped.
fn shallow_merge(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let entries = match args.take(0) {
        Value::Array(entries) => entries,
        Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
        other => {
            return Err(FnError::msg(format!(
                "the argument at position 1 must be of type 'Array', but the provided value is of type '{}'.",
                other.value_type()
            )));
        }
    };
    let mut out = Object::new();
    for (i, entry) in entries.into_iter().enumerate() {
        match entry {
            Value::Object(o) => {
                for (k, v) in o {
                    out.insert(k, v);
                }
            }
            Value::Null => {}
            Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
            other => {
                return Err(FnError::msg(format!(
                    "the array must contain only objects, but the element at index {i} is of type '{}'.",
                    other.value_type()
                )));
            }
        }
    }
    Ok(Value::Object(out))
}

/// `tryGet(value, key1, key2, ...)`: Bicep's safe access (`a.?b`, `a[?0]`).
fn try_get(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let mut values = args.into_vec();
    let keys = values.split_off(1);
    let root = values.pop().unwrap_or_default();
    walk_access_chain(root, &keys, 2)
}

/// One step of a safe access chain.
enum AccessKey<'a> {
    Property(&'a str),
    Index(i64),
    FromEnd(i64),
}

/// A chain argument: a string is a property name, an integer an index, and `createObject('value', n,
/// 'fromEnd', true())` an index (counted from the end, 1-based, when `fromEnd` is true).
fn access_key(key: &Value, position: usize) -> Result<AccessKey<'_>, FnError> {
    let invalid = || {
        FnError::msg(format!(
            "the argument at position {position} must be a property name (String), an index (Integer) or an object {{ value: Integer, fromEnd: Boolean }}, but the provided value is of type '{}'.",
            key.value_type()
        ))
    };
    match key {
        Value::String(name) => Ok(AccessKey::Property(name)),
        Value::Int(i) => Ok(AccessKey::Index(*i)),
        Value::Object(o) => {
            let Some(Value::Int(i)) = o.get("value") else {
                return Err(invalid());
            };
            match o.get("fromEnd") {
                None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(AccessKey::Index(*i)),
                Some(Value::Bool(true)) => Ok(AccessKey::FromEnd(*i)),
                Some(_) => Err(invalid()),
            }
        }
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        _ => Err(invalid()),
    }
}

/// Follows `keys` from `start`; any miss (absent property, index out of range, wrong container type, null on
/// the way) gives null. A miss anywhere in the chain is null, not only at the first step (PSRule agrees; the
/// policy port would fail on a later miss). Keys are validated up front so bad keys fail whatever the data.
///
/// `first_position` is the 1-based argument position of `keys[0]`, for messages.
pub(super) fn walk_access_chain(
    start: Value,
    keys: &[Value],
    first_position: usize,
) -> Result<Value, FnError> {
    let keys = keys
        .iter()
        .enumerate()
        .map(|(i, k)| access_key(k, first_position + i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut current = start;
    for key in keys {
        let next = match (&mut current, key) {
            (Value::Unevaluated(u), _) => return Err(FnError::unavailable(u.expression.clone())),
            (Value::Object(o), AccessKey::Property(name)) => o.remove(name),
            (Value::Array(items), AccessKey::Index(i)) => usize::try_from(i)
                .ok()
                .filter(|i| *i < items.len())
                .map(|i| items.swap_remove(i)),
            (Value::Array(items), AccessKey::FromEnd(n)) => usize::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .and_then(|n| items.len().checked_sub(n))
                .map(|i| items.swap_remove(i)),
            _ => None,
        };
        match next {
            Some(v) => current = v,
            None => return Ok(Value::Null),
        }
    }
    Ok(current)
}

/// `json(s)`: parses `s` leniently, as Newtonsoft's reader does (single quotes, unquoted property names,
/// comments, trailing commas, `NaN`/`Infinity`), with the reader `base64ToJson` shares. `json('null')` is null;
/// `json(null())` is `{}` (documented).
fn json(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match &args.as_slice()[0] {
        // The reader's message names a position, never the text: it may come from a secure parameter.
        Value::String(s) => parse_json_text(s)
            .map_err(|e| FnError::msg(format!("the argument is not valid JSON: {e}"))),
        Value::Null => Ok(Value::Object(Object::new())),
        _ => Err(args.type_error(0, "String")),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use crate::env::SimpleEnvironment;
    use crate::functions::string::parse_json_text as parse_lenient_json;
    use crate::functions::test_util::{check, check_err, eval, eval_in};
    use crate::value::Value;

    /// Like `check`, but object key order and int/float distinction matter too.
    #[track_caller]
    fn check_exact(expr: &str, expected: serde_json::Value) {
        let v = eval(expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(v.to_json().to_string(), expected.to_string(), "{expr}");
    }

    #[track_caller]
    fn check_with_params(params: serde_json::Value, expr: &str, expected: serde_json::Value) {
        let mut env = SimpleEnvironment::default();
        if let Value::Object(o) = Value::from(params) {
            env.parameters = o;
        }
        let v = eval_in(&env, expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(v.to_json().to_string(), expected.to_string(), "{expr}");
    }

    #[test]
    fn create_object_pairs() {
        // conformance: object-createobject
        check_exact(
            "createObject('intProp', 1, 'stringProp', 'abc', 'boolProp', true(), 'arrayProp', createArray('a', 'b', 'c'), 'objectProp', createObject('key1', 'value1'))",
            json!({"intProp": 1, "stringProp": "abc", "boolProp": true, "arrayProp": ["a", "b", "c"], "objectProp": {"key1": "value1"}}),
        );
        check_exact("createObject()", json!({}));
        check_exact("createObject('a', null())", json!({"a": null}));
        check_err("createObject('a')", "even number of arguments");
        check_err("createObject('a', 1, 'b')", "even number of arguments");
        check_err(
            "createObject(1, 'a')",
            "property name at position 1 must be of type 'String'",
        );
        check_err(
            "createObject('a', 1, 'a', 2)",
            "'a' is given more than once",
        );
        check_err(
            "createObject('a', 1, 'A', 2)",
            "'A' is given more than once",
        );
    }

    #[test]
    fn items_sorted_ordinal_ignore_case_and_stable() {
        // evaluation: Items_function_evaluation_works (keys and values in that order)
        let params = json!({"inputObj": {
            "ghiKey": "ghiValue", "defKey": "defValue", "abcKey": "abcValue", "123Key": "123Value",
            "GHIKey": "GHIValue", "DEFKey": "DEFValue", "ABCKey": "ABCValue", "456Key": "456Value"
        }});
        check_with_params(
            params.clone(),
            "map(items(parameters('inputObj')), lambda('i', lambdaVariables('i').key))",
            json!([
                "123Key", "456Key", "abcKey", "ABCKey", "defKey", "DEFKey", "ghiKey", "GHIKey"
            ]),
        );
        check_with_params(
            params.clone(),
            "map(items(parameters('inputObj')), lambda('i', lambdaVariables('i').value))",
            json!([
                "123Value", "456Value", "abcValue", "ABCValue", "defValue", "DEFValue", "ghiValue",
                "GHIValue"
            ]),
        );
        check_with_params(params, "length(items(parameters('inputObj')))", json!(8));
        // conformance: object-items-inline (sorted although declared out of order)
        check_with_params(
            json!({"entities": {
                "item002": {"enabled": false, "displayName": "Example item 2", "number": 200},
                "item001": {"enabled": true, "displayName": "Example item 1", "number": 300}
            }}),
            "items(parameters('entities'))",
            json!([
                {"key": "item001", "value": {"enabled": true, "displayName": "Example item 1", "number": 300}},
                {"key": "item002", "value": {"enabled": false, "displayName": "Example item 2", "number": 200}}
            ]),
        );
        // conformance: object-items-copy-inline reads items(...)[i].value.displayName
        check_with_params(
            json!({"entities": {"item002": {"displayName": "Example item 2"}, "item001": {"displayName": "Example item 1"}}}),
            "items(parameters('entities'))[1].value.displayName",
            json!("Example item 2"),
        );
        // ordinal upper-case folding puts '_' (0x5F) after letters
        check_exact(
            "map(items(createObject('a_', 1, 'aC', 2, 'AB', 3)), lambda('e', lambdaVariables('e').key))",
            json!(["AB", "aC", "a_"]),
        );
        // conformance: object-items-copy-inline (the variable copy loop, written as the equivalent map over range)
        check_with_params(
            json!({"entities": {
                "item002": {"enabled": false, "displayName": "Example item 2", "number": 200},
                "item001": {"enabled": true, "displayName": "Example item 1", "number": 300}
            }}),
            "map(range(0, length(items(parameters('entities')))), lambda('i', createObject('fullName', items(parameters('entities'))[lambdaVariables('i')].value.displayName, 'itemEnabled', items(parameters('entities'))[lambdaVariables('i')].value.enabled, 'key', items(parameters('entities'))[lambdaVariables('i')].key)))",
            json!([
                {"fullName": "Example item 1", "itemEnabled": true, "key": "item001"},
                {"fullName": "Example item 2", "itemEnabled": false, "key": "item002"}
            ]),
        );
        check_exact("items(createObject())", json!([]));
        check_err("items(createArray())", "must be of type 'Object'");
    }

    #[test]
    fn json_parses_like_newtonsoft() {
        // conformance: object-json
        check("empty(json('null'))", json!(true));
        check_exact("json('{\"a\": \"b\"}')", json!({"a": "b"}));
        check_exact("json('\"test\"')", json!("test"));
        check_exact("json('true')", json!(true));
        check_exact("json('3')", json!(3));
        check_exact("json('[1,2,3 ]')", json!([1, 2, 3]));
        check_exact(
            "json(concat('{\"a\": \"', 'demo value', '\"}'))",
            json!({"a": "demo value"}),
        );
        // null in, empty object out (documented)
        check_exact("json(null())", json!({}));
        check_exact("json('null')", json!(null));
        // numbers: ints stay ints, decimals are doubles, nested too
        check_exact(
            "json('{\"i\": 2199023255552, \"f\": 0.25, \"e\": 1e3, \"n\": -7}')",
            json!({"i": 2199023255552_i64, "f": 0.25, "e": 1000.0, "n": -7}),
        );
        check_exact("json('[1.0]')", json!([1.0]));
        // leniency: single quotes, unquoted names, comments, trailing commas
        check_exact(
            r"json('{''a'': ''it\''s \u0022q\u0022''}')",
            json!({"a": "it's \"q\""}),
        );
        check_exact(
            "json('{a: 1, $b_2: [true, false,], }')",
            json!({"a": 1, "$b_2": [true, false]}),
        );
        check_exact("json('/* c */ [1, // two\n 2]')", json!([1, 2]));
        check_exact("json('\"\\u00e9\\n\\/\"')", json!("é\n/"));
        check_exact("json('0x1F')", json!(31));
        // (Newtonsoft also reads a leading-zero integer as octal, `010` = 8; the shared reader does not yet.)
        check_err("json('')", "not valid JSON: Unexpected end of content");
        check_err("json('{')", "Unexpected end while parsing object");
        check_err("json('[1 2]')", "unexpected character was encountered");
        check_err("json('{\"a\" 1}')", "Expected ':'");
        check_err("json('1 2')", "Additional text");
        check_err("json('tru')", "Unexpected character");
        check_err("json('\"abc')", "Unterminated string");
        check_err("json('1.2.3')", "not a valid number");
        check_err("json(1)", "must be of type 'String'");
    }

    #[test]
    fn json_error_does_not_echo_the_text() {
        let err = eval("json('{\"password\": s3cret')").expect_err("invalid JSON");
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn json_depth_is_limited() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_lenient_json(&deep).is_err());
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse_lenient_json(&ok).is_ok());
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            (-1.0e12f64..1.0e12).prop_map(|x| json!(x)),
            "\\PC{0,12}".prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::vec(("[a-z]{1,6}", inner), 0..6)
                    .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever strict JSON serde_json writes, the lenient reader reads back unchanged.
        #[test]
        fn strict_json_round_trips(value in arb_json()) {
            let text = serde_json::to_string_pretty(&value).expect("serializable");
            let parsed = parse_lenient_json(&text).map_err(|e| TestCaseError::fail(format!("{e:?} in {text}")))?;
            prop_assert_eq!(parsed.to_json().to_string(), value.to_string());
        }

        /// The reader never panics, whatever the input.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
            let _ = parse_lenient_json(&text);
        }
    }

    #[test]
    fn object_keys_in_order() {
        // evaluation: New_functions_are_evaluated_correctly objectKeysTest
        check_exact(
            "objectKeys(createObject('a', 123, 'b', 456))",
            json!(["a", "b"]),
        );
        check_exact(
            "objectKeys(createObject('z', 1, 'a', 2))",
            json!(["z", "a"]),
        );
        check_exact("objectKeys(createObject())", json!([]));
        check_err("objectKeys(createArray())", "must be of type 'Object'");
    }

    #[test]
    fn shallow_merge_last_wins() {
        // evaluation: New_functions_are_evaluated_correctly shallowMergeTest
        check_exact(
            "shallowMerge(createArray(createObject('a', 123), createObject('b', 456)))",
            json!({"a": 123, "b": 456}),
        );
        check_exact(
            "shallowMerge(createArray(createObject('a', createObject('x', 1)), createObject('a', createObject('y', 2))))",
            json!({"a": {"y": 2}}),
        );
        check_exact("shallowMerge(createArray())", json!({}));
        check_exact(
            "shallowMerge(createArray(null(), createObject('a', 1)))",
            json!({"a": 1}),
        );
        check_err(
            "shallowMerge(createArray(1))",
            "element at index 0 is of type 'Integer'",
        );
        check_err("shallowMerge(createObject())", "must be of type 'Array'");
    }

    #[test]
    fn try_get_chains() {
        let obj = "createObject('properties', createObject('displayName', 'Test 001', 'values', createArray('Value 1', 'Value 2')))";
        check_exact(
            &format!("tryGet({obj}, 'properties', 'displayName')"),
            json!("Test 001"),
        );
        check_exact(
            &format!("tryGet({obj}, 'PROPERTIES', 'values', 1)"),
            json!("Value 2"),
        );
        check_exact(
            &format!("tryGet({obj}, 'properties', 'values', 2)"),
            json!(null),
        );
        check_exact(&format!("tryGet({obj}, 'notValue')"), json!(null));
        check_exact(&format!("tryGet({obj}, 'notValue', 0)"), json!(null));
        check_exact(
            &format!("tryGet({obj}, 'properties', 'notValue')"),
            json!(null),
        );
        check_exact(
            &format!("tryGet({obj}, 'properties', 'notValue', 'value')"),
            json!(null),
        );
        check_exact(
            &format!("tryGet({obj}, 'properties', 'values', -1)"),
            json!(null),
        );
        check_exact(
            &format!(
                "tryGet({obj}, 'properties', 'values', createObject('value', 1, 'fromEnd', true()))"
            ),
            json!("Value 2"),
        );
        check_exact(
            &format!(
                "tryGet({obj}, 'properties', 'values', createObject('value', 1, 'fromEnd', false()))"
            ),
            json!("Value 2"),
        );
        check_exact(
            &format!(
                "tryGet({obj}, 'properties', 'values', createObject('value', 3, 'fromEnd', true()))"
            ),
            json!(null),
        );
        // evaluation: Safe_dereferences_are_evaluated_successfully (with the resource's echoed properties inlined)
        let res = "json('{\"properties\": {\"foo\": [{\"bar\": \"baz\"}]}}')";
        check_exact(
            &format!("tryGet({res}, 'properties', 'foo', 0, 'bar')"),
            json!("baz"),
        );
        check_exact(
            &format!("tryGet({res}.properties, 'fizz', 0, 'bar')"),
            json!(null),
        );
        check_exact(
            &format!("tryGet({res}.properties.foo, 0, 'bar')"),
            json!("baz"),
        );
        check_exact(
            &format!("tryGet({res}.properties.foo, 10, 'bar')"),
            json!(null),
        );
        // wrong container types and null are misses
        check_exact("tryGet(createArray('element'), 0)", json!("element"));
        check_exact("tryGet(createObject(), 0)", json!(null));
        check_exact("tryGet(null(), 'property')", json!(null));
        check_exact("tryGet('string', 'property')", json!(null));
        check_exact("tryGet(10, 'property')", json!(null));
        check_exact("tryGet(createArray(), 0)", json!(null));
        // bad keys are errors, whatever the data
        check_err(
            "tryGet(createObject(), true())",
            "position 2 must be a property name",
        );
        check_err(
            "tryGet(null(), 'a', createArray())",
            "position 3 must be a property name",
        );
        check_err(
            "tryGet(createArray(1), createObject('value', '0'))",
            "position 2",
        );
        check_err("tryGet(createObject())", "at least 2");
    }

    #[test]
    fn try_get_defers_on_unevaluated() {
        use std::rc::Rc;

        use crate::value::Unevaluated;

        let mut env = SimpleEnvironment::default();
        let marker = Value::Unevaluated(Rc::new(Unevaluated {
            expression: "[reference('r')]".into(),
        }));
        env.parameters.insert("r", marker);
        let known = eval_in(&env, "tryGet(createObject('a', parameters('r')), 'a')")
            .expect("moves the marker");
        assert!(matches!(known, Value::Unevaluated(_)));
        let deferred = eval_in(&env, "tryGet(createObject('a', parameters('r')), 'a', 'b')")
            .expect("deferred");
        assert!(matches!(deferred, Value::Unevaluated(_)));
        let missing = eval_in(&env, "tryGet(createObject('a', parameters('r')), 'x', 'b')")
            .expect("a known miss");
        assert!(missing.is_null());
    }
}
