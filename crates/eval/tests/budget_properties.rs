//! Random expressions under small budgets: whatever the expression (nested calls of functions that grow values,
//! lambdas, user functions that recurse, literals at the edges of their types, and plain noise), evaluation
//! returns without panicking and keeps its budgets. The `expr_eval` fuzz target checks the same property on
//! inputs libFuzzer finds.

mod hostile;

use proptest::prelude::*;

/// Functions that build, grow, convert or walk values, with the arities they accept.
const FUNCTIONS: &[(&str, usize, usize)] = &[
    ("concat", 1, 4),
    ("string", 1, 1),
    ("json", 1, 1),
    ("replace", 3, 3),
    ("padLeft", 2, 3),
    ("format", 1, 4),
    ("range", 2, 2),
    ("createArray", 0, 4),
    ("createObject", 0, 4),
    ("union", 1, 3),
    ("intersection", 1, 3),
    ("length", 1, 1),
    ("substring", 1, 3),
    ("split", 2, 2),
    ("join", 2, 2),
    ("skip", 2, 2),
    ("take", 2, 2),
    ("first", 1, 1),
    ("last", 1, 1),
    ("if", 3, 3),
    ("coalesce", 1, 3),
    ("int", 1, 1),
    ("add", 2, 2),
    ("mul", 2, 2),
    ("div", 2, 2),
    ("mod", 2, 2),
    ("items", 1, 1),
    ("base64", 1, 1),
    ("base64ToString", 1, 1),
    ("dataUri", 1, 1),
    ("uriComponent", 1, 1),
    ("toUpper", 1, 1),
    ("trim", 1, 1),
    ("guid", 1, 3),
    ("uniqueString", 1, 3),
    ("flatten", 1, 1),
    ("shallowMerge", 1, 1),
    ("tryGet", 2, 3),
    ("indexOf", 2, 2),
    ("contains", 2, 2),
    ("empty", 1, 1),
    ("equals", 2, 2),
    ("not", 1, 1),
    ("cidrSubnet", 3, 3),
    ("dateTimeAdd", 2, 3),
    ("f.twice", 1, 1),
    ("f.fib", 1, 1),
    ("f.loop", 1, 1),
];

/// Calls taking a lambda over an array: the function, the lambda's parameters, and whether the lambda must
/// return a string (a key).
const LAMBDA_TAKERS: &[(&str, &[&str], bool)] = &[
    ("map", &["x"], false),
    ("filter", &["x"], false),
    ("sort", &["x", "y"], false),
    ("toObject", &["x"], true),
    ("groupBy", &["x"], true),
];

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (-3i64..40).prop_map(|n| n.to_string()),
        "[a-z0-9 ,.{}/-]{0,12}".prop_map(|s| format!("'{s}'")),
        Just("'{0}{0}{0}{0}{1}'".to_string()),
        Just("'10.0.0.0/8'".to_string()),
        Just("'2024-01-01T00:00:00Z'".to_string()),
        Just("'[1, [2, {\"a\": 3}]]'".to_string()),
        Just("true()".to_string()),
        Just("null()".to_string()),
        Just("parameters('s')".to_string()),
        Just("parameters('n')".to_string()),
        Just("parameters('a')".to_string()),
        Just("parameters('o')".to_string()),
        Just("parameters('o').nested.x[0]".to_string()),
        Just("parameters('big')".to_string()),
        Just("variables('v')".to_string()),
        Just("variables('list')".to_string()),
        Just("range(0, 10000)".to_string()),
    ]
}

/// An expression that evaluates to an array when its parts do.
fn array_of(inner: BoxedStrategy<String>) -> impl Strategy<Value = String> {
    prop_oneof![
        (0u16..20_000).prop_map(|n| format!("range(0, {n})")),
        Just("parameters('a')".to_string()),
        Just("variables('list')".to_string()),
        Just("split(parameters('big'), '')".to_string()),
        prop::collection::vec(inner.clone(), 0..4)
            .prop_map(|items| format!("createArray({})", items.join(", "))),
        (inner.clone(), inner)
            .prop_map(|(a, b)| format!("union(createArray({a}), createArray({b}, {a}))")),
    ]
}

fn expression() -> impl Strategy<Value = String> {
    leaf().prop_recursive(5, 64, 4, |inner| {
        prop_oneof![
            4 => (0..FUNCTIONS.len(), prop::collection::vec(inner.clone(), 0..5)).prop_map(
                |(i, args)| {
                    let (name, min, max) = FUNCTIONS[i];
                    let count = args.len().clamp(min, max);
                    let mut args = args;
                    args.resize(count, "1".to_string());
                    format!("{name}({})", args.join(", "))
                }
            ),
            2 => (0..LAMBDA_TAKERS.len(), array_of(inner.clone()), inner.clone()).prop_map(|(i, list, body)| {
                let (name, params, key) = LAMBDA_TAKERS[i];
                let names: Vec<String> = params.iter().map(|p| format!("'{p}'")).collect();
                let body = body.replace("variables('v')", &format!("lambdaVariables('{}')", params[0]));
                let body = if key { format!("string({body})") } else { body };
                format!("{name}({list}, lambda({}, {body}))", names.join(", "))
            }),
            1 => (inner.clone(), inner.clone()).prop_map(|(values, body)| format!(
                "mapValues(createObject('a', {values}, 'b', parameters('o')), lambda('x', {}))",
                body.replace("variables('v')", "lambdaVariables('x')")
            )),
            2 => (inner.clone(), inner.clone(), 0u8..40).prop_map(|(step, seed, rounds)| format!(
                "reduce(range(0, {rounds}), {seed}, lambda('acc', 'i', {}))",
                step.replace("variables('v')", "lambdaVariables('acc')")
            )),
            1 => (array_of(inner.clone()), 0u8..4).prop_map(|(list, i)| format!("{list}[{i}]")),
            1 => (inner, prop_oneof![Just("k"), Just("nested"), Just("x")])
                .prop_map(|(e, p)| format!("createObject('k', {e}, 'nested', parameters('o')).{p}")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_expressions_keep_their_budgets(expr in expression()) {
        hostile::check_evaluation(&format!("[{expr}]"));
    }

    #[test]
    fn noise_keeps_the_budgets(text in "\\[[a-z(),.' 0-9\\[\\]{}]{0,60}\\]") {
        hostile::check_evaluation(&text);
    }
}

#[test]
fn the_known_hostile_expressions_stay_within_the_budgets() {
    for expr in [
        "reduce(range(0, 40), 'ab', lambda('acc', 'i', concat(lambdaVariables('acc'), lambdaVariables('acc'))))",
        "f.twice(f.twice(f.twice(parameters('big'))))",
        "f.fib(30)",
        "f.loop(1)",
        "map(range(0, 10000), lambda('i', range(0, 10000)))",
        "padLeft('', 2147483647)",
        "format('{0}{0}{0}{0}', parameters('big'))",
        "replace(parameters('big'), 'x', 'xxxx')",
        "json(concat('[', padLeft('', 100000, '['), ']'))",
    ] {
        hostile::check_evaluation(&format!("[{expr}]"));
    }
}
