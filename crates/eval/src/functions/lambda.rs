//! Lambda functions: `filter`, `map`, `reduce`, `sort`, `toObject`, `mapValues`, `groupBy`. (`lambda` and
//! `lambdaVariables` live in core.) Values pass through unevaluated markers; a lambda whose result depends on
//! one makes the whole call unavailable.

use std::ops::RangeInclusive;
use std::rc::Rc;

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Lambda, Object, Value};

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("filter", 2, Some(2), filter).passes_unevaluated(),
    FunctionDef::eager("map", 2, Some(2), map).passes_unevaluated(),
    FunctionDef::eager("reduce", 3, Some(3), reduce).passes_unevaluated(),
    FunctionDef::eager("sort", 2, Some(2), sort).passes_unevaluated(),
    FunctionDef::eager("toObject", 2, Some(3), to_object).passes_unevaluated(),
    FunctionDef::eager("mapValues", 2, Some(2), map_values).passes_unevaluated(),
    FunctionDef::eager("groupBy", 2, Some(3), group_by).passes_unevaluated(),
];

/// Takes argument `i` as the array to iterate.
fn input_array(args: &mut Args, i: usize) -> Result<Vec<Value>, FnError> {
    match args.take(i) {
        Value::Array(items) => Ok(items),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(FnError::msg(format!(
            "the argument at position {} must be of type 'Array', but the provided value is of type '{}'.",
            i + 1,
            other.value_type()
        ))),
    }
}

/// Argument `i` as a lambda with a parameter count in `allowed`.
fn lambda_arg(
    args: &Args,
    i: usize,
    allowed: RangeInclusive<usize>,
) -> Result<Rc<Lambda>, FnError> {
    let lambda = args.lambda(i)?;
    let n = lambda.params.len();
    if !allowed.contains(&n) {
        let expected = if allowed.start() == allowed.end() {
            allowed.start().to_string()
        } else {
            format!("{} or {}", allowed.start(), allowed.end())
        };
        return Err(FnError::msg(format!(
            "the lambda at position {} must have {expected} parameter(s), but it has {n}.",
            i + 1
        )));
    }
    Ok(lambda)
}

fn index_value(i: usize) -> Value {
    Value::Int(i64::try_from(i).unwrap_or(i64::MAX))
}

/// A lambda result that must be a boolean (predicates, sort order).
fn expect_bool(result: Value) -> Result<bool, FnError> {
    match result {
        Value::Bool(b) => Ok(b),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(FnError::msg(format!(
            "the lambda must return a value of type 'Boolean', but returned a value of type '{}'.",
            other.value_type()
        ))),
    }
}

/// A lambda result used as an object key.
fn expect_key(result: Value) -> Result<String, FnError> {
    match result {
        Value::String(s) => Ok(s),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(FnError::msg(format!(
            "the key lambda must return a value of type 'String', but returned a value of type '{}'.",
            other.value_type()
        ))),
    }
}

/// `filter(array, lambda(item[, index]))`: the items the predicate accepts, in order.
fn filter(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let predicate = lambda_arg(&args, 1, 1..=2)?;
    let items = input_array(&mut args, 0)?;
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if expect_bool(ev.apply(&predicate, vec![item.clone(), index_value(i)])?)? {
            out.push(item);
        }
    }
    Ok(Value::Array(out))
}

/// `map(array, lambda(item[, index]))`.
fn map(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let mapper = lambda_arg(&args, 1, 1..=2)?;
    let items = input_array(&mut args, 0)?;
    let mut out = Vec::with_capacity(items.len());
    let mut tally = ev.budget().tally("the result of 'map'");
    for (i, item) in items.into_iter().enumerate() {
        let mapped = ev.apply(&mapper, vec![item, index_value(i)])?;
        tally.add(&mapped)?;
        out.push(mapped);
    }
    Ok(Value::Array(out))
}

/// `reduce(array, initial, lambda(accumulator, item[, index]))`.
fn reduce(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let reducer = lambda_arg(&args, 2, 2..=3)?;
    let items = input_array(&mut args, 0)?;
    let mut acc = args.take(1);
    for (i, item) in items.into_iter().enumerate() {
        acc = ev.apply(&reducer, vec![acc, item, index_value(i)])?;
    }
    Ok(acc)
}

/// `sort(array, lambda(a, b))`: the lambda answers "does a come before b". A stable merge sort: it never panics
/// or loops on an inconsistent lambda, and calls it O(n log n) times.
fn sort(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let before = lambda_arg(&args, 1, 2..=2)?;
    let items = input_array(&mut args, 0)?;
    Ok(Value::Array(merge_sort(ev, &before, items)?))
}

fn merge_sort(
    ev: &mut Evaluator<'_>,
    before: &Lambda,
    mut items: Vec<Value>,
) -> Result<Vec<Value>, FnError> {
    if items.len() <= 1 {
        return Ok(items);
    }
    let right = items.split_off(items.len() / 2);
    let left = merge_sort(ev, before, items)?;
    let right = merge_sort(ev, before, right)?;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        // The right element jumps ahead only when the lambda puts it strictly first: "r before l" and not also
        // "l before r". A non-strict lambda (`lessOrEquals`) then keeps equal elements in order too.
        let right_first = expect_bool(ev.apply(before, vec![r.clone(), l.clone()])?)?
            && !expect_bool(ev.apply(before, vec![l.clone(), r.clone()])?)?;
        let next = if right_first {
            right.next()
        } else {
            left.next()
        };
        out.extend(next);
    }
    out.extend(left);
    out.extend(right);
    Ok(out)
}

/// `toObject(array, keyLambda[, valueLambda])`: keys must be strings; the value is the item itself without a
/// value lambda. A repeated key keeps its first position and takes the later value (last wins).
fn to_object(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let key_of = lambda_arg(&args, 1, 1..=1)?;
    let value_of = if args.len() > 2 {
        Some(lambda_arg(&args, 2, 1..=1)?)
    } else {
        None
    };
    let items = input_array(&mut args, 0)?;
    let mut out = Object::with_capacity(items.len());
    let mut tally = ev.budget().tally("the result of 'toObject'");
    for item in items {
        let key = expect_key(ev.apply(&key_of, vec![item.clone()])?)?;
        let value = match &value_of {
            Some(f) => ev.apply(f, vec![item])?,
            None => item,
        };
        tally.add_member(&key, &value)?;
        out.insert(key, value);
    }
    Ok(Value::Object(out))
}

/// `mapValues(object, lambda(value))`: same keys, mapped values.
fn map_values(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let mapper = lambda_arg(&args, 1, 1..=1)?;
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
    let mut out = Object::with_capacity(object.len());
    let mut tally = ev.budget().tally("the result of 'mapValues'");
    for (key, value) in object {
        let mapped = ev.apply(&mapper, vec![value])?;
        tally.add_member(&key, &mapped)?;
        out.insert(key, mapped);
    }
    Ok(Value::Object(out))
}

/// `groupBy(array, keyLambda[, valueLambda])`: `{key: [items with that key]}`, keys in first-seen order and
/// matched as object keys are (case-insensitively, first spelling kept).
fn group_by(ev: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let key_of = lambda_arg(&args, 1, 1..=1)?;
    let value_of = if args.len() > 2 {
        Some(lambda_arg(&args, 2, 1..=1)?)
    } else {
        None
    };
    let items = input_array(&mut args, 0)?;
    let mut out = Object::new();
    let mut tally = ev.budget().tally("the result of 'groupBy'");
    for item in items {
        let key = expect_key(ev.apply(&key_of, vec![item.clone()])?)?;
        let value = match &value_of {
            Some(f) => ev.apply(f, vec![item])?,
            None => item,
        };
        tally.add_member(&key, &value)?;
        match out.get_mut(&key) {
            Some(Value::Array(group)) => group.push(value),
            _ => out.insert(key, Value::Array(vec![value])),
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use crate::env::{SimpleEnvironment, UserFunction, UserFunctionParameter};
    use crate::functions::test_util::{check_err, eval, eval_in};
    use crate::value::{Unevaluated, Value};

    const DOGS: &str = r#"[
        {"name": "Evie", "age": 5, "interests": ["Ball", "Frisbee"]},
        {"name": "Casper", "age": 3, "interests": ["Other dogs"]},
        {"name": "Indy", "age": 2, "interests": ["Butter"]},
        {"name": "Kira", "age": 8, "interests": ["Rubs"]}
    ]"#;

    /// The user functions of the Bicep evaluation tests (New_functions..., Functions_are_evaluated_correctly):
    /// name, parameters, output expression.
    const USER_FUNCTIONS: &[(&str, &[&str], &str)] = &[
        ("isEven", &["i"], "[equals(mod(parameters('i'), 2), 0)]"),
        (
            "joinWithSpace",
            &["values"],
            "[join(parameters('values'), ' ')]",
        ),
        (
            "greet",
            &["names"],
            "[format('Hi, {0}!', __bicep.joinWithSpace(parameters('names')))]",
        ),
        (
            "replaceMultiple",
            &["value", "input"],
            "[reduce(map(items(parameters('input')), lambda('i', createObject('key', lambdaVariables('i').key, 'value', lambdaVariables('i').value, 'replaced', ''))), createObject('replaced', parameters('value')), lambda('cur', 'next', createObject('replaced', replace(lambdaVariables('cur').replaced, lambdaVariables('next').key, lambdaVariables('next').value)))).replaced]",
        ),
    ];

    /// Parameters and variables both hold `values`; the user functions above are defined.
    fn env(values: serde_json::Value) -> SimpleEnvironment {
        let mut env = SimpleEnvironment::default();
        if let Value::Object(o) = Value::from(values) {
            env.parameters = o.clone();
            env.variables = o;
        }
        for (name, params, output) in USER_FUNCTIONS {
            let literal = serde_json::to_string(output).expect("a string serializes");
            env.functions.push(Rc::new(UserFunction {
                namespace: "__bicep".into(),
                name: (*name).into(),
                parameters: params
                    .iter()
                    .map(|p| UserFunctionParameter {
                        name: (*p).into(),
                        param_type: None,
                    })
                    .collect(),
                output_type: None,
                output: cairn_json::parse(&literal).expect("valid JSON"),
            }));
        }
        env
    }

    /// Evaluates with the `env` above and compares exactly (key order, int vs float).
    #[track_caller]
    fn check_in(values: serde_json::Value, expr: &str, expected: serde_json::Value) {
        let v = eval_in(&env(values), expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(v.to_json().to_string(), expected.to_string(), "{expr}");
    }

    #[track_caller]
    fn check_exact(expr: &str, expected: serde_json::Value) {
        check_in(json!({}), expr, expected);
    }

    fn dogs() -> serde_json::Value {
        json!({ "dogs": serde_json::from_str::<serde_json::Value>(DOGS).expect("valid JSON") })
    }

    fn comprehension_params() -> serde_json::Value {
        json!({"doggos": ["Evie", "Casper", "Indy", "Kira"], "numbers": [0, 1, 2, 3]})
    }

    #[test]
    fn filter_keeps_accepted_items() {
        // conformance: lambda-filter-dogs
        check_in(
            dogs(),
            "filter(variables('dogs'), lambda('dog', greaterOrEquals(lambdaVariables('dog').age, 5)))",
            json!([
                {"name": "Evie", "age": 5, "interests": ["Ball", "Frisbee"]},
                {"name": "Kira", "age": 8, "interests": ["Rubs"]}
            ]),
        );
        // conformance: lambda-filter-loop
        check_in(
            json!({"itemForLoop": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}),
            "filter(variables('itemForLoop'), lambda('i', greater(lambdaVariables('i'), 5)))",
            json!([6, 7, 8, 9]),
        );
        check_exact(
            "filter(range(0, 10), lambda('i', equals(0, mod(lambdaVariables('i'), 2))))",
            json!([0, 2, 4, 6, 8]),
        );
        // evaluation: List_comprehension isEven, filterEqualityCheck, filterEmpty
        check_in(
            comprehension_params(),
            "filter(parameters('numbers'), lambda('i', equals(0, mod(lambdaVariables('i'), 2))))",
            json!([0, 2]),
        );
        check_exact(
            "filter(createArray('abc', 'def', 'ghi'), lambda('foo', equals('def', lambdaVariables('foo'))))",
            json!(["def"]),
        );
        check_exact(
            "filter(createArray(), lambda('foo', equals('def', lambdaVariables('foo'))))",
            json!([]),
        );
        // evaluation: New_functions evenEntries (index parameter, user function in the body)
        check_exact(
            "filter(createArray('a', 'b', 'c', 'd'), lambda('item', 'i', __bicep.isEven(lambdaVariables('i'))))",
            json!(["a", "c"]),
        );
        check_err(
            "filter(createArray(1), lambda('x', 1))",
            "must return a value of type 'Boolean'",
        );
        check_err(
            "filter(createArray(1), lambda('x', 'i', 'j', true()))",
            "1 or 2 parameter(s), but it has 3",
        );
        check_err(
            "filter(createObject(), lambda('x', true()))",
            "position 1 must be of type 'Array'",
        );
        check_err(
            "filter(createArray(1), 1)",
            "position 2 must be of type 'Lambda'",
        );
    }

    #[test]
    fn map_transforms_items() {
        // conformance: lambda-map dogNames (sayHi and mapObject use format(), see below)
        check_in(
            dogs(),
            "map(variables('dogs'), lambda('dog', lambdaVariables('dog').name))",
            json!(["Evie", "Casper", "Indy", "Kira"]),
        );
        // evaluation: List_comprehension mapEmpty, mapArray, mapMultiLineArray
        check_exact(
            "map(createArray(), lambda('foo', lambdaVariables('foo')))",
            json!([]),
        );
        check_exact(
            "flatten(map(range(1, 3), lambda('i', createArray(mul(lambdaVariables('i'), 2), add(mul(lambdaVariables('i'), 2), 1)))))",
            json!([2, 3, 4, 5, 6, 7]),
        );
        check_exact(
            "flatten(map(range(1, 3), lambda('i', createArray(mul(lambdaVariables('i'), 3), add(mul(lambdaVariables('i'), 3), 1), add(mul(lambdaVariables('i'), 3), 2)))))",
            json!([3, 4, 5, 6, 7, 8, 9, 10, 11]),
        );
        // evaluation: List_comprehension evenDoggosNestedLambdas (nested lambdas reading an outer one)
        check_in(
            comprehension_params(),
            "map(filter(parameters('numbers'), lambda('i', contains(filter(parameters('numbers'), lambda('j', equals(0, mod(lambdaVariables('j'), 2)))), lambdaVariables('i')))), lambda('x', parameters('doggos')[lambdaVariables('x')]))",
            json!(["Evie", "Indy"]),
        );
        // evaluation: Issue8782_2 (lambda returning arrays from if())
        let obj = json!({"testObject": {"a": true, "b": false}});
        check_in(
            obj.clone(),
            "map(items(parameters('testObject')), lambda('subObject', if(equals(1, 2), createArray('yes'), createArray('no'))))",
            json!([["no"], ["no"]]),
        );
        check_in(
            obj,
            "map(items(parameters('testObject')), lambda('subObject', if(equals(lambdaVariables('subObject').key, 'a'), createArray('yes'), createArray('no'))))",
            json!([["yes"], ["no"]]),
        );
        // index parameter
        check_exact(
            "map(createArray('a', 'b'), lambda('x', 'i', lambdaVariables('i')))",
            json!([0, 1]),
        );
        check_err(
            "map(createArray(1), lambda('x', 'i', 'j', 1))",
            "1 or 2 parameter(s)",
        );
        check_err("map('abc', lambda('x', 1))", "must be of type 'Array'");
    }

    /// The lambda-map, List_comprehension and New_functions outputs built with `format()`.
    #[test]
    fn map_outputs_built_with_format() {
        // conformance: lambda-map sayHi, mapObject
        check_in(
            dogs(),
            "map(variables('dogs'), lambda('dog', format('Hello {0}!', lambdaVariables('dog').name)))",
            json!(["Hello Evie!", "Hello Casper!", "Hello Indy!", "Hello Kira!"]),
        );
        check_in(
            dogs(),
            "map(range(0, length(variables('dogs'))), lambda('i', createObject('i', lambdaVariables('i'), 'dog', variables('dogs')[lambdaVariables('i')].name, 'greeting', format('Ahoy, {0}!', variables('dogs')[lambdaVariables('i')].name))))",
            json!([
                {"i": 0, "dog": "Evie", "greeting": "Ahoy, Evie!"},
                {"i": 1, "dog": "Casper", "greeting": "Ahoy, Casper!"},
                {"i": 2, "dog": "Indy", "greeting": "Ahoy, Indy!"},
                {"i": 3, "dog": "Kira", "greeting": "Ahoy, Kira!"}
            ]),
        );
        // evaluation: List_comprehension sayHello, mapSayHi, mapObject
        check_in(
            comprehension_params(),
            "map(parameters('doggos'), lambda('i', format('Hello {0}!', lambdaVariables('i'))))",
            json!(["Hello Evie!", "Hello Casper!", "Hello Indy!", "Hello Kira!"]),
        );
        check_exact(
            "map(createArray('abc', 'def', 'ghi'), lambda('foo', format('Hi {0}!', lambdaVariables('foo'))))",
            json!(["Hi abc!", "Hi def!", "Hi ghi!"]),
        );
        check_in(
            comprehension_params(),
            "map(range(0, length(parameters('doggos'))), lambda('i', createObject('i', lambdaVariables('i'), 'doggo', parameters('doggos')[lambdaVariables('i')], 'greeting', format('Ahoy, {0}!', parameters('doggos')[lambdaVariables('i')]))))",
            json!([
                {"i": 0, "doggo": "Evie", "greeting": "Ahoy, Evie!"},
                {"i": 1, "doggo": "Casper", "greeting": "Ahoy, Casper!"},
                {"i": 2, "doggo": "Indy", "greeting": "Ahoy, Indy!"},
                {"i": 3, "doggo": "Kira", "greeting": "Ahoy, Kira!"}
            ]),
        );
        // evaluation: New_functions sayHello (index parameter and a user function)
        check_exact(
            "map(createArray('Evie', 'Casper', 'Lady Lechuga'), lambda('dog', 'i', format('{0} {1}!', if(__bicep.isEven(lambdaVariables('i')), 'Hi', 'Ahoy'), lambdaVariables('dog'))))",
            json!(["Hi Evie!", "Ahoy Casper!", "Hi Lady Lechuga!"]),
        );
    }

    /// evaluation: Functions_are_evaluated_correctly (user functions calling user functions, reduce over items()
    /// inside one) and Join_function_evaluation_works (createArray feeding join).
    #[test]
    fn user_functions_with_lambdas() {
        check_exact(
            "__bicep.greet(createArray('Anthony', 'Martin'))",
            json!("Hi, Anthony Martin!"),
        );
        check_exact(
            "__bicep.replaceMultiple('Hi, $firstName $lastName!', createObject('$firstName', 'Anthony', '$lastName', 'Martin'))",
            json!("Hi, Anthony Martin!"),
        );
        let foo = json!({"foo": ["abc", "def", "ghi"]});
        check_in(
            foo.clone(),
            "join(variables('foo'), '')",
            json!("abcdefghi"),
        );
        check_in(foo, "join(variables('foo'), ',')", json!("abc,def,ghi"));
        check_exact(
            "join(createArray('I', 'love', 'Bicep'), ' ')",
            json!("I love Bicep"),
        );
    }

    #[test]
    fn reduce_folds() {
        // conformance: lambda-reduce-ages (ages computed by map in a variable)
        let ages = "map(variables('dogs'), lambda('dog', lambdaVariables('dog').age))";
        check_in(
            dogs(),
            &format!(
                "reduce({ages}, 0, lambda('cur', 'next', add(lambdaVariables('cur'), lambdaVariables('next'))))"
            ),
            json!(18),
        );
        check_in(
            dogs(),
            &format!(
                "reduce({ages}, 1, lambda('cur', 'next', add(lambdaVariables('cur'), lambdaVariables('next'))))"
            ),
            json!(19),
        );
        // conformance: lambda-reduce-object-union; evaluation: List_comprehension reduceObjectUnion
        check_exact(
            "reduce(createArray(createObject('foo', 123), createObject('bar', 456), createObject('baz', 789)), createObject(), lambda('cur', 'next', union(lambdaVariables('cur'), lambdaVariables('next'))))",
            json!({"foo": 123, "bar": 456, "baz": 789}),
        );
        // evaluation: List_comprehension reduceStringConcat, reduceFactorial, reduceEmpty
        check_exact(
            "reduce(createArray('abc', 'def', 'ghi'), '', lambda('cur', 'next', concat(lambdaVariables('cur'), lambdaVariables('next'))))",
            json!("abcdefghi"),
        );
        check_exact(
            "reduce(range(1, 5), 1, lambda('cur', 'next', mul(lambdaVariables('cur'), lambdaVariables('next'))))",
            json!(120),
        );
        check_exact(
            "reduce(createArray(), 0, lambda('cur', 'next', lambdaVariables('cur')))",
            json!(0),
        );
        // evaluation: New_functions concatIfEven (index parameter)
        check_exact(
            "reduce(createArray('abc', 'def', 'ghi'), '', lambda('cur', 'next', 'i', if(__bicep.isEven(lambdaVariables('i')), concat(lambdaVariables('cur'), lambdaVariables('next')), lambdaVariables('cur'))))",
            json!("abcghi"),
        );
        check_err(
            "reduce(createArray(1), 0, lambda('x', 1))",
            "2 or 3 parameter(s), but it has 1",
        );
    }

    #[test]
    fn sort_orders_by_before_lambda() {
        // conformance: lambda-sort
        check_in(
            dogs(),
            "sort(variables('dogs'), lambda('a', 'b', less(lambdaVariables('a').age, lambdaVariables('b').age)))",
            json!([
                {"name": "Indy", "age": 2, "interests": ["Butter"]},
                {"name": "Casper", "age": 3, "interests": ["Other dogs"]},
                {"name": "Evie", "age": 5, "interests": ["Ball", "Frisbee"]},
                {"name": "Kira", "age": 8, "interests": ["Rubs"]}
            ]),
        );
        // evaluation: List_comprehension sortNumeric, sortAlpha, sortAlphaReverse, sortByObjectKey, sortEmpty
        let by =
            |a: &str| format!("lambda('x', 'y', {a}(lambdaVariables('x'), lambdaVariables('y')))");
        check_exact(
            &format!("sort(createArray(8, 3, 10, -13, 5), {})", by("less")),
            json!([-13, 3, 5, 8, 10]),
        );
        check_exact(
            &format!("sort(createArray('ghi', 'abc', 'def'), {})", by("less")),
            json!(["abc", "def", "ghi"]),
        );
        check_exact(
            &format!("sort(createArray('ghi', 'abc', 'def'), {})", by("greater")),
            json!(["ghi", "def", "abc"]),
        );
        check_exact(
            "sort(createArray(createObject('key', 124, 'name', 'Second'), createObject('key', 298, 'name', 'Third'), createObject('key', 24, 'name', 'First'), createObject('key', 1232, 'name', 'Fourth')), lambda('x', 'y', less(int(lambdaVariables('x').key), int(lambdaVariables('y').key))))",
            json!([
                {"key": 24, "name": "First"},
                {"key": 124, "name": "Second"},
                {"key": 298, "name": "Third"},
                {"key": 1232, "name": "Fourth"}
            ]),
        );
        check_exact(
            "sort(createArray(), lambda('x', 'y', less(int(lambdaVariables('x')), int(lambdaVariables('y')))))",
            json!([]),
        );
        // stable: equal keys keep their order, with a strict or a non-strict comparison
        let pairs = "createArray(createArray(2, 'a'), createArray(1, 'b'), createArray(2, 'c'), createArray(1, 'd'))";
        for op in ["less", "lessOrEquals"] {
            check_exact(
                &format!(
                    "map(sort({pairs}, lambda('x', 'y', {op}(lambdaVariables('x')[0], lambdaVariables('y')[0]))), lambda('p', lambdaVariables('p')[1]))"
                ),
                json!(["b", "d", "a", "c"]),
            );
        }
        // an inconsistent lambda still terminates with a permutation
        check_exact(
            "length(sort(range(0, 50), lambda('x', 'y', true())))",
            json!(50),
        );
        check_err(
            "sort(createArray(1, 2), lambda('x', 'y', 1))",
            "must return a value of type 'Boolean'",
        );
        check_err(
            "sort(createArray(1, 2), lambda('x', true()))",
            "must have 2 parameter(s), but it has 1",
        );
    }

    #[test]
    fn to_object_builds_keys() {
        // conformance: lambda-toobject-key, lambda-toobject-key-identity-value
        let expected = json!({
            "Evie": {"name": "Evie", "age": 5, "interests": ["Ball", "Frisbee"]},
            "Casper": {"name": "Casper", "age": 3, "interests": ["Other dogs"]},
            "Indy": {"name": "Indy", "age": 2, "interests": ["Butter"]},
            "Kira": {"name": "Kira", "age": 8, "interests": ["Rubs"]}
        });
        check_in(
            dogs(),
            "toObject(variables('dogs'), lambda('entry', lambdaVariables('entry').name))",
            expected.clone(),
        );
        check_in(
            dogs(),
            "toObject(variables('dogs'), lambda('entry', lambdaVariables('entry').name), lambda('entry', lambdaVariables('entry')))",
            expected,
        );
        // conformance: lambda-toobject-key-value
        let dogs_with_properties = json!({"dogs": [
            {"name": "Evie", "properties": {"age": 5, "interests": ["Ball", "Frisbee"]}},
            {"name": "Casper", "properties": {"age": 3, "interests": ["Other dogs"]}},
            {"name": "Indy", "properties": {"age": 2, "interests": ["Butter"]}},
            {"name": "Kira", "properties": {"age": 8, "interests": ["Rubs"]}}
        ]});
        check_in(
            dogs_with_properties,
            "toObject(variables('dogs'), lambda('entry', lambdaVariables('entry').name), lambda('entry', lambdaVariables('entry').properties))",
            json!({
                "Evie": {"age": 5, "interests": ["Ball", "Frisbee"]},
                "Casper": {"age": 3, "interests": ["Other dogs"]},
                "Indy": {"age": 2, "interests": ["Butter"]},
                "Kira": {"age": 8, "interests": ["Rubs"]}
            }),
        );
        // evaluation: List_comprehension objectMap, objectMap2, objectMap3
        check_exact(
            "toObject(createArray(123, 456, 789), lambda('i', format('{0}', div(lambdaVariables('i'), 100))))",
            json!({"1": 123, "4": 456, "7": 789}),
        );
        check_in(
            comprehension_params(),
            "toObject(parameters('numbers'), lambda('i', format('{0}', lambdaVariables('i'))), lambda('i', createObject('isEven', equals(mod(lambdaVariables('i'), 2), 0), 'isGreaterThan2', greater(lambdaVariables('i'), 2))))",
            json!({
                "0": {"isEven": true, "isGreaterThan2": false},
                "1": {"isEven": false, "isGreaterThan2": false},
                "2": {"isEven": true, "isGreaterThan2": false},
                "3": {"isEven": false, "isGreaterThan2": true}
            }),
        );
        check_exact(
            "toObject(sort(createArray(createObject('key', 124, 'name', 'Second'), createObject('key', 298, 'name', 'Third'), createObject('key', 24, 'name', 'First'), createObject('key', 1232, 'name', 'Fourth')), lambda('x', 'y', less(int(lambdaVariables('x').key), int(lambdaVariables('y').key)))), lambda('x', lambdaVariables('x').name))",
            json!({
                "First": {"key": 24, "name": "First"},
                "Second": {"key": 124, "name": "Second"},
                "Third": {"key": 298, "name": "Third"},
                "Fourth": {"key": 1232, "name": "Fourth"}
            }),
        );
        // a repeated key: first position, last value
        check_exact(
            "toObject(createArray('a', 'b', 'a'), lambda('x', lambdaVariables('x')), lambda('x', length(lambdaVariables('x'))))",
            json!({"a": 1, "b": 1}),
        );
        check_err(
            "toObject(createArray(1), lambda('x', lambdaVariables('x')))",
            "key lambda must return a value of type 'String'",
        );
        check_err(
            "toObject(createArray(1), lambda('x', 'y', 'k'))",
            "must have 1 parameter(s)",
        );
    }

    #[test]
    fn map_values_keeps_keys() {
        // evaluation: New_functions mapValuesTest
        check_exact(
            "mapValues(createObject('a', 123, 'b', 456), lambda('val', mul(lambdaVariables('val'), 2)))",
            json!({"a": 246, "b": 912}),
        );
        check_exact("mapValues(createObject(), lambda('val', 1))", json!({}));
        check_err(
            "mapValues(createArray(), lambda('val', 1))",
            "must be of type 'Object'",
        );
    }

    #[test]
    fn group_by_collects() {
        // evaluation: New_functions groupByTest, groupByWithValMapTest
        let items = "createArray(createObject('type', 'a', 'value', 123), createObject('type', 'b', 'value', 456), createObject('type', 'a', 'value', 789))";
        check_exact(
            &format!("groupBy({items}, lambda('arg', lambdaVariables('arg').type))"),
            json!({
                "a": [{"type": "a", "value": 123}, {"type": "a", "value": 789}],
                "b": [{"type": "b", "value": 456}]
            }),
        );
        check_exact(
            &format!(
                "groupBy({items}, lambda('arg', lambdaVariables('arg').type), lambda('arg', lambdaVariables('arg').value))"
            ),
            json!({"a": [123, 789], "b": [456]}),
        );
        check_exact("groupBy(createArray(), lambda('x', 'k'))", json!({}));
        check_err(
            "groupBy(createArray(1), lambda('x', lambdaVariables('x')))",
            "must return a value of type 'String'",
        );
    }

    #[test]
    fn unevaluated_items_flow_through_lambdas() {
        let mut env = env(json!({}));
        let marker = Value::Unevaluated(Rc::new(Unevaluated {
            expression: "[reference('r').id]".into(),
        }));
        env.parameters.insert("u", marker);
        // a lambda that does not look at the item keeps the marker's neighbours computable
        let v = eval_in(
            &env,
            "length(map(createArray(parameters('u'), 1), lambda('x', 0)))",
        )
        .expect("known");
        assert_eq!(v.to_json(), json!(2));
        // one that inspects it defers the whole expression
        for expr in [
            "filter(createArray(parameters('u')), lambda('x', lambdaVariables('x')))",
            "map(createArray(parameters('u')), lambda('x', lambdaVariables('x').name))",
            "toObject(createArray(parameters('u')), lambda('x', lambdaVariables('x')))",
            "map(parameters('u'), lambda('x', 1))",
        ] {
            let v = eval_in(&env, expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
            assert!(matches!(v, Value::Unevaluated(_)), "{expr} gave {v:?}");
        }
    }

    #[test]
    fn lambdas_cannot_escape() {
        assert!(eval("lambda('x', 1)").is_err());
    }
}
