//! Core functions: template symbols (`parameters`, `variables`, `copyIndex`), lazy logic (`if`, `and`, `or`,
//! `coalesce`), lambdas, `fail`, and the literal functions `true`, `false`, `null`.

use std::rc::Rc;

use cairn_expr::Expr;

use super::{Args, FunctionDef};
use crate::error::{EvalError, FnError};
use crate::eval::Evaluator;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("parameters", 1, Some(1), parameters),
    FunctionDef::eager("variables", 1, Some(1), variables),
    FunctionDef::eager("copyIndex", 0, Some(2), copy_index),
    FunctionDef::lazy("if", 3, Some(3), if_),
    FunctionDef::lazy("and", 1, None, and),
    FunctionDef::lazy("or", 1, None, or),
    FunctionDef::eager("not", 1, Some(1), not),
    FunctionDef::lazy("coalesce", 1, None, coalesce),
    FunctionDef::eager("true", 0, Some(0), |_, _| Ok(Value::Bool(true))),
    FunctionDef::eager("false", 0, Some(0), |_, _| Ok(Value::Bool(false))),
    FunctionDef::eager("null", 0, Some(0), |_, _| Ok(Value::Null)),
    FunctionDef::eager("bool", 1, Some(1), bool_),
    FunctionDef::lazy("lambda", 1, None, lambda),
    FunctionDef::eager("lambdaVariables", 1, Some(1), lambda_variables).passes_unevaluated(),
    FunctionDef::eager("fail", 1, Some(1), fail),
];

fn parameters(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let name = args.string(0)?;
    // A user function's parameter is secure when its argument was: the caller's evaluation already knows.
    if let Some(v) = ev.udf_parameter(name) {
        return v;
    }
    let value = ev.env().parameter(name)?;
    if ev.env().parameter_is_secure(name) {
        ev.mark_secure();
    }
    Ok(value)
}

fn variables(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let name = args.string(0)?;
    let value = ev.env().variable(name)?;
    if ev.env().variable_is_secure(name) {
        ev.mark_secure();
    }
    Ok(value)
}

fn copy_index(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let (name, offset) = match (args.get(0), args.get(1)) {
        (None, _) => (None, 0),
        (Some(Value::Int(offset)), None) => (None, *offset),
        (Some(Value::String(name)), None) => (Some(name.as_str()), 0),
        (Some(Value::String(name)), Some(Value::Int(offset))) => (Some(name.as_str()), *offset),
        (Some(Value::String(_)), Some(_)) => return Err(args.type_error(1, "Integer")),
        _ => return Err(args.type_error(0, "String")),
    };
    let index = ev.copy_index(name)?;
    index
        .checked_add(offset)
        .map(Value::Int)
        .ok_or_else(|| FnError::msg("the copy index overflows a 64-bit integer."))
}

/// Evaluates an argument of a lazy function, treating an unevaluated marker as "not available yet".
fn eval_arg(ev: &mut Evaluator<'_>, arg: &Expr, source: &Rc<str>) -> Result<Value, FnError> {
    match ev.eval_expr(arg, source)? {
        Value::Unevaluated(u) => Err(FnError::from(EvalError::unavailable(u.expression.clone()))),
        v => Ok(v),
    }
}

fn eval_bool(
    ev: &mut Evaluator<'_>,
    arg: &Expr,
    source: &Rc<str>,
    position: usize,
) -> Result<bool, FnError> {
    match eval_arg(ev, arg, source)? {
        Value::Bool(b) => Ok(b),
        other => Err(FnError::msg(format!(
            "the argument at position {position} must be of type 'Boolean', but the provided value is of type '{}'.",
            other.value_type()
        ))),
    }
}

fn if_(ev: &mut Evaluator<'_>, args: &[Expr], source: &Rc<str>) -> Result<Value, FnError> {
    let branch = if eval_bool(ev, &args[0], source, 1)? {
        &args[1]
    } else {
        &args[2]
    };
    Ok(ev.eval_expr(branch, source)?)
}

fn and(ev: &mut Evaluator<'_>, args: &[Expr], source: &Rc<str>) -> Result<Value, FnError> {
    for (i, a) in args.iter().enumerate() {
        if !eval_bool(ev, a, source, i + 1)? {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn or(ev: &mut Evaluator<'_>, args: &[Expr], source: &Rc<str>) -> Result<Value, FnError> {
    for (i, a) in args.iter().enumerate() {
        if eval_bool(ev, a, source, i + 1)? {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

fn not(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::Bool(!args.bool(0)?))
}

fn coalesce(ev: &mut Evaluator<'_>, args: &[Expr], source: &Rc<str>) -> Result<Value, FnError> {
    for a in args {
        let v = eval_arg(ev, a, source)?;
        if !v.is_null() {
            return Ok(v);
        }
    }
    Ok(Value::Null)
}

fn bool_(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match &args.as_slice()[0] {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::Int(i) => Ok(Value::Bool(*i != 0)),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(Value::Bool(true)),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(Value::Bool(false)),
        Value::String(s) => Err(FnError::msg(format!(
            "the string '{s}' is not a valid boolean."
        ))),
        _ => Err(args.type_error(0, "String, Integer or Boolean")),
    }
}

fn lambda(ev: &mut Evaluator<'_>, args: &[Expr], source: &Rc<str>) -> Result<Value, FnError> {
    ev.make_lambda(args, source)
}

fn lambda_variables(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let name = args.string(0)?;
    ev.lambda_variable(name)
        .cloned()
        .ok_or_else(|| FnError::msg(format!("the lambda variable '{name}' is not in scope.")))
}

fn fail(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let message = match args.get(0) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_json().to_string(),
        None => String::new(),
    };
    Err(FnError::coded("DeploymentFailed", message))
}

#[cfg(test)]
mod tests {
    use crate::functions::test_util::{check, check_err};
    use serde_json::json;

    #[test]
    fn literals() {
        check("true()", json!(true));
        check("false()", json!(false));
        check("null()", json!(null));
    }

    #[test]
    fn laziness() {
        check("if(true(), 'a', fail('never'))", json!("a"));
        check("and(false(), fail('never'))", json!(false));
        check("or(true(), fail('never'))", json!(true));
        check("coalesce(null(), 2, fail('never'))", json!(2));
        check_err("if('x', 1, 2)", "Boolean");
    }

    #[test]
    fn logic() {
        check("not(false())", json!(true));
        check("and(true(), true(), false())", json!(false));
        check("bool('TRUE')", json!(true));
        check("bool(0)", json!(false));
        check_err("fail('boom')", "boom");
    }

    #[test]
    fn unknown_and_arity() {
        check_err("nope()", "'nope' is not valid");
        check_err("not()", "expects 1 argument");
        check_err("copyIndex()", "copyIndex");
    }
}
