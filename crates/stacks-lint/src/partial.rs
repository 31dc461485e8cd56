//! Partial evaluation with sentinels: evaluates the parts of config expressions that decide *shape* (property
//! names, constant `if` conditions, constant indexes) with every runtime function (`reference`, `list*`,
//! `extensions`, ...) replaced by an unevaluated marker, as seed 000's preprocessing does.
//!
//! Secure parameters are never evaluated: their values stay sentinels too, so no secret can end up in a property
//! name or a message.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use cairn_eval::{
    Budget, DeploymentFacts, EvalError, EvalLimits, Evaluator, RuntimeCall, UserFunction, Value,
};
use cairn_expr::Expr;
use cairn_template::model::VariableValue;
use cairn_template::{ParameterValue, Template};

/// What a shape-deciding expression turned out to be.
#[derive(Clone, Debug, PartialEq)]
pub enum Partial {
    /// Known before deployment.
    Known(Value),
    /// Depends on a runtime value (a sentinel reached the result): unknowable before deployment.
    Runtime,
    /// Depends on something not known to the linter (a parameter without a value, an error): known at
    /// deployment preprocessing, but not here.
    Unknown,
}

/// An environment for the evaluator in which runtime functions are sentinels.
pub struct PartialEnv {
    template: Rc<Template>,
    /// Values from the parameters file (root template only).
    parameter_values: Rc<Vec<(String, ParameterValue)>>,
    /// Whether parameter values may be used. Branch pruning does not use them: a branch a parameter decides is
    /// reachable in some deployment of the template.
    use_parameters: bool,
    facts: DeploymentFacts,
    runtime_hit: Cell<bool>,
    active: RefCell<Vec<String>>,
    variables: RefCell<HashMap<String, Option<Value>>>,
    guid: Cell<u64>,
    /// The evaluation budgets of the whole lint over this environment (a value past them is unknown).
    budget: Budget,
}

/// How many variables or parameter defaults may be evaluated inside one another.
const MAX_NESTING: usize = 32;

impl PartialEnv {
    pub fn new(
        template: Rc<Template>,
        parameter_values: Rc<Vec<(String, ParameterValue)>>,
        use_parameters: bool,
    ) -> PartialEnv {
        let facts = DeploymentFacts {
            scope: template.scope,
            ..DeploymentFacts::default()
        };
        PartialEnv {
            template,
            parameter_values,
            use_parameters,
            facts,
            runtime_hit: Cell::new(false),
            active: RefCell::new(Vec::new()),
            variables: RefCell::new(HashMap::new()),
            guid: Cell::new(0),
            budget: Budget::new(EvalLimits::default()),
        }
    }

    /// Evaluates `expr` (spans index into `source`).
    pub fn eval(&self, expr: &Expr, source: &Rc<str>) -> Partial {
        self.runtime_hit.set(false);
        let result = Evaluator::new(self).eval_expr(expr, source);
        let runtime = self.runtime_hit.get();
        match result {
            Ok(v) if !v.contains_unevaluated() && !matches!(v, Value::Lambda(_)) => {
                Partial::Known(v)
            }
            _ if runtime => Partial::Runtime,
            _ => Partial::Unknown,
        }
    }

    /// Evaluates a template string (a literal or `"[expr]"`).
    pub fn eval_string(&self, s: &str) -> Partial {
        self.runtime_hit.set(false);
        let result = Evaluator::new(self).eval_string(s);
        let runtime = self.runtime_hit.get();
        match result {
            Ok(v) if !v.contains_unevaluated() => Partial::Known(v),
            _ if runtime => Partial::Runtime,
            _ => Partial::Unknown,
        }
    }

    fn guarded<T>(
        &self,
        key: String,
        f: impl FnOnce() -> Result<T, EvalError>,
    ) -> Result<T, EvalError> {
        {
            let mut active = self.active.borrow_mut();
            if active.len() >= MAX_NESTING || active.contains(&key) {
                return Err(EvalError::expression(
                    "the evaluation refers back to itself",
                ));
            }
            active.push(key);
        }
        let out = f();
        self.active.borrow_mut().pop();
        out
    }
}

fn sentinel(what: &str) -> EvalError {
    EvalError::unavailable(format!("{what} is not known before deployment"))
}

impl cairn_eval::Environment for PartialEnv {
    fn parameter(&self, name: &str) -> Result<Value, EvalError> {
        if !self.use_parameters {
            return Err(sentinel("a parameter value"));
        }
        let Some(decl) = self.template.parameter(name) else {
            return Err(EvalError::expression(format!(
                "The template parameter '{name}' is not found."
            )));
        };
        if cairn_template::types::is_secure(&decl.node, self.template.definitions.as_ref()) {
            return Err(sentinel("a secure parameter"));
        }
        if let Some((_, given)) = self
            .parameter_values
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return match given {
                ParameterValue::Value(v) => Ok(v.clone()),
                _ => Err(sentinel("a parameter given by reference")),
            };
        }
        let Some(default) = decl.node.get_ci("defaultValue") else {
            return Err(sentinel("a parameter without a value"));
        };
        let default = default.clone();
        self.guarded(format!("parameter:{}", name.to_ascii_lowercase()), || {
            Evaluator::new(self).eval_node(&default)
        })
    }

    fn variable(&self, name: &str) -> Result<Value, EvalError> {
        let key = name.to_ascii_lowercase();
        if let Some(cached) = self.variables.borrow().get(&key) {
            return cached.clone().ok_or_else(|| sentinel("the variable"));
        }
        let Some(decl) = self.template.variable(name) else {
            return Err(EvalError::expression(format!(
                "The template variable '{name}' is not found."
            )));
        };
        let VariableValue::Plain(node) = &decl.value else {
            return Err(sentinel("a copied variable"));
        };
        let node = node.clone();
        let out = self.guarded(format!("variable:{key}"), || {
            Evaluator::new(self).eval_node(&node)
        });
        if let Ok(v) = &out {
            let known = (!v.contains_unevaluated()).then(|| v.clone());
            self.variables.borrow_mut().insert(key, known);
        }
        out
    }

    fn budget(&self) -> &Budget {
        &self.budget
    }

    fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>> {
        self.template
            .functions
            .iter()
            .find(|f| {
                f.namespace.eq_ignore_ascii_case(namespace) && f.name.eq_ignore_ascii_case(name)
            })
            .cloned()
    }

    fn facts(&self) -> &DeploymentFacts {
        &self.facts
    }

    fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
        self.runtime_hit.set(true);
        Err(sentinel(call.name))
    }

    fn allows_nondeterministic(&self) -> bool {
        false
    }

    fn new_guid(&self) -> String {
        let n = self.guid.get();
        self.guid.set(n + 1);
        format!("00000000-0000-4000-8000-{n:012x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(template: &str, params: Vec<(String, ParameterValue)>, use_params: bool) -> PartialEnv {
        let (t, _) = Template::parse(cairn_json::parse(template).unwrap());
        PartialEnv::new(Rc::new(t), Rc::new(params), use_params)
    }

    const T: &str = r#"{ "parameters": { "p": { "type": "string", "defaultValue": "dflt" },
        "s": { "type": "securestring", "defaultValue": "hidden" } },
        "variables": { "v": "[concat('a', 'b')]", "loop": "[variables('loop')]" } }"#;

    #[test]
    fn shape_values() {
        let e = env(T, vec![], true);
        assert_eq!(
            e.eval_string("[variables('v')]"),
            Partial::Known(Value::from("ab"))
        );
        assert_eq!(
            e.eval_string("[parameters('p')]"),
            Partial::Known(Value::from("dflt"))
        );
        assert_eq!(e.eval_string("[reference('x').name]"), Partial::Runtime);
        assert_eq!(
            e.eval_string("[listKeys('x', '2020-01-01').keys[0]]"),
            Partial::Runtime
        );
        assert_eq!(e.eval_string("[parameters('s')]"), Partial::Unknown);
        assert_eq!(e.eval_string("[variables('loop')]"), Partial::Unknown);
    }

    #[test]
    fn parameters_only_when_allowed() {
        let given = vec![("p".to_string(), ParameterValue::Value(Value::from("given")))];
        assert_eq!(
            env(T, given.clone(), true).eval_string("[parameters('p')]"),
            Partial::Known(Value::from("given"))
        );
        assert_eq!(
            env(T, given, false).eval_string("[parameters('p')]"),
            Partial::Unknown
        );
    }
}
