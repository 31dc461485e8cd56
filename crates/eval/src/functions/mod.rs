//! The built-in function library: a table of definitions, one module per function family.
//!
//! Each module exports `FUNCTIONS: &[FunctionDef]`. Eager functions get evaluated [`Args`]; lazy ones get the
//! unevaluated argument expressions (`if`, `and`, `or`, `coalesce`, `lambda`). By default an eager function whose
//! arguments contain an [`Value::Unevaluated`] marker is not called: the whole expression becomes unevaluated.
//! Functions that only move values around opt out with [`FunctionDef::passes_unevaluated`].

mod array;
mod cidr;
mod comparison;
mod core;
mod date;
mod hash;
mod lambda;
mod numeric;
mod object;
mod resource;
mod role;
mod scope;
mod string;
#[cfg(test)]
pub(crate) mod test_util;

use std::rc::Rc;
use std::sync::LazyLock;

use cairn_expr::Expr;

use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Lambda, Object, Value, ValueType};

pub type EagerFn = fn(&mut Evaluator<'_>, Args) -> Result<Value, FnError>;
pub type LazyFn = fn(&mut Evaluator<'_>, &[Expr], &Rc<str>) -> Result<Value, FnError>;

#[derive(Clone, Copy)]
pub enum Imp {
    Eager(EagerFn),
    Lazy(LazyFn),
}

/// A built-in function: its name (as documented), arity and implementation.
#[derive(Clone, Copy)]
pub struct FunctionDef {
    pub name: &'static str,
    pub min_args: usize,
    pub max_args: Option<usize>,
    pub imp: Imp,
    /// Called even when an argument holds an unevaluated marker (for functions that only build or pick values).
    pub passes_unevaluated: bool,
}

impl FunctionDef {
    pub const fn eager(
        name: &'static str,
        min_args: usize,
        max_args: Option<usize>,
        f: EagerFn,
    ) -> FunctionDef {
        FunctionDef {
            name,
            min_args,
            max_args,
            imp: Imp::Eager(f),
            passes_unevaluated: false,
        }
    }

    pub const fn lazy(
        name: &'static str,
        min_args: usize,
        max_args: Option<usize>,
        f: LazyFn,
    ) -> FunctionDef {
        FunctionDef {
            name,
            min_args,
            max_args,
            imp: Imp::Lazy(f),
            passes_unevaluated: true,
        }
    }

    pub const fn passes_unevaluated(mut self) -> FunctionDef {
        self.passes_unevaluated = true;
        self
    }
}

/// The table, sorted by lower-case name: lookups binary-search it ignoring case, without allocating.
static TABLE: LazyLock<Vec<(String, FunctionDef)>> = LazyLock::new(|| {
    let families: [&[FunctionDef]; 13] = [
        core::FUNCTIONS,
        array::FUNCTIONS,
        object::FUNCTIONS,
        comparison::FUNCTIONS,
        numeric::FUNCTIONS,
        lambda::FUNCTIONS,
        hash::FUNCTIONS,
        string::FUNCTIONS,
        date::FUNCTIONS,
        cidr::FUNCTIONS,
        scope::FUNCTIONS,
        resource::FUNCTIONS,
        role::FUNCTIONS,
    ];
    let mut table: Vec<(String, FunctionDef)> = families
        .into_iter()
        .flatten()
        .map(|def| (def.name.to_ascii_lowercase(), *def))
        .collect();
    table.sort_by(|a, b| a.0.cmp(&b.0));
    table.dedup_by(|a, b| a.0 == b.0);
    table
});

/// `list*` functions (listKeys, listSecrets, ...) are all answered by the runtime hook.
pub static LIST_FUNCTION: FunctionDef = FunctionDef::eager("list", 2, Some(3), resource::list_call);

/// True for the catch-all definition that serves every `list*` function.
pub fn is_list_function(def: &FunctionDef) -> bool {
    std::ptr::eq(def, &LIST_FUNCTION)
}

/// Finds a built-in function by name, ignoring case.
pub fn lookup(name: &str) -> Option<&'static FunctionDef> {
    let ci_cmp = |entry: &(String, FunctionDef)| {
        entry
            .0
            .bytes()
            .cmp(name.bytes().map(|b| b.to_ascii_lowercase()))
    };
    if let Ok(i) = TABLE.binary_search_by(ci_cmp) {
        return Some(&TABLE[i].1);
    }
    if name.len() >= 4 && name.as_bytes()[..4].eq_ignore_ascii_case(b"list") {
        return Some(&LIST_FUNCTION);
    }
    None
}

/// Every built-in function name (for documentation and tests).
pub fn names() -> Vec<&'static str> {
    let mut names: Vec<_> = TABLE.iter().map(|(_, d)| d.name).collect();
    names.sort_unstable_by_key(|n| n.to_ascii_lowercase());
    names
}

/// Evaluated arguments of an eager call, with typed accessors that produce ARM-style messages.
pub struct Args {
    name: &'static str,
    values: Vec<Value>,
}

impl Args {
    pub fn new(name: &'static str, values: Vec<Value>) -> Args {
        Args { name, values }
    }

    pub fn function_name(&self) -> &'static str {
        self.name
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&Value> {
        self.values.get(i)
    }

    pub fn as_slice(&self) -> &[Value] {
        &self.values
    }

    pub fn into_vec(self) -> Vec<Value> {
        self.values
    }

    /// Moves argument `i` out (leaving null behind).
    pub fn take(&mut self, i: usize) -> Value {
        self.values
            .get_mut(i)
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn type_error(&self, i: usize, expected: &str) -> FnError {
        let actual = self
            .values
            .get(i)
            .map(Value::value_type)
            .unwrap_or(ValueType::Null);
        FnError::msg(format!(
            "the argument at position {} must be of type '{expected}', but the provided value is of type '{actual}'.",
            i + 1
        ))
    }

    pub fn string(&self, i: usize) -> Result<&str, FnError> {
        match self.values.get(i) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(self.type_error(i, "String")),
        }
    }

    pub fn int(&self, i: usize) -> Result<i64, FnError> {
        match self.values.get(i) {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(self.type_error(i, "Integer")),
        }
    }

    pub fn bool(&self, i: usize) -> Result<bool, FnError> {
        match self.values.get(i) {
            Some(Value::Bool(b)) => Ok(*b),
            _ => Err(self.type_error(i, "Boolean")),
        }
    }

    pub fn array(&self, i: usize) -> Result<&Vec<Value>, FnError> {
        match self.values.get(i) {
            Some(Value::Array(a)) => Ok(a),
            _ => Err(self.type_error(i, "Array")),
        }
    }

    pub fn object(&self, i: usize) -> Result<&Object, FnError> {
        match self.values.get(i) {
            Some(Value::Object(o)) => Ok(o),
            _ => Err(self.type_error(i, "Object")),
        }
    }

    pub fn lambda(&self, i: usize) -> Result<Rc<Lambda>, FnError> {
        match self.values.get(i) {
            Some(Value::Lambda(l)) => Ok(l.clone()),
            _ => Err(self.type_error(i, "Lambda")),
        }
    }
}
