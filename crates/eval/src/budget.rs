//! Evaluation budgets: the limits on one value's size, on the total bytes and steps an evaluation may spend, and
//! on how deeply it may recurse, charged as values are built so a hostile template fails fast instead of
//! exhausting memory or time.
//!
//! A [`Budget`] belongs to a whole evaluation (a deployment's expansion, nested deployments included); every
//! [`crate::Evaluator`] reaches it through [`crate::Environment::budget`], so evaluators created for variables,
//! user functions or nested templates all draw on the same counters.

use std::cell::Cell;
use std::fmt;

use crate::error::{EvalError, EvalErrorKind};
use crate::value::Value;

/// The error code of every exceeded budget.
pub const LIMIT_EXCEEDED: &str = "EvaluationLimitExceeded";

/// Budgets of one evaluation. The defaults follow ARM where it documents a limit (4 MB for the expanded
/// template, so for any value in it) and are cairn's own otherwise; `docs/limits.md` lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalLimits {
    /// Largest value (string, array or object) an expression may produce, as compact JSON bytes. The
    /// arguments of one function call together count as one value.
    pub max_value_bytes: usize,
    /// Bytes of all values produced by function calls and literals during the evaluation, added up. Bounds
    /// the memory an evaluation can hold at once, since everything it holds was produced.
    pub max_total_bytes: u64,
    /// Steps: one per JSON node, expression node and function call evaluated.
    pub max_steps: u64,
    /// Nesting of JSON nodes, expressions, variables, user functions and lambdas being evaluated.
    pub max_depth: usize,
}

impl EvalLimits {
    pub const DEFAULT_MAX_VALUE_BYTES: usize = 4 * 1024 * 1024;
    pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
    pub const DEFAULT_MAX_STEPS: u64 = 10_000_000;
    pub const DEFAULT_MAX_DEPTH: usize = 128;
}

impl Default for EvalLimits {
    fn default() -> Self {
        EvalLimits {
            max_value_bytes: Self::DEFAULT_MAX_VALUE_BYTES,
            max_total_bytes: Self::DEFAULT_MAX_TOTAL_BYTES,
            max_steps: Self::DEFAULT_MAX_STEPS,
            max_depth: Self::DEFAULT_MAX_DEPTH,
        }
    }
}

/// Which budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    ValueBytes,
    TotalBytes,
    Steps,
    Depth,
}

impl Limit {
    /// The setting's name, as `docs/limits.md` and the CLI spell it.
    pub fn setting(self) -> &'static str {
        match self {
            Limit::ValueBytes => "maxValueBytes",
            Limit::TotalBytes => "maxTotalBytes",
            Limit::Steps => "maxSteps",
            Limit::Depth => "maxDepth",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Limit::ValueBytes => "the size of one value",
            Limit::TotalBytes => "the total size of the values produced",
            Limit::Steps => "the number of evaluation steps",
            Limit::Depth => "the evaluation depth",
        };
        f.write_str(what)
    }
}

/// The counters of one evaluation against its [`EvalLimits`]. Interior mutability: evaluators share it by
/// reference through the environment.
#[derive(Debug, Default)]
pub struct Budget {
    limits: EvalLimits,
    steps: Cell<u64>,
    total_bytes: Cell<u64>,
    depth: Cell<usize>,
}

impl Budget {
    pub fn new(limits: EvalLimits) -> Budget {
        Budget {
            limits,
            ..Budget::default()
        }
    }

    pub fn limits(&self) -> &EvalLimits {
        &self.limits
    }

    pub fn steps_used(&self) -> u64 {
        self.steps.get()
    }

    pub fn total_bytes_used(&self) -> u64 {
        self.total_bytes.get()
    }

    fn exceeded(&self, limit: Limit, detail: String) -> EvalError {
        let value = match limit {
            Limit::ValueBytes => self.limits.max_value_bytes as u64,
            Limit::TotalBytes => self.limits.max_total_bytes,
            Limit::Steps => self.limits.max_steps,
            Limit::Depth => self.limits.max_depth as u64,
        };
        EvalError::new(EvalErrorKind::LimitExceeded {
            limit,
            value,
            detail,
        })
    }

    /// Counts one step.
    pub fn step(&self) -> Result<(), EvalError> {
        let used = self.steps.get().saturating_add(1);
        self.steps.set(used);
        if used > self.limits.max_steps {
            return Err(self.exceeded(
                Limit::Steps,
                "the evaluation does too much work".to_string(),
            ));
        }
        Ok(())
    }

    /// Enters one level of nesting; pair with [`Budget::leave`].
    pub fn enter(&self) -> Result<(), EvalError> {
        let depth = self.depth.get();
        if depth >= self.limits.max_depth {
            return Err(self.exceeded(
                Limit::Depth,
                "the evaluation is nested too deeply".to_string(),
            ));
        }
        self.depth.set(depth + 1);
        Ok(())
    }

    pub fn leave(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    /// Refuses a value of `bytes` before it is built. `what` says what was about to be built.
    pub fn check_size(&self, bytes: usize, what: &str) -> Result<(), EvalError> {
        if bytes > self.limits.max_value_bytes {
            return Err(self.exceeded(Limit::ValueBytes, format!("{what}: {bytes} bytes or more")));
        }
        Ok(())
    }

    /// The error for a value found too large while it was being built.
    pub fn value_too_large(&self, what: &str) -> EvalError {
        self.exceeded(
            Limit::ValueBytes,
            format!("{what}: more than {} bytes", self.limits.max_value_bytes),
        )
    }

    /// Charges `bytes` produced to the running total.
    pub fn charge(&self, bytes: usize) -> Result<(), EvalError> {
        let total = self.total_bytes.get().saturating_add(bytes as u64);
        self.total_bytes.set(total);
        if total > self.limits.max_total_bytes {
            return Err(self.exceeded(
                Limit::TotalBytes,
                format!("the values produced add up to {total} bytes or more"),
            ));
        }
        Ok(())
    }

    /// Measures a value produced by `what` against the size limit and charges it to the total; returns its
    /// size. Measuring stops as soon as the limit is passed, so it costs no more than building the value did.
    pub fn produced(&self, value: &Value, what: &str) -> Result<usize, EvalError> {
        let bytes = json_size(value, self.limits.max_value_bytes)
            .ok_or_else(|| self.value_too_large(what))?;
        self.charge(bytes)?;
        Ok(bytes)
    }

    /// A running size for a value built piece by piece (an array, an object, a call's arguments).
    pub fn tally<'b>(&'b self, what: &'b str) -> SizeTally<'b> {
        SizeTally {
            budget: self,
            what,
            bytes: 2,
        }
    }
}

/// The size so far of a value being assembled, refused as soon as it passes the limit.
pub struct SizeTally<'b> {
    budget: &'b Budget,
    what: &'b str,
    bytes: usize,
}

impl SizeTally<'_> {
    /// Adds an element of `bytes` (a separator included).
    pub fn add_bytes(&mut self, bytes: usize) -> Result<(), EvalError> {
        self.bytes = self.bytes.saturating_add(bytes).saturating_add(1);
        self.budget.check_size(self.bytes, self.what)
    }

    /// Measures and adds an element already built elsewhere (not charged again to the total).
    pub fn add(&mut self, value: &Value) -> Result<(), EvalError> {
        let room = self
            .budget
            .limits
            .max_value_bytes
            .saturating_sub(self.bytes);
        match json_size(value, room) {
            Some(bytes) => self.add_bytes(bytes),
            None => Err(self.budget.value_too_large(self.what)),
        }
    }

    /// Adds an object member: its key and value.
    pub fn add_member(&mut self, key: &str, value: &Value) -> Result<(), EvalError> {
        self.add_bytes(key.len() + 3)?;
        self.add(value)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The size of `value` written as compact JSON (string escapes not counted), or `None` when it is more than
/// `cap`. Stops walking once past `cap`.
pub fn json_size(value: &Value, cap: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut pending: Vec<&Value> = vec![value];
    while let Some(v) = pending.pop() {
        let own = match v {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Int(n) => int_width(*n),
            Value::Float(_) => 24,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                pending.extend(items.iter());
                2 + items.len()
            }
            Value::Object(o) => {
                let mut keys = 2usize;
                for (k, v) in o.iter() {
                    keys = keys.saturating_add(k.len() + 4);
                    pending.push(v);
                }
                keys
            }
            Value::Lambda(_) => 8,
            Value::Unevaluated(u) => u.expression.len() + 2,
        };
        total = total.saturating_add(own);
        if total > cap {
            return None;
        }
    }
    Some(total)
}

fn int_width(n: i64) -> usize {
    let sign = usize::from(n < 0);
    let mut digits = 1;
    let mut rest = n.unsigned_abs() / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    sign + digits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Object;

    #[test]
    fn json_size_matches_compact_json_for_plain_values() {
        let mut o = Object::new();
        o.insert(
            "a",
            Value::Array(vec![Value::Int(-12), Value::Bool(false), Value::Null]),
        );
        o.insert("bc", Value::from("xyz"));
        let v = Value::Object(o);
        let text = serde_json::to_string(&v.to_json()).unwrap();
        let size = json_size(&v, usize::MAX).unwrap();
        // Separators are counted generously (one per element plus one per member), never below the real size.
        assert!(size >= text.len(), "{size} < {}", text.len());
        assert!(size <= text.len() + 4, "{size} vs {}", text.len());
    }

    #[test]
    fn json_size_stops_past_the_cap() {
        let v = Value::Array(vec![Value::from("x".repeat(100)); 1000]);
        assert_eq!(json_size(&v, 1000), None);
        assert!(json_size(&v, 1_000_000).is_some());
    }

    #[test]
    fn counters_refuse_past_their_limits() {
        let b = Budget::new(EvalLimits {
            max_value_bytes: 10,
            max_total_bytes: 20,
            max_steps: 2,
            max_depth: 1,
        });
        b.step().unwrap();
        b.step().unwrap();
        let e = b.step().unwrap_err();
        assert_eq!(e.code(), LIMIT_EXCEEDED);
        assert!(e.to_string().contains("maxSteps = 2"), "{e}");
        b.enter().unwrap();
        assert!(b.enter().is_err());
        b.leave();
        b.enter().unwrap();
        assert!(b.check_size(11, "x").is_err());
        b.produced(&Value::from("12345678"), "v").unwrap();
        assert!(b.produced(&Value::from("12345678901"), "v").is_err());
        b.produced(&Value::from("12345678"), "v").unwrap();
        let e = b.produced(&Value::from("12345678"), "v").unwrap_err();
        assert!(e.to_string().contains("maxTotalBytes = 20"), "{e}");
    }
}
