//! Secure values never show in evaluation errors: every built-in function is called with a secure canary in each
//! argument position and several shapes, and no error text may hold the canary in any form.

use std::rc::Rc;

use cairn_eval::{
    Budget, DeploymentFacts, Environment, EvalError, Evaluator, Object, RuntimeCall,
    SimpleEnvironment, UserFunction, UserFunctionParameter, Value, functions,
};

/// The secret. Mixed case and digits, so upper, lower and encoded forms all differ from it.
const CANARY: &str = "CANARYc4n4ry";
/// A secret that reads as a number, for functions that parse integers.
const INT_CANARY: &str = "7391846205";
const INT_CANARY_VALUE: i64 = 7_391_846_205;

/// Expressions that read a secure value, in the shapes a function may receive it.
const SECURE_SHAPES: &[&str] = &[
    "parameters('sec')",
    "parameters('secInt')",
    "parameters('secObj')",
    "parameters('secArr')",
    "parameters('secNum')",
    "parameters('secJson')",
    "variables('secVar')",
    "listSecrets('vault', '2024-01-01')",
    "listSecrets('vault', '2024-01-01').value",
    "listKeys('vault', '2024-01-01').keys",
    "toUpper(parameters('sec'))",
    "base64(parameters('sec'))",
    "concat('x', parameters('sec'))",
    "skip(parameters('sec'), 1)",
];

/// Plain values for the other argument positions: enough kinds that most functions get past their type checks
/// and reach the secret.
const FILLERS: &[&str] = &[
    "'x'",
    "1",
    "'P1D'",
    "createObject('k', 'v')",
    "createArray('a', 1)",
    "lambda('a', int(lambdaVariables('a')))",
    "lambda('a', 'b', int(concat(lambdaVariables('a'), lambdaVariables('b'))))",
];

/// Hand-written cases beyond single calls: property and index access, lambdas and user functions over secrets.
const EXTRA_CASES: &[&str] = &[
    "parameters('secObj')['missing']",
    "parameters('secObj').missing",
    "parameters('secObj').value.missing",
    "parameters('secObj')[5]",
    "parameters('sec')[5]",
    "parameters('sec').missing",
    "parameters('secArr')[7]",
    "parameters('secArr')['x']",
    "parameters('secArr')[0].missing",
    "createObject('a', 1)[parameters('sec')]",
    "createObject('a', 1)[parameters('secObj').value]",
    "createArray(1)[parameters('sec')]",
    "int(toUpper(parameters('sec')))",
    "int(toLower(parameters('sec')))",
    "int(base64(parameters('sec')))",
    "int(concat('x', base64(parameters('sec'))))",
    "int(string(parameters('secObj')))",
    "int(parameters('secObj').value)",
    "json(concat('{', parameters('sec')))",
    "createObject(parameters('sec'), 1, parameters('sec'), 2)",
    "dateTimeAdd(parameters('sec'), 'P1D')",
    "dateTimeAdd('2020-01-01', parameters('sec'))",
    "dateTimeToEpoch(parameters('sec'))",
    "parseCidr(parameters('sec'))",
    "float(parameters('sec'))",
    "bool(parameters('sec'))",
    "map(createArray(parameters('sec')), lambda('a', int(lambdaVariables('a'))))",
    "map(parameters('secArr'), lambda('a', lambdaVariables('a').missing))",
    "reduce(parameters('secArr'), '', lambda('acc', 'a', int(lambdaVariables('a'))))",
    "toObject(parameters('secArr'), lambda('a', int(lambdaVariables('a'))))",
    "f.toInt(parameters('sec'))",
    "f.toInt(base64(parameters('sec')))",
    "f.pick(parameters('secObj'))",
    "fail(parameters('sec'))",
    "fail(concat('boom: ', parameters('sec')))",
    "fail(parameters('secObj'))",
    "variables('secVar')[3]",
    "int(variables('secVar'))",
    "int(listSecrets('vault', '2024-01-01').value)",
    "listSecrets('vault', '2024-01-01').missing",
    "listSecrets('vault', '2024-01-01')['missing']",
    "listKeys('vault', '2024-01-01').keys[9]",
    "range(parameters('secInt'), 1)",
    "string(parameters('secInt'))[99]",
    "padLeft(parameters('sec'), 99999999, 'x')",
    "substring(parameters('sec'), 20, 1)",
    "format('{0} {1', parameters('sec'))",
    "format(parameters('sec'), 1)",
    "uri(parameters('sec'), 'x')",
    "uriComponentToString(concat('%', parameters('sec')))",
    "base64ToString(parameters('sec'))",
    "dataUriToString(parameters('sec'))",
    "cidrSubnet(parameters('sec'), 24, 0)",
    "cidrHost(parameters('sec'), 1)",
    "dateTimeFromEpoch(parameters('secInt'))",
    "utcNow(parameters('sec'))",
    "guid(parameters('secObj'))",
    "pickZones(parameters('sec'), 'x', 'y')",
];

/// An environment whose secure parameters, variable and `list*` answers all hold the canary.
struct CanaryEnv {
    inner: SimpleEnvironment,
}

fn canary_object() -> Value {
    Value::from(serde_json::json!({
        "value": CANARY,
        "nested": {"deep": CANARY, "n": INT_CANARY_VALUE},
        "list": [CANARY, INT_CANARY_VALUE],
    }))
}

impl CanaryEnv {
    fn new() -> CanaryEnv {
        let mut parameters = Object::new();
        parameters.insert("sec", Value::from(CANARY));
        parameters.insert("secInt", Value::from(INT_CANARY));
        parameters.insert("secObj", canary_object());
        parameters.insert(
            "secArr",
            Value::from(serde_json::json!([CANARY, {"v": CANARY}, INT_CANARY_VALUE])),
        );
        parameters.insert("secNum", Value::Int(INT_CANARY_VALUE));
        parameters.insert(
            "secJson",
            Value::from(["{\"a\": \"", CANARY, "\", \"b\": [1, 2"].concat()),
        );
        parameters.insert("plain", Value::from("plain"));
        let mut variables = Object::new();
        variables.insert("secVar", Value::from(CANARY));
        CanaryEnv {
            inner: SimpleEnvironment {
                parameters,
                variables,
                functions: vec![
                    udf("toInt", "[int(parameters('x'))]"),
                    udf("pick", "[parameters('x').missing]"),
                ],
                facts: DeploymentFacts {
                    utc_now: "2024-01-02T03:04:05Z".into(),
                    ..DeploymentFacts::default()
                },
                ..SimpleEnvironment::default()
            },
        }
    }
}

fn udf(name: &str, output: &str) -> Rc<UserFunction> {
    Rc::new(UserFunction {
        namespace: "f".into(),
        name: name.into(),
        parameters: vec![UserFunctionParameter {
            name: "x".into(),
            param_type: None,
        }],
        output_type: None,
        output: cairn_json::parse(&serde_json::to_string(output).unwrap()).unwrap(),
    })
}

impl Environment for CanaryEnv {
    fn parameter(&self, name: &str) -> Result<Value, EvalError> {
        self.inner.parameter(name)
    }
    fn variable(&self, name: &str) -> Result<Value, EvalError> {
        self.inner.variable(name)
    }
    fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>> {
        self.inner.user_function(namespace, name)
    }
    fn facts(&self) -> &DeploymentFacts {
        self.inner.facts()
    }
    fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
        if call.name.to_ascii_lowercase().starts_with("list") {
            return Ok(Value::from(serde_json::json!({
                "value": CANARY,
                "keys": [{"value": CANARY}, CANARY],
            })));
        }
        self.inner.runtime(call)
    }
    fn new_guid(&self) -> String {
        self.inner.new_guid()
    }
    fn budget(&self) -> &Budget {
        self.inner.budget()
    }
    fn parameter_is_secure(&self, name: &str) -> bool {
        !name.eq_ignore_ascii_case("plain")
    }
    fn variable_is_secure(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("secVar")
    }
}

/// The canary's forms that must not show: as is, upper and lower case, base64 at each byte alignment.
fn forbidden() -> Vec<String> {
    let mut out = vec![
        CANARY.to_string(),
        CANARY.to_ascii_uppercase(),
        CANARY.to_ascii_lowercase(),
        INT_CANARY.to_string(),
    ];
    for pad in 0..3 {
        let text = format!("{}{CANARY}", "x".repeat(pad));
        let encoded = data_encoding::BASE64.encode(text.as_bytes());
        // Skip the group that mixes in the padding bytes and the group that holds the end (its padding depends
        // on what follows in a longer string).
        let start = if pad == 0 { 0 } else { 4 };
        let end = encoded.len() - 4;
        out.push(encoded[start..end].to_string());
    }
    out
}

/// Evaluates `expr`; an error must not hold any form of the canary. Returns a description of a leak.
fn leak(expr: &str, forbidden: &[String]) -> Option<String> {
    let env = CanaryEnv::new();
    let error = Evaluator::new(&env)
        .eval_string(&format!("[{expr}]"))
        .err()?;
    let texts = [
        error.to_string(),
        format!("{error:?}"),
        error.kind.to_string(),
        format!("{:?}", error.kind),
    ];
    let found = forbidden
        .iter()
        .find(|f| texts.iter().any(|t| t.contains(f.as_str())))?;
    Some(format!("{expr}\n    shows {found:?}: {error}"))
}

/// Every call of `name` with the secret in one position and fillers elsewhere, for a few argument counts.
fn calls_of(name: &str) -> Vec<String> {
    let def = functions::lookup(name).expect("a listed function can be looked up");
    let max = def
        .max_args
        .unwrap_or(def.min_args + 3)
        .min(def.min_args + 3);
    let mut calls = Vec::new();
    for count in def.min_args.max(1)..=max.max(1) {
        for position in 0..count {
            for secret in SECURE_SHAPES {
                for filler in FILLERS {
                    let args: Vec<&str> = (0..count)
                        .map(|i| if i == position { *secret } else { *filler })
                        .collect();
                    calls.push(format!("{name}({})", args.join(", ")));
                }
            }
        }
    }
    calls
}

#[test]
fn no_function_error_shows_a_secure_value() {
    let forbidden = forbidden();
    let mut names = functions::names();
    // The catch-all `list*` family and a few runtime names are answered by the environment.
    names.push("listSecrets");
    let mut leaks = Vec::new();
    let mut errors = 0usize;
    let mut total = 0usize;
    for name in &names {
        for call in calls_of(name) {
            total += 1;
            if let Some(l) = leak(&call, &forbidden) {
                leaks.push(l);
            }
            let env = CanaryEnv::new();
            if Evaluator::new(&env)
                .eval_string(&format!("[{call}]"))
                .is_err()
            {
                errors += 1;
            }
        }
    }
    // The table must reach the failure paths, or the test proves nothing.
    assert!(errors > total / 4, "only {errors} of {total} calls failed");
    assert!(
        leaks.is_empty(),
        "{} of {total} calls leaked the secret, for example:\n{}",
        leaks.len(),
        leaks
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn no_access_or_composed_error_shows_a_secure_value() {
    let forbidden = forbidden();
    let mut failed = 0;
    let leaks: Vec<String> = EXTRA_CASES
        .iter()
        .filter_map(|expr| {
            let env = CanaryEnv::new();
            if Evaluator::new(&env)
                .eval_string(&format!("[{expr}]"))
                .is_err()
            {
                failed += 1;
            }
            leak(expr, &forbidden)
        })
        .collect();
    assert!(
        failed * 10 >= EXTRA_CASES.len() * 8,
        "only {failed} of {} cases failed",
        EXTRA_CASES.len()
    );
    assert!(leaks.is_empty(), "leaks:\n{}", leaks.join("\n"));
}

#[test]
fn secure_errors_keep_their_position_and_say_so() {
    let env = CanaryEnv::new();
    let error = Evaluator::new(&env)
        .eval_string("[int(parameters('sec'))]")
        .unwrap_err();
    assert!(error.secure, "{error:?}");
    assert!(error.span.is_some());
    assert_eq!(error.code(), "InvalidTemplate");
    assert!(error.to_string().contains("'int'"), "{error}");
    assert!(error.to_string().contains("secure"), "{error}");
    // A budget error stays a budget error (callers stop on it), without the size computed from the secret.
    let error = Evaluator::new(&env)
        .eval_string("[padLeft('x', parameters('secNum'))]")
        .unwrap_err();
    assert!(error.secure && error.is_limit(), "{error:?}");
}

#[test]
fn errors_without_a_secure_value_keep_their_detail() {
    let env = CanaryEnv::new();
    let error = Evaluator::new(&env)
        .eval_string("[int(parameters('plain'))]")
        .unwrap_err();
    assert!(!error.secure);
    assert!(error.to_string().contains("plain"), "{error}");
    // A secret read by another template string of the same evaluator does not mask this one.
    let mut ev = Evaluator::new(&env);
    let _ = ev.eval_string("[parameters('sec')]").unwrap();
    let error = ev.eval_string("[int('nope')]").unwrap_err();
    assert!(!error.secure);
    assert!(error.to_string().contains("nope"), "{error}");
}
