//! Test helpers: evaluate one expression against a small environment and compare with JSON.

use crate::env::SimpleEnvironment;
use crate::error::EvalError;
use crate::eval::Evaluator;
use crate::value::Value;

/// Evaluates `[expr]` with no parameters or variables.
pub(crate) fn eval(expr: &str) -> Result<Value, EvalError> {
    eval_in(&SimpleEnvironment::default(), expr)
}

pub(crate) fn eval_in(env: &SimpleEnvironment, expr: &str) -> Result<Value, EvalError> {
    Evaluator::new(env).eval_string(&format!("[{expr}]"))
}

/// Asserts that `expr` evaluates to `expected` (JSON equality; `1 == 1.0`).
#[track_caller]
pub(crate) fn check(expr: &str, expected: serde_json::Value) {
    match eval(expr) {
        Ok(v) => assert_eq!(
            v,
            Value::from(expected.clone()),
            "{expr} gave {:?}, expected {expected}",
            v.to_json()
        ),
        Err(e) => panic!("{expr} failed: {e}"),
    }
}

/// Asserts that `expr` fails with a message containing `fragment`.
#[track_caller]
pub(crate) fn check_err(expr: &str, fragment: &str) {
    match eval(expr) {
        Ok(v) => panic!(
            "{expr} gave {}, expected an error containing {fragment:?}",
            v.to_json()
        ),
        Err(e) => assert!(
            e.to_string().contains(fragment),
            "{expr} failed with {e:?}; expected {fragment:?}"
        ),
    }
}
