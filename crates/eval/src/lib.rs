//! Evaluation of ARM template expressions: the value type, the evaluator and the built-in function library.
//!
//! This crate is pure: no I/O, no clock, no randomness of its own. Everything outside the expression (parameters,
//! variables, user functions, deployment facts, runtime functions such as `reference`) comes through the
//! [`Environment`] trait. A runtime value that is not available yields an [`Unevaluated`] marker instead of an
//! error, so templates can be expanded offline.

mod budget;
mod env;
mod error;
mod eval;
pub mod functions;
pub mod ids;
pub mod suggest;
mod value;

pub use budget::{
    Budget, EvalLimits, LIMIT_EXCEEDED, Limit, SharedBudget, SizeTally, json_size, measure,
};
pub use env::{
    DeploymentFacts, Environment, RuntimeCall, ScopeKind, SimpleEnvironment, UserFunction,
    UserFunctionParameter,
};
pub use error::{EvalError, EvalErrorKind, FnError, PathSegment, SECURE_DETAIL, render_path};
pub use eval::{CopyKind, Evaluator, MAX_COPY_COUNT, copy_count, index_value, property};
pub use value::{Lambda, Object, Unevaluated, Value, ValueType};
