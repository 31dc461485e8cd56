//! Evaluation budgets: the limits on one value's size, on the total bytes and steps an evaluation may spend, and
//! on how deeply it may recurse, charged as values are built so a hostile template fails fast instead of
//! exhausting memory or time.
//!
//! A [`Budget`] belongs to a whole evaluation (a deployment's expansion, nested deployments included); every
//! [`crate::Evaluator`] reaches it through [`crate::Environment::budget`], so evaluators created for variables,
//! user functions or nested templates all draw on the same counters.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Bytes of memory of all values produced by function calls and literals during the evaluation, added up
    /// (each value as it is held: its nodes, strings and keys, not its JSON text). Bounds the memory an evaluation
    /// can hold at once, since everything it holds was produced.
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
    /// The budget every evaluation of a server draws on together ([`SharedBudget`]).
    ServerBytes,
}

impl Limit {
    /// The setting's name, as `docs/limits.md` and the CLI spell it.
    pub fn setting(self) -> &'static str {
        match self {
            Limit::ValueBytes => "maxValueBytes",
            Limit::TotalBytes => "maxTotalBytes",
            Limit::Steps => "maxSteps",
            Limit::Depth => "maxDepth",
            Limit::ServerBytes => "maxServerBytes",
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
            Limit::ServerBytes => "the memory all running evaluations of this server hold together",
        };
        f.write_str(what)
    }
}

/// Bytes that every evaluation of one process (a server's concurrent deployments) holds together: each
/// [`Budget`] drawing on it adds what it charges and gives it back when it is dropped, so many deployments each
/// within their own budget cannot together exhaust the server's memory.
#[derive(Debug)]
pub struct SharedBudget {
    limit: u64,
    used: AtomicU64,
}

impl SharedBudget {
    pub fn new(limit: u64) -> Arc<SharedBudget> {
        Arc::new(SharedBudget {
            limit,
            used: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now by the evaluations drawing on it.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
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
    shared: Option<Arc<SharedBudget>>,
}

impl Drop for Budget {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared
                .used
                .fetch_sub(self.total_bytes.get(), Ordering::Relaxed);
        }
    }
}

impl Budget {
    pub fn new(limits: EvalLimits) -> Budget {
        Budget::drawing_on(limits, None)
    }

    /// A budget that also draws on `shared`, the budget of every evaluation of the process.
    pub fn drawing_on(limits: EvalLimits, shared: Option<Arc<SharedBudget>>) -> Budget {
        Budget {
            limits,
            steps: Cell::new(0),
            total_bytes: Cell::new(0),
            depth: Cell::new(0),
            shared,
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
            Limit::ServerBytes => self.shared.as_ref().map_or(0, |s| s.limit),
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

    /// Charges `bytes` produced to the running total (and to the server's, when it draws on one).
    pub fn charge(&self, bytes: usize) -> Result<(), EvalError> {
        let bytes = bytes as u64;
        let total = self.total_bytes.get().saturating_add(bytes);
        self.total_bytes.set(total);
        if let Some(shared) = &self.shared {
            let held = shared
                .used
                .fetch_add(bytes, Ordering::Relaxed)
                .saturating_add(bytes);
            if held > shared.limit {
                return Err(self.exceeded(
                    Limit::ServerBytes,
                    format!(
                        "the running deployments of this server hold {held} bytes of evaluated values or more; \
                         deploy again once fewer run at once, or raise --max-eval-server-bytes"
                    ),
                ));
            }
        }
        if total > self.limits.max_total_bytes {
            return Err(self.exceeded(
                Limit::TotalBytes,
                format!("the values produced add up to {total} bytes or more"),
            ));
        }
        Ok(())
    }

    /// Measures a value produced by `what` against the size limit and charges the memory it holds to the total;
    /// returns its (JSON) size. Measuring stops as soon as the limit is passed, so it costs no more than building
    /// the value did.
    pub fn produced(&self, value: &Value, what: &str) -> Result<usize, EvalError> {
        let (bytes, memory) = measure(value, self.limits.max_value_bytes)
            .ok_or_else(|| self.value_too_large(what))?;
        self.charge(memory)?;
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
    measure(value, cap).map(|(json, _)| json)
}

/// What one value slot holds in place (an array element, an object member's value).
const VALUE_SLOT: usize = std::mem::size_of::<Value>();
/// What an object member holds besides its value and key text: the key's header, its hash and its index.
const MEMBER_OVERHEAD: usize = std::mem::size_of::<String>() + 16;

/// The compact JSON size of `value` (as [`json_size`]) and the memory it holds: every slot, string, key and
/// member as this crate stores them (allocator rounding aside). A small object's member takes ten times its JSON
/// text, so the memory, not the text, is what a total budget must count. `None` when the JSON is more than `cap`.
pub fn measure(value: &Value, cap: usize) -> Option<(usize, usize)> {
    let mut total = 0usize;
    let mut memory = VALUE_SLOT;
    let mut pending: Vec<&Value> = vec![value];
    while let Some(v) = pending.pop() {
        let own = match v {
            Value::Null => 4,
            Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Int(n) => int_width(*n),
            Value::Float(_) => 24,
            Value::String(s) => {
                memory = memory.saturating_add(s.len());
                s.len() + 2
            }
            Value::Array(items) => {
                pending.extend(items.iter());
                memory = memory.saturating_add(items.len().saturating_mul(VALUE_SLOT));
                2 + items.len()
            }
            Value::Object(o) => {
                let mut keys = 2usize;
                for (k, v) in o.iter() {
                    keys = keys.saturating_add(k.len() + 4);
                    memory = memory.saturating_add(k.len() + MEMBER_OVERHEAD + VALUE_SLOT);
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
    Some((total, memory))
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
        // A string of 8 bytes holds its slot and its text.
        let one = (VALUE_SLOT + 8) as u64;
        let b = Budget::new(EvalLimits {
            max_value_bytes: 10,
            max_total_bytes: 2 * one,
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
        assert_eq!(b.total_bytes_used(), one);
        b.produced(&Value::from("12345678"), "v").unwrap();
        let e = b.produced(&Value::from("12345678"), "v").unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("maxTotalBytes = {}", 2 * one)),
            "{e}"
        );
    }

    #[test]
    fn memory_counts_slots_members_and_text() {
        let mut o = Object::new();
        o.insert("ab", Value::from("xyz"));
        o.insert("c", Value::Array(vec![Value::Int(1), Value::Null]));
        let (json, memory) = measure(&Value::Object(o), usize::MAX).unwrap();
        assert!(json >= r#"{"ab":"xyz","c":[1,null]}"#.len());
        let member = MEMBER_OVERHEAD + VALUE_SLOT;
        assert_eq!(
            memory,
            VALUE_SLOT + (2 + member) + 3 + (1 + member) + 2 * VALUE_SLOT
        );
        // A small member takes several times its JSON text.
        assert!(memory > 5 * json, "{memory} vs {json}");
    }

    #[test]
    fn evaluations_share_the_server_budget_until_they_end() {
        let shared = SharedBudget::new(200);
        let limits = EvalLimits {
            max_total_bytes: 150,
            ..EvalLimits::default()
        };
        let first = Budget::drawing_on(limits, Some(shared.clone()));
        let second = Budget::drawing_on(limits, Some(shared.clone()));
        first.charge(120).unwrap();
        second.charge(60).unwrap();
        assert_eq!(shared.used(), 180);
        let e = second.charge(30).unwrap_err();
        assert!(e.to_string().contains("maxServerBytes = 200"), "{e}");
        assert!(e.is_limit());
        drop(first);
        assert_eq!(shared.used(), 90);
        // What the first held is free again: the second goes on within its own budget.
        second.charge(30).unwrap();
        drop(second);
        assert_eq!(shared.used(), 0);
    }
}
