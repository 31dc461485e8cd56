//! Evaluation budgets against hostile expressions: each one fails fast with `EvaluationLimitExceeded` naming the
//! limit, instead of allocating or looping without bound.

use std::rc::Rc;
use std::time::{Duration, Instant};

use cairn_eval::{
    Budget, EvalError, EvalErrorKind, EvalLimits, Evaluator, LIMIT_EXCEEDED, Limit, Object,
    SimpleEnvironment, UserFunction, UserFunctionParameter, Value, render_path,
};

fn env_with(limits: EvalLimits) -> SimpleEnvironment {
    SimpleEnvironment {
        budget: Budget::new(limits),
        ..SimpleEnvironment::default()
    }
}

fn eval_in(env: &SimpleEnvironment, expr: &str) -> Result<Value, EvalError> {
    Evaluator::new(env).eval_string(&format!("[{expr}]"))
}

#[track_caller]
fn expect_limit(result: Result<Value, EvalError>, expected: Limit) -> EvalError {
    let error = match result {
        Ok(v) => panic!(
            "expected {expected:?} to run out, got a value of {} bytes",
            cairn_eval::json_size(&v, usize::MAX).unwrap_or_default()
        ),
        Err(e) => e,
    };
    assert_eq!(error.code(), LIMIT_EXCEEDED, "{error}");
    match &error.kind {
        EvalErrorKind::LimitExceeded { limit, .. } => assert_eq!(*limit, expected, "{error}"),
        other => panic!("expected a limit error, got {other:?}"),
    }
    assert!(
        error.to_string().contains(expected.setting()),
        "the message names the setting: {error}"
    );
    error
}

#[test]
fn doubling_a_string_39_times_fails_on_the_value_limit_without_allocating_it() {
    let env = SimpleEnvironment::default();
    let started = Instant::now();
    let error = expect_limit(
        eval_in(
            &env,
            "reduce(range(0, 39), 'a', lambda('acc', 'i', concat(lambdaVariables('acc'), lambdaVariables('acc'))))",
        ),
        Limit::ValueBytes,
    );
    assert!(
        error.to_string().contains("4194304"),
        "the default limit is ARM's 4 MB: {error}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        env.budget.total_bytes_used() < 64 * 1024 * 1024,
        "stopped near the limit, not after building the value: {} bytes",
        env.budget.total_bytes_used()
    );
}

#[test]
fn a_value_within_the_limits_still_evaluates() {
    let env = SimpleEnvironment::default();
    let v = eval_in(
        &env,
        "length(reduce(range(0, 20), 'a', lambda('acc', 'i', concat(lambdaVariables('acc'), lambdaVariables('acc')))))",
    )
    .unwrap();
    assert_eq!(v, Value::Int(1 << 20));
}

fn udf(name: &str, params: &[&str], output: &str) -> Rc<UserFunction> {
    Rc::new(UserFunction {
        namespace: "f".into(),
        name: name.into(),
        parameters: params
            .iter()
            .map(|p| UserFunctionParameter {
                name: (*p).into(),
                param_type: None,
            })
            .collect(),
        output_type: None,
        output: cairn_json::parse(&serde_json::to_string(output).unwrap()).unwrap(),
    })
}

#[test]
fn unbounded_recursion_through_user_functions_fails_on_the_depth_limit() {
    let env = SimpleEnvironment {
        functions: vec![udf("loop", &["x"], "[f.loop(parameters('x'))]")],
        ..SimpleEnvironment::default()
    };
    expect_limit(eval_in(&env, "f.loop(1)"), Limit::Depth);
}

#[test]
fn exponential_work_through_user_functions_fails_on_the_step_limit() {
    // f.fib(n) calls itself twice per level: tens of thousands of calls, but only 20 levels deep.
    let env = SimpleEnvironment {
        functions: vec![udf(
            "fib",
            &["n"],
            "[if(lessOrEquals(parameters('n'), 1), 1, add(f.fib(sub(parameters('n'), 1)), f.fib(sub(parameters('n'), 2))))]",
        )],
        budget: Budget::new(EvalLimits {
            max_steps: 100_000,
            ..EvalLimits::default()
        }),
        ..SimpleEnvironment::default()
    };
    let started = Instant::now();
    expect_limit(eval_in(&env, "f.fib(20)"), Limit::Steps);
    assert!(started.elapsed() < Duration::from_secs(10));
    let unlimited = SimpleEnvironment {
        functions: env.functions.clone(),
        ..SimpleEnvironment::default()
    };
    assert_eq!(eval_in(&unlimited, "f.fib(10)").unwrap(), Value::Int(89));
}

#[test]
fn a_huge_range_mapped_to_ranges_fails_as_the_array_grows() {
    let env = SimpleEnvironment::default();
    expect_limit(
        eval_in(&env, "map(range(0, 10000), lambda('i', range(0, 10000)))"),
        Limit::ValueBytes,
    );
}

#[test]
fn json_text_that_parses_to_a_larger_value_is_refused() {
    // Each `1e1` is 3 bytes of text but a double: the parsed array outgrows the text.
    let env = env_with(EvalLimits {
        max_value_bytes: 64 * 1024,
        ..EvalLimits::default()
    });
    let text = format!("[{}1]", "1e1,".repeat(10_000));
    let error = expect_limit(
        Evaluator::new(&env).eval_string(&format!("[json('{text}')]")),
        Limit::ValueBytes,
    );
    assert!(error.to_string().contains("'json'"), "{error}");
}

fn with_big_parameter(bytes: usize) -> SimpleEnvironment {
    let mut parameters = Object::new();
    parameters.insert("big", Value::from("x".repeat(bytes)));
    SimpleEnvironment {
        parameters,
        ..SimpleEnvironment::default()
    }
}

#[test]
fn many_large_arguments_to_one_call_are_refused_before_the_call() {
    let env = with_big_parameter(1024 * 1024);
    let p = "parameters('big')";
    let error = expect_limit(
        eval_in(
            &env,
            &format!("length(createArray({p}, {p}, {p}, {p}, {p}))"),
        ),
        Limit::ValueBytes,
    );
    assert!(
        error.to_string().contains("arguments of 'createArray'"),
        "{error}"
    );
    assert_eq!(
        eval_in(&env, &format!("length(concat({p}, {p}))")).unwrap(),
        Value::Int(2 * 1024 * 1024)
    );
}

#[test]
fn format_repeating_a_large_argument_stops_at_the_limit() {
    let env = with_big_parameter(1024 * 1024);
    expect_limit(
        eval_in(&env, "format('{0}{0}{0}{0}{0}', parameters('big'))"),
        Limit::ValueBytes,
    );
}

#[test]
fn replace_and_pad_left_check_the_size_before_building() {
    let env = with_big_parameter(1024 * 1024);
    expect_limit(
        eval_in(&env, "replace(parameters('big'), 'x', 'xxxxxx')"),
        Limit::ValueBytes,
    );
    expect_limit(eval_in(&env, "padLeft('a', 2147483647)"), Limit::ValueBytes);
}

#[test]
fn values_thrown_away_still_count_towards_the_total() {
    let env = env_with(EvalLimits {
        max_total_bytes: 16 * 1024 * 1024,
        ..EvalLimits::default()
    });
    let error = expect_limit(
        eval_in(
            &env,
            "reduce(range(0, 10000), 0, lambda('acc', 'i', length(padLeft('', 1000000))))",
        ),
        Limit::TotalBytes,
    );
    assert!(error.to_string().contains("16777216"), "{error}");
    assert_eq!(
        EvalLimits::default().max_total_bytes,
        256 * 1024 * 1024,
        "the documented default"
    );
}

#[test]
fn a_json_tree_reports_the_path_of_the_value_that_ran_out() {
    let env = SimpleEnvironment::default();
    let node = cairn_json::parse(r#"{"a": {"b": ["x", "[padLeft('', 5000000)]"]}}"#).unwrap();
    let error = Evaluator::new(&env).eval_node(&node).unwrap_err();
    assert_eq!(error.code(), LIMIT_EXCEEDED);
    assert_eq!(render_path(&error.path), "a.b[1]");
}

#[test]
fn an_array_of_large_values_is_refused_as_it_grows() {
    let env = with_big_parameter(1024 * 1024);
    let items = vec!["[parameters('big')]"; 8];
    let node = cairn_json::parse(&serde_json::json!({ "list": items }).to_string()).unwrap();
    let error = Evaluator::new(&env).eval_node(&node).unwrap_err();
    assert_eq!(error.code(), LIMIT_EXCEEDED, "{error}");
    assert_eq!(render_path(&error.path), "list[3]");
}
