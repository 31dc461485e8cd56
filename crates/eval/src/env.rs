//! What the evaluator needs from its surroundings: parameters, variables, user functions, deployment facts and
//! the runtime hook. The template crate implements [`Environment`]; tests use [`SimpleEnvironment`].

use std::rc::Rc;

use crate::budget::Budget;
use crate::error::EvalError;
use crate::value::{Object, Value};

/// The deployment scope a template runs at (from its `$schema`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    Tenant,
    ManagementGroup,
    Subscription,
    #[default]
    ResourceGroup,
    /// Bicep `targetScope = 'local'`.
    Local,
}

/// Facts about the deployment that scope and deployment functions return. Values are ARM-shaped objects.
#[derive(Clone, Debug, Default)]
pub struct DeploymentFacts {
    pub scope: ScopeKind,
    pub tenant_id: String,
    pub subscription_id: Option<String>,
    pub resource_group: Option<String>,
    pub management_group: Option<String>,
    /// `tenant()`
    pub tenant: Value,
    /// `subscription()`
    pub subscription: Value,
    /// `resourceGroup()`
    pub resource_group_object: Value,
    /// `managementGroup()`
    pub management_group_object: Value,
    /// `deployment()`
    pub deployment: Value,
    /// `environment()`
    pub environment: Value,
    /// `deployer()`
    pub deployer: Value,
    /// The pinned clock for `utcNow()`, as RFC 3339 UTC (`2024-01-02T03:04:05Z`, fractional seconds allowed).
    pub utc_now: String,
    /// Seed for `newGuid()`: a pinned list of GUIDs handed out in order, or random when empty.
    pub new_guids: Vec<String>,
    /// `pickZones` data: resource type (lower-case) → location (lower-case, no spaces) → zones.
    pub availability_zones: Object,
}

/// A runtime function call the evaluator cannot answer by itself: `reference`, `references`, `resourceInfo`,
/// `list*`, `extensions`, `extensionConfigs`, `deployment`, `pickZones`-style lookups.
#[derive(Clone, Debug)]
pub struct RuntimeCall<'a> {
    /// The function name as written (case preserved).
    pub name: &'a str,
    pub args: &'a [Value],
}

/// A user-defined function (`functions` section): parameter names and the output value (a JSON tree that may
/// contain expressions, evaluated with only the function's parameters in scope).
#[derive(Clone, Debug)]
pub struct UserFunction {
    pub namespace: String,
    pub name: String,
    pub parameters: Vec<UserFunctionParameter>,
    pub output_type: Option<String>,
    pub output: cairn_json::Node,
}

#[derive(Clone, Debug)]
pub struct UserFunctionParameter {
    pub name: String,
    pub param_type: Option<String>,
}

/// The evaluator's window on the template and the deployment.
pub trait Environment {
    /// `parameters(name)` at template level (name matched case-insensitively).
    fn parameter(&self, name: &str) -> Result<Value, EvalError>;
    /// `variables(name)` (name matched case-insensitively).
    fn variable(&self, name: &str) -> Result<Value, EvalError>;
    /// A user-defined function, matched case-insensitively.
    fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>>;
    /// Scope and deployment facts.
    fn facts(&self) -> &DeploymentFacts;
    /// Runtime functions. Return `Err(EvalError::unavailable(..))` when the value is not known yet.
    fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError>;
    /// Whether parameter `name` holds a secure value (`secureString`, `secureObject`, a Key Vault secret, or a
    /// value computed from one). Errors of an evaluation that read it never quote values. Asked after
    /// [`Environment::parameter`] answered.
    fn parameter_is_secure(&self, _name: &str) -> bool {
        false
    }
    /// Whether variable `name` was computed from a secure value. Asked after [`Environment::variable`] answered.
    fn variable_is_secure(&self, _name: &str) -> bool {
        false
    }
    /// Whether the answer to a runtime call is secure. By default every `list*` answer is: they return keys,
    /// connection strings and other secrets.
    fn runtime_is_secure(&self, call: &RuntimeCall<'_>) -> bool {
        call.name
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("list"))
    }
    /// Whether `utcNow()`/`newGuid()` may be called here (ARM allows them only in parameter default values).
    fn allows_nondeterministic(&self) -> bool {
        true
    }
    /// The next `newGuid()` value.
    fn new_guid(&self) -> String;
    /// The budgets of the evaluation this environment belongs to, shared by every evaluator over it.
    fn budget(&self) -> &Budget;
}

/// A small environment for tests and one-off evaluations: fixed parameters and variables, no runtime answers.
#[derive(Debug, Default)]
pub struct SimpleEnvironment {
    pub parameters: Object,
    pub variables: Object,
    /// Names of the parameters that are secure (matched ignoring case).
    pub secure_parameters: Vec<String>,
    /// Names of the variables that are secure (matched ignoring case).
    pub secure_variables: Vec<String>,
    pub functions: Vec<Rc<UserFunction>>,
    pub facts: DeploymentFacts,
    pub guid_counter: std::cell::Cell<u64>,
    pub budget: Budget,
}

impl Environment for SimpleEnvironment {
    fn parameter(&self, name: &str) -> Result<Value, EvalError> {
        self.parameters.get(name).cloned().ok_or_else(|| {
            EvalError::expression(format!(
                "The template parameter '{name}' is not found.{}",
                crate::suggest::did_you_mean(name, self.parameters.keys().map(String::as_str))
            ))
        })
    }

    fn variable(&self, name: &str) -> Result<Value, EvalError> {
        self.variables.get(name).cloned().ok_or_else(|| {
            EvalError::expression(format!(
                "The template variable '{name}' is not found.{}",
                crate::suggest::did_you_mean(name, self.variables.keys().map(String::as_str))
            ))
        })
    }

    fn parameter_is_secure(&self, name: &str) -> bool {
        self.secure_parameters
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
    }

    fn variable_is_secure(&self, name: &str) -> bool {
        self.secure_variables
            .iter()
            .any(|v| v.eq_ignore_ascii_case(name))
    }

    fn user_function(&self, namespace: &str, name: &str) -> Option<Rc<UserFunction>> {
        self.functions
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
        Err(EvalError::unavailable(format!(
            "'{}' needs a deployed resource",
            call.name
        )))
    }

    fn new_guid(&self) -> String {
        let n = self.guid_counter.get();
        self.guid_counter.set(n + 1);
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    fn budget(&self) -> &Budget {
        &self.budget
    }
}
