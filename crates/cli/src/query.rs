//! `--query`: a JMESPath expression applied to a command's result before it is printed, as az applies it (the
//! `jmespath` crate, the JMESPath project's own implementation).
//!
//! The crate keeps objects in sorted maps, so an object the query builds (`{name: name, state: ...}`) would come
//! out with its keys sorted; az keeps them in the order written, and `-o table` and `-o tsv` take their columns
//! from that order. The keys of such objects are put back in the order the query writes them.

use serde_json::{Map, Value};

/// A JMESPath expression, checked when the command line is parsed (a bad query is a usage error before anything
/// runs). The compiled form is not kept: it is not `Send`, and commands carry their arguments across tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Query {
    text: String,
}

impl Query {
    /// The `value_parser` of `--query`: the expression if it compiles, else JMESPath's message with a caret.
    pub(crate) fn parse(text: &str) -> Result<Query, String> {
        jmespath::compile(text).map_err(|e| format!("not a valid JMESPath query: {e}"))?;
        Ok(Query {
            text: text.to_string(),
        })
    }

    /// The query's result over `value` (`null` when it selects nothing). A runtime error (a function given the
    /// wrong type of argument) is returned as JMESPath words it.
    pub(crate) fn apply(&self, value: &Value) -> Result<Value, String> {
        let expression = jmespath::compile(&self.text)
            .map_err(|e| format!("not a valid JMESPath query: {e}"))?;
        let result = expression
            .search(value)
            .map_err(|e| format!("--query '{}' failed: {e}", self.text))?;
        let mut result = serde_json::to_value(&*result).map_err(|e| {
            format!(
                "--query '{}' gave a result that is not JSON: {e}",
                self.text
            )
        })?;
        let mut orders = Vec::new();
        key_orders(expression.as_ast(), &mut orders);
        if !orders.is_empty() {
            restore_key_order(&mut result, &orders);
        }
        Ok(result)
    }
}

/// The keys of every multi-select hash (`{a: x, b: y}`) in the expression, in the order written.
fn key_orders(ast: &jmespath::ast::Ast, out: &mut Vec<Vec<String>>) {
    use jmespath::ast::Ast;
    match ast {
        Ast::MultiHash { elements, .. } => {
            out.push(elements.iter().map(|kv| kv.key.clone()).collect());
            for kv in elements {
                key_orders(&kv.value, out);
            }
        }
        Ast::Comparison { lhs, rhs, .. }
        | Ast::Projection { lhs, rhs, .. }
        | Ast::And { lhs, rhs, .. }
        | Ast::Or { lhs, rhs, .. }
        | Ast::Subexpr { lhs, rhs, .. } => {
            key_orders(lhs, out);
            key_orders(rhs, out);
        }
        Ast::Condition {
            predicate, then, ..
        } => {
            key_orders(predicate, out);
            key_orders(then, out);
        }
        Ast::Expref { ast, .. } => key_orders(ast, out),
        Ast::Flatten { node, .. } | Ast::Not { node, .. } | Ast::ObjectValues { node, .. } => {
            key_orders(node, out);
        }
        Ast::Function { args, .. } => args.iter().for_each(|a| key_orders(a, out)),
        Ast::MultiList { elements, .. } => elements.iter().for_each(|a| key_orders(a, out)),
        Ast::Identity { .. }
        | Ast::Field { .. }
        | Ast::Index { .. }
        | Ast::Literal { .. }
        | Ast::Slice { .. } => {}
    }
}

/// Reorders the keys of every object whose key set is exactly one multi-select hash's keys.
fn restore_key_order(value: &mut Value, orders: &[Vec<String>]) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| restore_key_order(v, orders)),
        Value::Object(map) => {
            map.values_mut().for_each(|v| restore_key_order(v, orders));
            let order = orders
                .iter()
                .find(|keys| keys.len() == map.len() && keys.iter().all(|k| map.contains_key(k)));
            if let Some(order) = order {
                let mut ordered = Map::new();
                for key in order {
                    if let Some((k, v)) = map.shift_remove_entry(key) {
                        ordered.insert(k, v);
                    }
                }
                *map = ordered;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(query: &str, value: &Value) -> Value {
        Query::parse(query).unwrap().apply(value).unwrap()
    }

    #[test]
    fn queries_are_jmespath() {
        let v = json!({"properties": {"resources": [{"id": "a", "n": 1}, {"id": "b", "n": 3}], "state": "x"}});
        assert_eq!(run("properties.state", &v), json!("x"));
        assert_eq!(run("properties.resources[1].id", &v), json!("b"));
        assert_eq!(run("properties.resources[].id", &v), json!(["a", "b"]));
        assert_eq!(
            run("properties.resources[?n > `2`].id | [0]", &v),
            json!("b")
        );
        assert_eq!(run("length(properties.resources)", &v), json!(2));
        assert_eq!(run("properties.missing", &v), Value::Null);
        // JMESPath names are case-sensitive, as in az.
        assert_eq!(run("Properties.state", &v), Value::Null);
    }

    #[test]
    fn built_objects_keep_the_key_order_written() {
        let v = json!([{"name": "a", "zone": 1, "properties": {"state": "ok"}}]);
        let result = run("[].{zone: zone, name: name, state: properties.state}", &v);
        let keys: Vec<&String> = result[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["zone", "name", "state"]);
    }

    #[test]
    fn bad_queries_are_refused_with_the_position() {
        let error = Query::parse("properties.[").unwrap_err();
        assert!(error.starts_with("not a valid JMESPath query"), "{error}");
        assert!(error.contains('^'), "{error}");
        let runtime = Query::parse("length(`1`)")
            .unwrap()
            .apply(&json!({}))
            .unwrap_err();
        assert!(runtime.contains("failed"), "{runtime}");
    }
}
