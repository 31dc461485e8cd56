//! Property tests: the analysis never panics, whatever the template, parameters file or rules file holds, and
//! every finding it reports has the rule's code and a JSON path.

use cairn_stacks_lint::{LintInput, Mode, RULE_CODE, Rules, lint};
use cairn_template::SourceFile;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Expression text from a small grammar that covers everything the tracer handles, plus nonsense.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("'text'".to_string()),
        Just("42".to_string()),
        Just("parameters('p')".to_string()),
        Just("parameters('s')".to_string()),
        Just("parameters('missing')".to_string()),
        Just("variables('a')".to_string()),
        Just("variables('b')".to_string()),
        Just("variables('loop')".to_string()),
        Just("lambdaVariables('x')".to_string()),
        Just("extensions('k8s').config".to_string()),
        Just("extensionConfigs('k8s').auth".to_string()),
        Just("extensions('nope')".to_string()),
        Just("listKeys('r', '2020-01-01')".to_string()),
        Just("reference('r').x".to_string()),
        Just("resourceGroup().location".to_string()),
        Just("copyIndex()".to_string()),
        Just("json('{\"a\": [1, {\"b\": null}]}')".to_string()),
        Just("unknownFunction()".to_string()),
        Just("ns.f('a')".to_string()),
        Just("ns.missing()".to_string()),
    ];
    leaf.prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("if({c}, {a}, {b})")),
            (inner.clone(), inner.clone())
                .prop_map(|(k, v)| format!("createObject({k}, {v}, 'auth', {v})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("union({a}, {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("concat({a}, {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("coalesce({a}, {b})")),
            inner.clone().prop_map(|a| format!("createArray({a}, {a})")),
            inner.clone().prop_map(|a| format!("first({a})")),
            inner.clone().prop_map(|a| format!("{a}.auth.kubeConfig")),
            (inner.clone(), inner.clone()).prop_map(|(a, i)| format!("{a}[{i}]")),
            inner
                .clone()
                .prop_map(|a| format!("map(createArray({a}), lambda('x', lambdaVariables('x')))")),
            (inner.clone(), inner.clone()).prop_map(|(a, k)| format!("tryGet({a}, {k})")),
            inner.clone().prop_map(|a| format!("ns.f({a})")),
            inner.clone().prop_map(|a| format!("{a}(")),
        ]
    })
}

/// A JSON value that may hold expressions, wrapper items and the seed forms.
fn config_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        expr().prop_map(|e| json!(format!("[{e}]"))),
        Just(json!("literal")),
        Just(json!(null)),
        Just(json!(7)),
        Just(json!({ "keyVaultReference": { "keyVault": { "id": "/kv" }, "secretName": "s" } })),
        Just(json!({ "apiReference": { "method": "POST" } })),
        Just(json!({ "type": "inherit", "value": "k8s" })),
        Just(json!({ "type": "UserProvided", "value": "x" })),
        Just(json!({ "type": "armApiCall", "value": "[listX('r', 'v').y]" })),
        expr().prop_map(|e| json!({ "value": format!("[{e}]") })),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("auth".to_string()),
                        Just("kubeConfig".to_string()),
                        Just("namespace".to_string()),
                        Just("value".to_string()),
                        Just("type".to_string()),
                        Just("[concat('a', 'b')]".to_string()),
                        Just("[reference('r').n]".to_string()),
                        Just("copy".to_string()),
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A template: parameters, variables (with a cycle), a function, extension declarations, and nested modules.
fn template() -> impl Strategy<Value = Value> {
    let module = |configs: Value, inner: Value| {
        json!({
            "type": "Microsoft.Resources/deployments",
            "apiVersion": "2025-04-01",
            "name": "m",
            "properties": {
                "expressionEvaluationOptions": { "scope": "inner" },
                "parameters": { "p": { "value": "[parameters('s')]" } },
                "extensionConfigs": configs,
                "template": inner
            }
        })
    };
    let base = (config_value(), config_value(), expr()).prop_map(|(a, b, e)| {
        json!({
            "languageVersion": "2.2-experimental",
            "parameters": {
                "p": { "type": "string", "defaultValue": "[parameters('p')]" },
                "s": { "$ref": "#/definitions/secret" }
            },
            "definitions": { "secret": { "$ref": "#/definitions/secret" } },
            "functions": [ { "namespace": "ns", "members": {
                "f": { "parameters": [ { "name": "v", "type": "string" } ],
                       "output": { "type": "string", "value": format!("[{e}]") } } } } ],
            "variables": {
                "a": a,
                "b": "[variables('a')]",
                "loop": "[variables('loop')]",
                "copy": [ { "name": "c", "count": 2, "input": "[copyIndex('c')]" } ]
            },
            "extensions": {
                "k8s": { "name": "Kubernetes", "version": "1.0.0",
                         "config": { "kubeConfig": { "type": "secureString" }, "namespace": { "defaultValue": b } } }
            },
            "imports": { "old": { "provider": "Kubernetes", "version": "1.0.0", "config": { "auth": { "type": "UserProvided" } } } },
            "resources": {}
        })
    });
    base.prop_recursive(3, 8, 2, move |inner| {
        (inner, config_value(), config_value()).prop_map(move |(mut child, configs, whole)| {
            let mut parent = child.clone();
            if let Some(res) = child.get_mut("resources") {
                *res = json!({});
            }
            parent["resources"] = json!({
                "m1": module(json!({ "k8s": configs, "old": whole.clone() }), child.clone()),
                "m2": module(whole, child)
            });
            parent
        })
    })
}

fn run_all(template_text: &str, parameters_text: Option<&str>, rules: &Rules) {
    let template = SourceFile::new("main.json", template_text);
    let parameters = parameters_text.map(|t| SourceFile::new("params.json", t));
    for mode in [Mode::Stacks, Mode::Standard] {
        for d in lint(&LintInput {
            template: &template,
            parameters: parameters.as_ref(),
            rules,
            mode,
            rules_base: None,
        }) {
            assert!(
                d.code == RULE_CODE || d.code.starts_with("Invalid"),
                "unexpected code {}",
                d.code
            );
            assert!(
                d.code != RULE_CODE || d.line.is_some(),
                "finding without a position: {d:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_templates(t in template(), configs in config_value()) {
        let params = json!({ "parameters": { "p": { "value": "x" }, "s": { "reference": { "keyVault": { "id": "/kv" }, "secretName": "n" } } },
                             "extensionConfigs": { "k8s": configs.clone(), "other": configs } });
        run_all(&t.to_string(), Some(&params.to_string()), &Rules::default());
    }

    #[test]
    fn arbitrary_text(text in ".{0,200}", params in proptest::option::of(".{0,80}")) {
        run_all(&text, params.as_deref(), &Rules::default());
    }

    #[test]
    fn arbitrary_rules(text in ".{0,120}") {
        // A rules file either parses or gives a typed error.
        let _ = Rules::parse(&text);
    }
}

#[test]
fn deep_nesting_is_bounded() {
    let mut e = "parameters('s')".to_string();
    for _ in 0..300 {
        e = format!("if(true(), {e}, {e})");
        if e.len() > 60_000 {
            break;
        }
    }
    let mut value = json!(format!("[{e}]"));
    for _ in 0..200 {
        value = json!({ "auth": value });
    }
    let t = json!({
        "parameters": { "s": { "type": "securestring" } },
        "variables": (0..200).map(|i| (format!("v{i}"), json!(format!("[createArray(variables('v{}'), variables('v{}'))]", i + 1, i + 1)))).collect::<serde_json::Map<_, _>>(),
        "resources": [ { "type": "Microsoft.Resources/deployments", "name": "m",
            "properties": { "extensionConfigs": { "k8s": value, "x": { "a": { "value": "[variables('v0')]" } } },
                            "template": { "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0" } } } } } ]
    });
    run_all(&t.to_string(), None, &Rules::default());
}

/// A function that calls itself twice would double the work at every level: recursion is cut at the first call.
#[test]
fn recursive_functions_are_cut() {
    let t = json!({
        "languageVersion": "2.0",
        "functions": [ { "namespace": "ns", "members": { "f": {
            "parameters": [ { "name": "v", "type": "string" } ],
            "output": { "type": "string", "value": "[concat(ns.f(parameters('v')), ns.f(parameters('v')))]" } } } } ],
        "imports": { "k8s": { "provider": "Kubernetes", "version": "1.0.0",
                              "config": { "namespace": "[ns.f('x')]", "kubeConfig": "[ns.f('y')]" } } },
        "resources": {}
    });
    let started = std::time::Instant::now();
    let template = SourceFile::new("main.json", t.to_string());
    let diags = lint(&LintInput {
        template: &template,
        parameters: None,
        rules: &Rules::default(),
        mode: Mode::Stacks,
        rules_base: None,
    });
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(
        diags
            .iter()
            .any(|d| d.target == "imports.k8s.config.kubeConfig"
                && d.message.contains("calls itself")),
        "{diags:?}"
    );
}
