//! The evaluator: walks expression trees and JSON trees, dispatching calls to the function library.

use std::rc::Rc;

use cairn_expr::{Expr, ExprKind, Span, TemplateString};
use cairn_json::{Node, NodeKind, Number};

use crate::budget::Budget;
use crate::env::{Environment, UserFunction};
use crate::error::{EvalError, EvalErrorKind, FnError, PathSegment};
use crate::functions::{self, Args, Imp};
use crate::value::{Lambda, Object, Unevaluated, Value};

/// ARM's limit on a property copy loop's count.
pub const MAX_COPY_COUNT: i64 = 800;

/// What kind of loop a `copyIndex` frame belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// Resource, module or output loop: `copyIndex()` without a name refers to it.
    Unnamed,
    /// Property or variable loop: reached by name only.
    Named,
}

#[derive(Clone, Debug)]
struct CopyFrame {
    name: String,
    index: i64,
    kind: CopyKind,
}

/// Evaluates expressions and JSON trees against an [`Environment`].
pub struct Evaluator<'e> {
    env: &'e dyn Environment,
    /// Parameters of the user-defined function being evaluated, if any.
    udf_params: Option<Vec<(String, Value)>>,
    lambda_vars: Vec<(String, Value)>,
    copy: Vec<CopyFrame>,
    /// The template string being evaluated read a secure value: its errors must not quote values.
    secure: bool,
    /// Any evaluation of this evaluator read a secure value: what it computed is secure too.
    read_secure: bool,
    /// How many template strings are being evaluated (nested ones are user function bodies).
    string_depth: usize,
}

impl<'e> Evaluator<'e> {
    pub fn new(env: &'e dyn Environment) -> Evaluator<'e> {
        Evaluator {
            env,
            udf_params: None,
            lambda_vars: Vec::new(),
            copy: Vec::new(),
            secure: false,
            read_secure: false,
            string_depth: 0,
        }
    }

    /// Records that the value being computed depends on a secure value. From here on, errors of the current
    /// template string quote no values (see [`EvalError::into_secure`]). Call it as soon as a secure value is
    /// read, before anything can fail on it.
    pub fn mark_secure(&mut self) {
        self.secure = true;
        self.read_secure = true;
    }

    /// True once any evaluation by this evaluator read a secure value: whoever keeps what it computed (a
    /// variable, a parameter's default) must treat it as secure too.
    pub fn has_read_secure(&self) -> bool {
        self.read_secure
    }

    /// Asks the environment for a runtime value, marking the evaluation secure when the answer is (`list*`).
    pub fn runtime(&mut self, call: crate::env::RuntimeCall<'_>) -> Result<Value, EvalError> {
        let out = self.env.runtime(call.clone())?;
        if self.env.runtime_is_secure(&call) {
            self.mark_secure();
        }
        Ok(out)
    }

    pub fn env(&self) -> &'e dyn Environment {
        self.env
    }

    /// The budgets this evaluation draws on (the environment's).
    pub fn budget(&self) -> &'e Budget {
        self.env.budget()
    }

    /// Runs `f` with a copy-loop frame pushed (`copyIndex` sees `index`).
    pub fn with_copy<T>(
        &mut self,
        name: &str,
        index: i64,
        kind: CopyKind,
        f: impl FnOnce(&mut Self) -> T,
    ) -> T {
        self.copy.push(CopyFrame {
            name: name.to_string(),
            index,
            kind,
        });
        let out = f(self);
        self.copy.pop();
        out
    }

    /// The value of `copyIndex(name?)` without offset.
    pub fn copy_index(&self, name: Option<&str>) -> Result<i64, FnError> {
        let frame = match name {
            Some(n) => self
                .copy
                .iter()
                .rev()
                .find(|f| f.name.eq_ignore_ascii_case(n)),
            None => self.copy.iter().rev().find(|f| f.kind == CopyKind::Unnamed),
        };
        match (frame, name) {
            (Some(f), _) => Ok(f.index),
            (None, Some(n)) => Err(FnError::msg(format!(
                "The copy loop '{n}' is not in scope here."
            ))),
            (None, None) => Err(FnError::msg(
                "The template function 'copyIndex' is not expected at this location. It can only be used in a resource, property, variable or output with a copy loop.",
            )),
        }
    }

    /// The value bound to a lambda variable.
    pub fn lambda_variable(&self, name: &str) -> Option<&Value> {
        self.lambda_vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    /// The value of a user-defined function parameter, when evaluating inside one.
    pub fn udf_parameter(&self, name: &str) -> Option<Result<Value, FnError>> {
        let params = self.udf_params.as_ref()?;
        Some(
            params
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    FnError::msg(format!(
                        "The function parameter '{name}' is not found.{}",
                        crate::suggest::did_you_mean(name, params.iter().map(|(n, _)| n.as_str()))
                    ))
                }),
        )
    }

    /// Evaluates a template string: a literal (with the `[[` escape removed) or an expression. When a runtime
    /// value is unavailable the result is an [`Value::Unevaluated`] marker holding `s`.
    pub fn eval_string(&mut self, s: &str) -> Result<Value, EvalError> {
        // Values flow only within one template string (or into the user functions it calls, whose bodies are
        // nested strings), so each top-level string starts clean and nested ones inherit what their caller read.
        if self.string_depth == 0 {
            self.secure = false;
        }
        self.string_depth += 1;
        let out = self.eval_string_inner(s);
        self.string_depth -= 1;
        let secure = self.secure;
        out.map_err(|e| e.secure_if(secure))
    }

    fn eval_string_inner(&mut self, s: &str) -> Result<Value, EvalError> {
        match cairn_expr::classify(s) {
            TemplateString::Literal(lit) => {
                self.budget().charge(lit.len())?;
                Ok(Value::String(lit.into_owned()))
            }
            TemplateString::Expression { .. } => {
                let (expr, source) = match parsed(s) {
                    Ok(Some(parsed)) => parsed,
                    Ok(None) => return Ok(Value::String(s.to_string())),
                    Err(e) => {
                        let span = e.span;
                        return Err(EvalError::new(EvalErrorKind::Syntax(e)).with_span(span));
                    }
                };
                match self.eval_expr(&expr, &source) {
                    Err(e) if e.is_unavailable() => {
                        Ok(Value::Unevaluated(Rc::new(Unevaluated { expression: s.to_string() })))
                    }
                    Ok(Value::Lambda(_)) => Err(EvalError::expression(
                        "A lambda function can only be used as an argument of map, filter, reduce, sort, toObject, mapValues or groupBy.",
                    )
                    .with_span(expr.span)),
                    other => other,
                }
            }
        }
    }

    /// Evaluates a JSON tree: strings may be expressions, object keys may be expressions, objects may hold
    /// property `copy` loops.
    pub fn eval_node(&mut self, node: &Node) -> Result<Value, EvalError> {
        self.eval_node_sized(node).map(|(value, _)| value)
    }

    /// [`Evaluator::eval_node`] with the value's size, so enclosing arrays and objects add sizes up as they are
    /// built instead of measuring their whole subtree again.
    fn eval_node_sized(&mut self, node: &Node) -> Result<(Value, usize), EvalError> {
        self.enter()?;
        let out = self.eval_node_inner(node);
        self.leave();
        // Errors raised here after a string was evaluated (a copy count, a property name) may quote its value.
        let secure = self.secure;
        out.map_err(|e| e.with_node_span(node.span).secure_if(secure))
    }

    fn eval_node_inner(&mut self, node: &Node) -> Result<(Value, usize), EvalError> {
        let budget = self.budget();
        match &node.kind {
            NodeKind::Null => Ok((Value::Null, 4)),
            NodeKind::Bool(b) => Ok((Value::Bool(*b), 5)),
            NodeKind::Number(Number::Int(i)) => Ok((Value::Int(*i), 20)),
            NodeKind::Number(Number::Float(x)) => Ok((Value::Float(*x), 24)),
            NodeKind::String(s) => {
                let value = self.eval_string(s)?;
                let size = match &value {
                    Value::String(s) => {
                        budget.check_size(s.len() + 2, "the string")?;
                        s.len() + 2
                    }
                    other => budget.produced(other, "the value")?,
                };
                Ok((value, size))
            }
            NodeKind::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut tally = budget.tally("the array");
                for (i, item) in items.iter().enumerate() {
                    let (value, size) = self
                        .eval_node_sized(item)
                        .map_err(|e| e.at(PathSegment::Index(i)))?;
                    tally
                        .add_bytes(size)
                        .map_err(|e| e.at(PathSegment::Index(i)))?;
                    out.push(value);
                }
                Ok((Value::Array(out), tally.bytes()))
            }
            NodeKind::Object(members) => {
                let mut out = Object::with_capacity(members.len());
                let mut tally = budget.tally("the object");
                for m in members {
                    if m.key.eq_ignore_ascii_case("copy")
                        && let NodeKind::Array(loops) = &m.value.kind
                    {
                        for (i, lp) in loops.iter().enumerate() {
                            let at = |e: EvalError| {
                                e.at(PathSegment::Index(i))
                                    .at(PathSegment::Key(m.key.clone()))
                            };
                            let (name, value, size) = self.property_copy(lp).map_err(at)?;
                            tally.add_bytes(name.len() + 3 + size).map_err(at)?;
                            out.insert(name, value);
                        }
                        continue;
                    }
                    let key = match cairn_expr::classify(&m.key) {
                        TemplateString::Literal(lit) => lit.into_owned(),
                        TemplateString::Expression { .. } => {
                            match self
                                .eval_string(&m.key)
                                .map_err(|e| e.with_node_span(m.key_span))?
                            {
                                Value::String(s) => s,
                                Value::Unevaluated(u) => u.expression.clone(),
                                other => {
                                    return Err(EvalError::expression(format!(
                                        "The property name expression '{}' must evaluate to a string, not {}.",
                                        m.key,
                                        other.value_type()
                                    ))
                                    .with_node_span(m.key_span));
                                }
                            }
                        }
                    };
                    // A member whose expression evaluates to null stays as null: the real engine keeps it
                    // (Bicep's EvaluationTests `Safe_dereferences_are_evaluated_successfully`).
                    let (value, size) = self
                        .eval_node_sized(&m.value)
                        .map_err(|e| e.at(PathSegment::Key(key.clone())))?;
                    tally
                        .add_bytes(key.len() + 3 + size)
                        .map_err(|e| e.at(PathSegment::Key(key.clone())))?;
                    out.insert(key, value);
                }
                Ok((Value::Object(out), tally.bytes()))
            }
        }
    }

    /// One entry of a property `copy` array: `{ name, count, input }`, as the property's name, value and size. A
    /// count known only at deployment leaves the whole property unevaluated until then.
    fn property_copy(&mut self, lp: &Node) -> Result<(String, Value, usize), EvalError> {
        let name = match lp.get_ci("name").map(|n| self.eval_node(n)).transpose()? {
            Some(Value::String(s)) => s,
            _ => {
                return Err(EvalError::expression(
                    "A property copy loop must have a string 'name'.",
                )
                .with_node_span(lp.span));
            }
        };
        let count = match lp.get_ci("count") {
            Some(c) => self
                .eval_node(c)
                .map_err(|e| e.at(PathSegment::Key("count".into())))?,
            None => {
                return Err(EvalError::expression(format!(
                    "The copy loop '{name}' must have a 'count'."
                ))
                .with_node_span(lp.span));
            }
        };
        if let Value::Unevaluated(u) = &count {
            let size = u.expression.len() + 2;
            return Ok((name, count, size));
        }
        let count = copy_count(&name, &count).map_err(|e| e.with_node_span(lp.span))?;
        let Some(input) = lp.get_ci("input") else {
            return Err(EvalError::expression(format!(
                "The copy loop '{name}' must have an 'input'."
            ))
            .with_node_span(lp.span));
        };
        let (items, size) = self.copy_items(&name, count, CopyKind::Named, input)?;
        Ok((name, Value::Array(items), size))
    }

    /// The items of a copy loop over `input` (`copyIndex(name)` from 0 to `count - 1`), with the array's size;
    /// the array is refused as soon as it grows past the value limit. Errors carry the item's index.
    pub fn copy_items(
        &mut self,
        name: &str,
        count: i64,
        kind: CopyKind,
        input: &Node,
    ) -> Result<(Vec<Value>, usize), EvalError> {
        let budget = self.budget();
        let mut items = Vec::with_capacity(usize::try_from(count).unwrap_or_default());
        let mut tally = budget.tally("the copy loop's array");
        for i in 0..count {
            let at = |e: EvalError| e.at(PathSegment::Index(i as usize));
            let (value, size) = self
                .with_copy(name, i, kind, |ev| ev.eval_node_sized(input))
                .map_err(at)?;
            tally.add_bytes(size).map_err(at)?;
            items.push(value);
        }
        Ok((items, tally.bytes()))
    }

    /// One step deeper: counts a step and a level of nesting against the budget.
    fn enter(&mut self) -> Result<(), EvalError> {
        let budget = self.budget();
        budget.step()?;
        budget.enter()
    }

    fn leave(&mut self) {
        self.budget().leave();
    }

    /// Evaluates a parsed expression. `source` is the string its spans index into.
    pub fn eval_expr(&mut self, expr: &Expr, source: &Rc<str>) -> Result<Value, EvalError> {
        self.enter()?;
        let out = self.eval_expr_inner(expr, source);
        self.leave();
        let secure = self.secure;
        out.map_err(|e| e.with_span(expr.span).secure_if(secure))
    }

    fn eval_expr_inner(&mut self, expr: &Expr, source: &Rc<str>) -> Result<Value, EvalError> {
        match &expr.kind {
            ExprKind::String(s) => {
                self.budget().charge(s.len())?;
                Ok(Value::String(s.clone()))
            }
            ExprKind::Int(i) => Ok(Value::Int(*i)),
            ExprKind::Property { target, name } => {
                let target = self.eval_expr(target, source)?;
                property(&target, &name.name).map_err(|e| e.with_span(name.span))
            }
            ExprKind::Index { target, index } => {
                let target = self.eval_expr(target, source)?;
                let index = self.eval_expr(index, source)?;
                index_value(&target, &index).map_err(|e| e.with_span(expr.span))
            }
            ExprKind::Call {
                namespace: Some(ns),
                name,
                args,
            } => {
                let Some(udf) = self.env.user_function(&ns.name, &name.name) else {
                    return Err(EvalError::new(EvalErrorKind::UnknownFunction {
                        name: format!("{}.{}", ns.name, name.name),
                        hint: String::new(),
                    })
                    .with_span(ns.span.to(name.span)));
                };
                let full_name = format!("{}.{}", ns.name, name.name);
                let values = self.eval_args(args, source, &full_name)?;
                let out = self.call_user_function(&udf, values)?;
                self.budget()
                    .produced(&out, &format!("the result of '{full_name}'"))?;
                Ok(out)
            }
            ExprKind::Call {
                namespace: None,
                name,
                args,
            } => self.call(name, args, source, expr.span),
        }
    }

    fn call(
        &mut self,
        ident: &cairn_expr::Ident,
        args: &[Expr],
        source: &Rc<str>,
        span: Span,
    ) -> Result<Value, EvalError> {
        let name = ident.name.as_str();
        let wrap = |e: FnError| match e {
            FnError::Message(message) => EvalError::new(EvalErrorKind::Function {
                name: name.to_string(),
                message,
            })
            .with_span(span),
            FnError::Eval(e) => *e,
        };
        let Some(def) = functions::lookup(name) else {
            return Err(EvalError::new(EvalErrorKind::UnknownFunction {
                name: name.to_string(),
                hint: crate::suggest::did_you_mean(name, functions::names()),
            })
            .with_span(ident.span));
        };
        if args.len() < def.min_args || def.max_args.is_some_and(|max| args.len() > max) {
            return Err(wrap(FnError::Message(arity_message(
                def.min_args,
                def.max_args,
                args.len(),
            ))));
        }
        match def.imp {
            Imp::Lazy(f) => f(self, args, source).map_err(wrap),
            Imp::Eager(f) => {
                let values = if def.passes_unevaluated {
                    self.eval_args_keeping_unknowns(args, source, def.name)?
                } else {
                    self.eval_args(args, source, def.name)?
                };
                if !def.passes_unevaluated
                    && let Some(u) = values.iter().find(|v| v.contains_unevaluated())
                {
                    let reason = match u {
                        Value::Unevaluated(u) => u.expression.clone(),
                        _ => "an argument holds a value known only at deployment".to_string(),
                    };
                    return Err(EvalError::unavailable(reason));
                }
                if functions::is_list_function(def) {
                    let call = crate::env::RuntimeCall {
                        name,
                        args: &values,
                    };
                    let out = self.runtime(call).map_err(|e| e.with_span(span))?;
                    self.budget()
                        .produced(&out, &format!("the result of '{name}'"))
                        .map_err(|e| e.with_span(span))?;
                    return Ok(out);
                }
                let out = f(self, Args::new(def.name, values)).map_err(wrap)?;
                self.budget()
                    .produced(&out, &format!("the result of '{}'", def.name))
                    .map_err(|e| e.with_span(span))?;
                Ok(out)
            }
        }
    }

    /// Evaluates a call's arguments; together they may not pass the value limit (so a call cannot gather
    /// many large values at once).
    fn eval_args(
        &mut self,
        args: &[Expr],
        source: &Rc<str>,
        function: &str,
    ) -> Result<Vec<Value>, EvalError> {
        self.eval_args_with(args, source, function, false)
    }

    /// [`Evaluator::eval_args`] for a function that only builds or picks values: an argument known only at
    /// deployment becomes an unevaluated marker of its own instead of making the whole expression unevaluated, so
    /// what is known around it stays known (`length(createArray(reference('x').id))` is 1 before `x` exists).
    fn eval_args_keeping_unknowns(
        &mut self,
        args: &[Expr],
        source: &Rc<str>,
        function: &str,
    ) -> Result<Vec<Value>, EvalError> {
        self.eval_args_with(args, source, function, true)
    }

    fn eval_args_with(
        &mut self,
        args: &[Expr],
        source: &Rc<str>,
        function: &str,
        keep_unknowns: bool,
    ) -> Result<Vec<Value>, EvalError> {
        let what = format!("the arguments of '{function}'");
        let mut tally = self.budget().tally(&what);
        let mut values = Vec::with_capacity(args.len());
        for a in args {
            let value = match self.eval_expr(a, source) {
                Err(e) if keep_unknowns && e.is_unavailable() => {
                    Value::Unevaluated(Rc::new(Unevaluated {
                        expression: format!("[{a}]"),
                    }))
                }
                other => other?,
            };
            tally.add(&value).map_err(|e| e.with_span(a.span))?;
            values.push(value);
        }
        Ok(values)
    }

    /// Calls a user-defined function with evaluated arguments.
    pub fn call_user_function(
        &mut self,
        udf: &UserFunction,
        args: Vec<Value>,
    ) -> Result<Value, EvalError> {
        let full_name = format!("{}.{}", udf.namespace, udf.name);
        if args.len() != udf.parameters.len() {
            return Err(EvalError::new(EvalErrorKind::Function {
                name: full_name,
                message: format!(
                    "expected {} argument(s) but got {}.",
                    udf.parameters.len(),
                    args.len()
                ),
            }));
        }
        let params = udf
            .parameters
            .iter()
            .map(|p| p.name.clone())
            .zip(args)
            .collect();
        let saved_params = self.udf_params.replace(params);
        let saved_lambdas = std::mem::take(&mut self.lambda_vars);
        let saved_copy = std::mem::take(&mut self.copy);
        let out = self.eval_node(&udf.output);
        self.udf_params = saved_params;
        self.lambda_vars = saved_lambdas;
        self.copy = saved_copy;
        out
    }

    /// Applies a lambda to arguments (used by map, filter, reduce, sort, ...).
    pub fn apply(&mut self, lambda: &Lambda, args: Vec<Value>) -> Result<Value, FnError> {
        let saved = self.lambda_vars.len();
        self.lambda_vars.extend(lambda.captured.iter().cloned());
        for (name, value) in lambda.params.iter().zip(args) {
            self.lambda_vars.push((name.clone(), value));
        }
        let out = self.eval_expr(&lambda.body, &lambda.source);
        self.lambda_vars.truncate(saved);
        Ok(out?)
    }

    /// Creates a lambda value from `lambda('a', 'b', body)` arguments.
    pub(crate) fn make_lambda(
        &mut self,
        args: &[Expr],
        source: &Rc<str>,
    ) -> Result<Value, FnError> {
        let (body, names) = args
            .split_last()
            .ok_or_else(|| FnError::msg("a lambda needs a body."))?;
        let mut params = Vec::with_capacity(names.len());
        for n in names {
            match &n.kind {
                ExprKind::String(s) => params.push(s.clone()),
                _ => {
                    return Err(FnError::msg(
                        "lambda parameter names must be string literals.",
                    ));
                }
            }
        }
        Ok(Value::Lambda(Rc::new(Lambda {
            params,
            body: body.clone(),
            captured: self.lambda_vars.clone(),
            source: source.clone(),
        })))
    }
}

/// Parsed template strings, per thread. Copy loops evaluate the same strings many times; parsing each once keeps
/// expansion linear in the template size. Bounded: cleared when full.
const PARSE_CACHE_LIMIT: usize = 8192;

type Parsed = (Rc<Expr>, Rc<str>);

thread_local! {
    static PARSE_CACHE: std::cell::RefCell<std::collections::HashMap<Rc<str>, Parsed>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

fn parsed(s: &str) -> Result<Option<Parsed>, cairn_expr::ExprError> {
    if let Some(hit) = PARSE_CACHE.with(|c| c.borrow().get(s).cloned()) {
        return Ok(Some(hit));
    }
    let Some(expr) = cairn_expr::parse_template_string(s)? else {
        return Ok(None);
    };
    let source: Rc<str> = Rc::from(s);
    let entry = (Rc::new(expr), source.clone());
    PARSE_CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= PARSE_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(source, entry.clone());
    });
    Ok(Some(entry))
}

fn arity_message(min: usize, max: Option<usize>, actual: usize) -> String {
    let expected = match max {
        Some(max) if max == min => format!("{min}"),
        Some(max) => format!("between {min} and {max}"),
        None => format!("at least {min}"),
    };
    format!("the function expects {expected} argument(s) but {actual} were given.")
}

/// Validates a copy loop's evaluated `count`.
pub fn copy_count(name: &str, count: &Value) -> Result<i64, EvalError> {
    let n = match count {
        Value::Int(n) => *n,
        Value::Float(x) if x.fract() == 0.0 => *x as i64,
        Value::Unevaluated(u) => return Err(EvalError::unavailable(u.expression.clone())),
        other => {
            return Err(EvalError::coded(
                "InvalidTemplate",
                format!(
                    "The copy count of '{name}' must be an integer, not {}.",
                    other.value_type()
                ),
            ));
        }
    };
    if !(0..=MAX_COPY_COUNT).contains(&n) {
        return Err(EvalError::coded(
            "InvalidCopyCount",
            format!(
                "The copy count of '{name}' is {n}; it must be between 0 and {MAX_COPY_COUNT}."
            ),
        ));
    }
    Ok(n)
}

/// `target.name`.
pub fn property(target: &Value, name: &str) -> Result<Value, EvalError> {
    match target {
        Value::Object(o) => o.get(name).cloned().ok_or_else(|| {
            let available: Vec<&str> = o.keys().map(String::as_str).collect();
            EvalError::expression(format!(
                "The language expression property '{name}' doesn't exist, available properties are '{}'.{}",
                available.join(", "),
                crate::suggest::did_you_mean(name, available.iter().copied())
            ))
        }),
        Value::Unevaluated(u) => Err(EvalError::unavailable(u.expression.clone())),
        other => Err(EvalError::expression(format!(
            "The language expression property '{name}' can't be evaluated, property name must be applied to an object, not {}.",
            other.value_type()
        ))),
    }
}

/// `target[index]`.
pub fn index_value(target: &Value, index: &Value) -> Result<Value, EvalError> {
    match (target, index) {
        (Value::Unevaluated(u), _) | (_, Value::Unevaluated(u)) => Err(EvalError::unavailable(u.expression.clone())),
        (Value::Array(items), Value::Int(i)) => usize::try_from(*i)
            .ok()
            .and_then(|i| items.get(i))
            .cloned()
            .ok_or_else(|| {
                EvalError::expression(format!(
                    "The language expression array index '{i}' is out of bounds. The array has {} element(s).",
                    items.len()
                ))
            }),
        (Value::Object(_), Value::String(key)) => property(target, key),
        (Value::Array(_), other) => Err(EvalError::expression(format!(
            "The language expression array index must be an integer, not {}.",
            other.value_type()
        ))),
        (Value::Object(_), other) => Err(EvalError::expression(format!(
            "The language expression property name must be a string, not {}.",
            other.value_type()
        ))),
        (other, _) => Err(EvalError::expression(format!(
            "The language expression can't be indexed: the value is of type {}, not Array or Object.",
            other.value_type()
        ))),
    }
}
