//! Numeric functions: checked 64-bit `add`, `sub`, `mul`, `div` and `mod`, and the conversions `int` and `float`.
//! (`copyIndex` lives in core.rs; `min`/`max` with the array functions.)

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("add", 2, Some(2), add),
    FunctionDef::eager("sub", 2, Some(2), sub),
    FunctionDef::eager("mul", 2, Some(2), mul),
    FunctionDef::eager("div", 2, Some(2), div),
    FunctionDef::eager("mod", 2, Some(2), mod_),
    FunctionDef::eager("int", 1, Some(1), int),
    FunctionDef::eager("float", 1, Some(1), float),
];

/// Applies a checked integer operation to the two integer arguments; `None` from `op` is an overflow.
fn binary(args: &Args, symbol: &str, op: fn(i64, i64) -> Option<i64>) -> Result<Value, FnError> {
    let (a, b) = (args.int(0)?, args.int(1)?);
    op(a, b).map(Value::Int).ok_or_else(|| {
        FnError::msg(format!(
            "the result of {a} {symbol} {b} does not fit in a 64-bit integer."
        ))
    })
}

fn nonzero_divisor(args: &Args) -> Result<(), FnError> {
    if args.int(1)? == 0 {
        return Err(FnError::msg("attempted to divide by zero."));
    }
    Ok(())
}

fn add(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    binary(&args, "+", i64::checked_add)
}

fn sub(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    binary(&args, "-", i64::checked_sub)
}

fn mul(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    binary(&args, "*", i64::checked_mul)
}

/// Integer division truncating toward zero (C#).
fn div(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    args.int(0)?;
    nonzero_divisor(&args)?;
    binary(&args, "/", i64::checked_div)
}

/// Remainder with the sign of the dividend (C# `%`).
fn mod_(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    args.int(0)?;
    nonzero_divisor(&args)?;
    binary(&args, "%", i64::checked_rem)
}

/// `long.Parse(s, NumberStyles.Integer, InvariantCulture)`: surrounding whitespace and one leading sign allowed.
fn parse_integer(text: &str) -> Option<i64> {
    let t = text.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

/// `double.Parse(s, InvariantCulture)` (`NumberStyles.Float | AllowThousands`): whitespace, a sign, digits with
/// optional `,` group separators, a `.` fraction and an exponent. Infinity and NaN are not JSON numbers, so they
/// are rejected.
fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int_part, frac_part) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let int_ok =
        int_part.bytes().all(|b| b.is_ascii_digit() || b == b',') && !int_part.starts_with(',');
    let frac_ok = frac_part.is_none_or(|f| f.bytes().all(|b| b.is_ascii_digit()));
    let has_digits =
        int_part.bytes().any(|b| b.is_ascii_digit()) || frac_part.is_some_and(|f| !f.is_empty());
    let exp_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    if !(int_ok && frac_ok && has_digits && exp_ok) {
        return None;
    }
    let normalized: String = t.chars().filter(|c| *c != ',').collect();
    let normalized = normalized.strip_prefix('+').unwrap_or(&normalized);
    normalized.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// .NET `Convert.ToInt64(double)`: rounds half to even; out-of-range values are an error.
fn float_to_int(x: f64) -> Option<i64> {
    let rounded = x.round_ties_even();
    // i64::MAX as f64 rounds up to 2^63, which is already out of range.
    (rounded.is_finite() && rounded >= i64::MIN as f64 && rounded < i64::MAX as f64)
        .then_some(rounded as i64)
}

/// `int(value)`: an integer, a string holding an integer, or a float (rounded the way .NET's `Convert.ToInt64`
/// does, half to even; ARM converts JSON tokens with it).
fn int(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match args.get(0) {
        Some(Value::Int(i)) => Ok(Value::Int(*i)),
        Some(Value::String(s)) => parse_integer(s).map(Value::Int).ok_or_else(|| {
            FnError::msg(format!("the string '{s}' is not a valid 64-bit integer."))
        }),
        Some(Value::Float(x)) => float_to_int(*x).map(Value::Int).ok_or_else(|| {
            FnError::msg(format!("the number {x} does not fit in a 64-bit integer."))
        }),
        _ => Err(args.type_error(0, "Integer or String")),
    }
}

/// `float(value)`: an integer, float or numeric string as a double.
fn float(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match args.get(0) {
        Some(Value::Int(i)) => Ok(Value::Float(*i as f64)),
        Some(Value::Float(x)) => Ok(Value::Float(*x)),
        Some(Value::String(s)) => parse_float(s).map(Value::Float).ok_or_else(|| {
            FnError::msg(format!(
                "the string '{s}' is not a valid floating point number."
            ))
        }),
        _ => Err(args.type_error(0, "Integer, Float or String")),
    }
}

#[cfg(test)]
mod tests {
    use crate::env::SimpleEnvironment;
    use crate::functions::test_util::{check, check_err, eval, eval_in};
    use crate::value::Value;
    use proptest::prelude::*;
    use serde_json::json;

    /// Evaluates `expr` with parameters `p1`, `p2`, ... bound to `values` (how floats reach a template).
    fn eval_with(values: &[serde_json::Value], expr: &str) -> Result<Value, crate::EvalError> {
        let mut env = SimpleEnvironment::default();
        for (i, v) in values.iter().enumerate() {
            env.parameters
                .insert(format!("p{}", i + 1), Value::from(v.clone()));
        }
        eval_in(&env, expr)
    }

    #[track_caller]
    fn check_with(values: &[serde_json::Value], expr: &str, expected: serde_json::Value) {
        let result = eval_with(values, expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(
            result,
            Value::from(expected.clone()),
            "{expr} gave {:?}",
            result.to_json()
        );
    }

    #[track_caller]
    fn check_err_with(values: &[serde_json::Value], expr: &str, fragment: &str) {
        match eval_with(values, expr) {
            Ok(v) => panic!("{expr} gave {}, expected an error", v.to_json()),
            Err(e) => assert!(e.to_string().contains(fragment), "{expr}: {e}"),
        }
    }

    #[test]
    fn docs_examples() {
        // functions/numeric-{add,sub,mul,div,mod,int}.json with their default parameter values.
        check("add(5, 3)", json!(8));
        check("sub(7, 3)", json!(4));
        check("mul(mul(5, 3), 3)", json!(45));
        check("div(8, 3)", json!(2));
        check("mod(7, 3)", json!(1));
        check("int('4')", json!(4));
    }

    #[test]
    fn basic_arithmetic_evaluation_case() {
        // evaluation/Basic_arithmetic_expressions_are_evaluated_successfully.json, step by step.
        check("add(1, 3)", json!(4));
        check("mul(add(1, 3), 5)", json!(20));
        check("mod(mul(add(1, 3), 5), 7)", json!(6));
        check("div(mod(mul(add(1, 3), 5), 7), 11)", json!(0));
        check("sub(div(mod(mul(add(1, 3), 5), 7), 11), 13)", json!(-13));
    }

    #[test]
    fn pieces_of_lambda_evaluation_cases() {
        // evaluation/New_functions_are_evaluated_correctly.json: isEven(i) = equals(mod(i, 2), 0), mapValues doubles.
        check("equals(mod(0, 2), 0)", json!(true));
        check("equals(mod(1, 2), 0)", json!(false));
        check("equals(mod(2, 2), 0)", json!(true));
        check("mul(123, 2)", json!(246));
        check("mul(456, 2)", json!(912));
        // evaluation/List_comprehension_function_evaluation_works.json: mapArray, mapMultiLineArray, factorial.
        check("createArray(mul(1, 2), add(mul(1, 2), 1))", json!([2, 3]));
        check(
            "createArray(mul(3, 3), add(mul(3, 3), 1), add(mul(3, 3), 2))",
            json!([9, 10, 11]),
        );
        check("mul(mul(mul(mul(1, 2), 3), 4), 5)", json!(120));
        check("equals(0, mod(3, 2))", json!(false));
    }

    #[test]
    fn sign_rules_follow_csharp() {
        check("div(-7, 2)", json!(-3));
        check("div(7, -2)", json!(-3));
        check("mod(-7, 3)", json!(-1));
        check("mod(7, -3)", json!(1));
        check("sub(3, 5)", json!(-2));
    }

    #[test]
    fn overflow_and_division_by_zero_are_errors() {
        check_err(
            "add(9223372036854775807, 1)",
            "does not fit in a 64-bit integer",
        );
        check_err(
            "sub(-9223372036854775807, 2)",
            "does not fit in a 64-bit integer",
        );
        check_err(
            "mul(4611686018427387904, 2)",
            "does not fit in a 64-bit integer",
        );
        check_err(
            "div(-9223372036854775808, -1)",
            "does not fit in a 64-bit integer",
        );
        check_err(
            "mod(-9223372036854775808, -1)",
            "does not fit in a 64-bit integer",
        );
        check_err("div(1, 0)", "divide by zero");
        check_err("mod(1, 0)", "divide by zero");
    }

    #[test]
    fn operands_must_be_integers() {
        check_err("add('1', 2)", "position 1 must be of type 'Integer'");
        check_err_with(
            &[json!(1.5)],
            "mul(2, parameters('p1'))",
            "position 2 must be of type 'Integer'",
        );
        check_err("div('8', 0)", "position 1 must be of type 'Integer'");
        check_err("add(1)", "add");
    }

    #[test]
    fn int_conversions() {
        check("int(7)", json!(7));
        check("int(' -12 ')", json!(-12));
        check("int('+5')", json!(5));
        check("int('9223372036854775807')", json!(9223372036854775807_i64));
        check_with(&[json!(2.5)], "int(parameters('p1'))", json!(2));
        check_with(&[json!(3.5)], "int(parameters('p1'))", json!(4));
        check_with(&[json!(-2.7)], "int(parameters('p1'))", json!(-3));
        check_err("int('4.0')", "not a valid 64-bit integer");
        check_err("int('')", "not a valid 64-bit integer");
        check_err("int('9223372036854775808')", "not a valid 64-bit integer");
        check_err("int('1e3')", "not a valid 64-bit integer");
        check_err_with(
            &[json!(1e30)],
            "int(parameters('p1'))",
            "does not fit in a 64-bit integer",
        );
        check_err("int(true())", "must be of type 'Integer or String'");
    }

    #[test]
    fn float_conversions() {
        check("float(3)", json!(3.0));
        check("float('2.5')", json!(2.5));
        check("float(' -1e3 ')", json!(-1000.0));
        check("float('1,000.25')", json!(1000.25));
        check("float('.5')", json!(0.5));
        check_with(&[json!(0.25)], "float(parameters('p1'))", json!(0.25));
        assert!(matches!(eval("float(3)"), Ok(Value::Float(_))));
        check_err("float('abc')", "not a valid floating point number");
        check_err("float('1.2.3')", "not a valid floating point number");
        check_err("float('Infinity')", "not a valid floating point number");
        check_err("float('')", "not a valid floating point number");
        check_err("float(createArray())", "must be of type");
    }

    proptest! {
        #[test]
        fn checked_arithmetic_matches_i128(a in any::<i64>(), b in any::<i64>()) {
            let sum = i128::from(a) + i128::from(b);
            let product = i128::from(a) * i128::from(b);
            for (expr, exact) in [(format!("add({a}, {b})"), sum), (format!("mul({a}, {b})"), product)] {
                match i64::try_from(exact) {
                    Ok(expected) => prop_assert_eq!(eval(&expr).ok(), Some(Value::Int(expected))),
                    Err(_) => prop_assert!(eval(&expr).is_err()),
                }
            }
            if b != 0 && !(a == i64::MIN && b == -1) {
                prop_assert_eq!(eval(&format!("div({a}, {b})")).ok(), Some(Value::Int(a / b)));
                prop_assert_eq!(eval(&format!("mod({a}, {b})")).ok(), Some(Value::Int(a % b)));
            }
        }
    }
}
