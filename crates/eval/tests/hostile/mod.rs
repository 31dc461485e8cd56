//! Evaluation of untrusted expression text under small budgets, shared by the `budget_properties` property test
//! and the `expr_eval` fuzz target (which includes this file by path): an environment with a few parameters,
//! variables and user functions (one of them recursing forever), and the property every evaluation must keep.

use std::rc::Rc;

use cairn_eval::{
    Budget, EvalLimits, Evaluator, Object, SimpleEnvironment, UserFunction, UserFunctionParameter,
    Value, json_size,
};

/// Small budgets, so hostile input reaches them in microseconds.
pub const LIMITS: EvalLimits = EvalLimits {
    max_value_bytes: 64 * 1024,
    max_total_bytes: 1024 * 1024,
    max_steps: 100_000,
    max_depth: 64,
};

fn function(name: &str, parameters: &[&str], output: &str) -> Rc<UserFunction> {
    let output = serde_json::Value::String(output.to_string()).to_string();
    Rc::new(UserFunction {
        namespace: "f".into(),
        name: name.into(),
        parameters: parameters
            .iter()
            .map(|p| UserFunctionParameter {
                name: (*p).into(),
                param_type: None,
            })
            .collect(),
        output_type: None,
        output: cairn_json::parse(&output).expect("a JSON string"),
    })
}

/// A fresh environment with [`LIMITS`]: parameters `s`, `n`, `a`, `o` and `big` (a 32 KiB string, half the
/// value budget), variables `v` and `list`, and user functions `f.twice(x)`, `f.fib(n)` (exponential work) and
/// `f.loop(x)` (endless recursion).
pub fn environment() -> SimpleEnvironment {
    let mut parameters = Object::new();
    parameters.insert("s", Value::from("hello, world"));
    parameters.insert("n", Value::Int(42));
    parameters.insert(
        "a",
        Value::from(vec![Value::Int(1), Value::from("two"), Value::Bool(true)]),
    );
    parameters.insert(
        "o",
        Value::from_json(&serde_json::json!({ "k": "v", "nested": { "x": [true, null, 1.5] } })),
    );
    parameters.insert("big", Value::from("x".repeat(32 * 1024)));
    let mut variables = Object::new();
    variables.insert("v", Value::from("abc"));
    variables.insert(
        "list",
        Value::from(vec![Value::Int(3), Value::Int(1), Value::Int(2)]),
    );
    SimpleEnvironment {
        parameters,
        variables,
        functions: vec![
            function(
                "twice",
                &["x"],
                "[concat(parameters('x'), parameters('x'))]",
            ),
            function(
                "fib",
                &["n"],
                "[if(lessOrEquals(parameters('n'), 1), 1, add(f.fib(sub(parameters('n'), 1)), f.fib(sub(parameters('n'), 2))))]",
            ),
            function("loop", &["x"], "[f.loop(parameters('x'))]"),
        ],
        budget: Budget::new(LIMITS),
        ..SimpleEnvironment::default()
    }
}

/// Evaluates `text` (a template string: `[expression]` or a literal) in a fresh [`environment`] and checks what
/// every evaluation must keep, whatever the input: it returns (no panic, no endless loop), a value it produces
/// fits the value budget, and the work it did stayed within the step and total budgets. A failure is fine.
pub fn check_evaluation(text: &str) {
    let env = environment();
    let result = Evaluator::new(&env).eval_string(text);
    if let Ok(value) = &result {
        assert!(
            json_size(value, LIMITS.max_value_bytes).is_some(),
            "{text:?} produced a value over maxValueBytes"
        );
        assert!(
            env.budget.total_bytes_used() <= LIMITS.max_total_bytes,
            "{text:?} succeeded after producing {} bytes",
            env.budget.total_bytes_used()
        );
        assert!(
            env.budget.steps_used() <= LIMITS.max_steps,
            "{text:?} succeeded after {} steps",
            env.budget.steps_used()
        );
    }
}
