//! Array functions, including those ARM shares between arrays, strings and objects: `array`, `concat`,
//! `contains`, `createArray`, `distinct`, `empty`, `first`, `last`, `flatten`, `indexOf`, `lastIndexOf`,
//! `indexFromEnd`, `tryIndexFromEnd`, `intersection`, `union`, `length`, `max`, `min`, `range`, `skip`, `take`.
//!
//! Also the helpers the other collection modules share: value hashing consistent with ARM deep equality,
//! UTF-16 views of strings, and the guard for arguments that are not known before deployment.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::{Object, Value};

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("array", 1, Some(1), array).passes_unevaluated(),
    FunctionDef::eager("concat", 1, None, concat).passes_unevaluated(),
    FunctionDef::eager("contains", 2, Some(2), contains),
    FunctionDef::eager("createArray", 0, None, create_array).passes_unevaluated(),
    FunctionDef::eager("distinct", 1, Some(1), distinct),
    FunctionDef::eager("empty", 1, Some(1), empty).passes_unevaluated(),
    FunctionDef::eager("first", 1, Some(1), first).passes_unevaluated(),
    FunctionDef::eager("last", 1, Some(1), last).passes_unevaluated(),
    FunctionDef::eager("flatten", 1, Some(1), flatten).passes_unevaluated(),
    FunctionDef::eager("indexOf", 2, Some(2), index_of),
    FunctionDef::eager("lastIndexOf", 2, Some(2), last_index_of),
    FunctionDef::eager("indexFromEnd", 2, Some(2), index_from_end).passes_unevaluated(),
    FunctionDef::eager("tryIndexFromEnd", 2, None, try_index_from_end).passes_unevaluated(),
    FunctionDef::eager("intersection", 2, None, intersection),
    FunctionDef::eager("union", 2, None, union).passes_unevaluated(),
    FunctionDef::eager("length", 1, Some(1), length).passes_unevaluated(),
    FunctionDef::eager("max", 1, None, max),
    FunctionDef::eager("min", 1, None, min),
    FunctionDef::eager("range", 2, Some(2), range),
    FunctionDef::eager("skip", 2, Some(2), skip).passes_unevaluated(),
    FunctionDef::eager("take", 2, Some(2), take).passes_unevaluated(),
];

/// `range()` refuses more elements than this.
const MAX_RANGE_COUNT: i64 = 10_000;

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------------

/// Fails with "not available yet" when `value` itself is a runtime value that is not known. Functions marked
/// `passes_unevaluated` call this on the arguments whose shape they must inspect.
pub(super) fn require_known(value: &Value) -> Result<&Value, FnError> {
    match value {
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Ok(other),
    }
}

/// Fails with "not available yet" when `value` holds an unevaluated marker anywhere (for results that depend on
/// comparing or rendering whole values).
pub(super) fn require_fully_known(value: &Value) -> Result<(), FnError> {
    if let Value::Unevaluated(u) = value {
        return Err(FnError::unavailable(u.expression.clone()));
    }
    if value.contains_unevaluated() {
        return Err(FnError::unavailable(
            "a value inside the argument is known only at deployment",
        ));
    }
    Ok(())
}

/// A hash consistent with [`Value`]'s `PartialEq` (ARM deep equality): numbers hash by their double value so
/// `1` and `1.0` collide, and object members hash independently of their order.
pub(super) fn hash_value(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    feed_hash(value, &mut hasher);
    hasher.finish()
}

fn feed_hash(value: &Value, hasher: &mut DefaultHasher) {
    match value {
        Value::Null => 0u8.hash(hasher),
        Value::Bool(b) => {
            1u8.hash(hasher);
            b.hash(hasher);
        }
        Value::Int(i) => {
            2u8.hash(hasher);
            number_bits(*i as f64).hash(hasher);
        }
        Value::Float(x) => {
            2u8.hash(hasher);
            number_bits(*x).hash(hasher);
        }
        Value::String(s) => {
            3u8.hash(hasher);
            s.hash(hasher);
        }
        Value::Array(items) => {
            4u8.hash(hasher);
            items.len().hash(hasher);
            for item in items {
                feed_hash(item, hasher);
            }
        }
        Value::Object(o) => {
            5u8.hash(hasher);
            o.len().hash(hasher);
            let mut members = 0u64;
            for (k, v) in o {
                let mut member = DefaultHasher::new();
                k.hash(&mut member);
                feed_hash(v, &mut member);
                members = members.wrapping_add(member.finish());
            }
            members.hash(hasher);
        }
        Value::Lambda(_) => 6u8.hash(hasher),
        Value::Unevaluated(u) => {
            7u8.hash(hasher);
            u.expression.hash(hasher);
        }
    }
}

/// `0.0` and `-0.0` compare equal, so they must hash alike.
fn number_bits(x: f64) -> u64 {
    if x == 0.0 { 0 } else { x.to_bits() }
}

/// A set of values under ARM deep equality.
#[derive(Default)]
pub(super) struct ValueSet {
    buckets: HashMap<u64, Vec<Value>>,
}

impl ValueSet {
    pub(super) fn contains(&self, value: &Value) -> bool {
        self.buckets
            .get(&hash_value(value))
            .is_some_and(|bucket| bucket.iter().any(|v| v == value))
    }

    /// Adds `value`; false when an equal value was already present.
    pub(super) fn insert(&mut self, value: &Value) -> bool {
        let bucket = self.buckets.entry(hash_value(value)).or_default();
        if bucket.iter().any(|v| v == value) {
            return false;
        }
        bucket.push(value.clone());
        true
    }
}

impl<'a> FromIterator<&'a Value> for ValueSet {
    fn from_iter<I: IntoIterator<Item = &'a Value>>(iter: I) -> ValueSet {
        let mut set = ValueSet::default();
        for v in iter {
            set.insert(v);
        }
        set
    }
}

/// Removes later duplicates (deep equality), keeping the first occurrence of each value in order.
pub(super) fn dedupe(values: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut seen = ValueSet::default();
    values.into_iter().filter(|v| seen.insert(v)).collect()
}

/// The number of UTF-16 code units in `s` (what .NET's `string.Length` counts).
pub(super) fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Rebuilds a string from UTF-16 units. A surrogate pair cut in half (which .NET would keep as a lone
/// surrogate) cannot live in a Rust string and becomes U+FFFD.
pub(super) fn from_utf16(units: &[u16]) -> String {
    String::from_utf16_lossy(units)
}

/// Maps one UTF-16 unit the way .NET's `OrdinalIgnoreCase` does: to its simple upper-case form when that is a
/// single BMP character, else unchanged.
pub(super) fn upper_unit(unit: u16) -> u16 {
    if unit < 0x80 {
        return (unit as u8).to_ascii_uppercase() as u16;
    }
    let Some(c) = char::from_u32(u32::from(unit)) else {
        return unit; // a surrogate half
    };
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u16::try_from(u32::from(u)).unwrap_or(unit),
        _ => unit,
    }
}

/// `s` as UTF-16 units folded for ordinal case-insensitive comparison.
pub(super) fn fold_case_utf16(s: &str) -> Vec<u16> {
    s.encode_utf16().map(upper_unit).collect()
}

/// Index of the first occurrence of `needle` in `haystack` (UTF-16 units), like .NET `IndexOf`.
fn find_units(haystack: &[u16], needle: &[u16]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    if needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Index of the last occurrence. An empty needle is found at the very end (.NET 5+ `LastIndexOf("")` returns
/// the string's length; .NET Framework returned length - 1. We follow .NET Core, as the team decided.)
fn rfind_units(haystack: &[u16], needle: &[u16]) -> Option<usize> {
    if needle.is_empty() {
        return Some(haystack.len());
    }
    if needle.len() > haystack.len() {
        return None;
    }
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// Converts an index or length to the `Int` ARM returns.
fn int_of(n: usize) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Clamps a requested element count to `0..=len`.
fn clamp_count(n: i64, len: usize) -> usize {
    usize::try_from(n.max(0)).unwrap_or(usize::MAX).min(len)
}

// ---------------------------------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------------------------------

fn array(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    match args.take(0) {
        Value::Array(items) => Ok(Value::Array(items)),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Ok(Value::Array(vec![other])),
    }
}

fn create_array(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(Value::Array(args.into_vec()))
}

/// All arrays: their concatenation. Otherwise a string: strings as-is, integers in decimal, booleans as .NET
/// renders them (`True`/`False`), nulls skipped; arrays, objects and floats among strings are an error.
fn concat(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    for v in args.as_slice() {
        require_known(v)?;
    }
    if args.as_slice().iter().all(|v| matches!(v, Value::Array(_))) {
        let mut out = Vec::new();
        for v in args.into_vec() {
            if let Value::Array(items) = v {
                out.extend(items);
            }
        }
        return Ok(Value::Array(out));
    }
    let mut out = String::new();
    for (i, v) in args.as_slice().iter().enumerate() {
        match v {
            Value::String(s) => out.push_str(s),
            Value::Int(n) => out.push_str(&n.to_string()),
            Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Value::Null => {}
            _ => {
                return Err(FnError::msg(format!(
                    "the arguments must be all arrays, or strings, integers, booleans and nulls; the argument at position {} is of type '{}'.",
                    i + 1,
                    v.value_type()
                )));
            }
        }
    }
    Ok(Value::String(out))
}

/// String: case-sensitive substring. Object: key, case-insensitive. Array: an element deep-equal to the item.
fn contains(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let item = &args.as_slice()[1];
    let found = match &args.as_slice()[0] {
        Value::String(s) => match item {
            Value::String(sub) => s.contains(sub.as_str()),
            _ => return Err(args.type_error(1, "String")),
        },
        Value::Object(o) => match item {
            Value::String(key) => o.contains_key(key),
            _ => return Err(args.type_error(1, "String")),
        },
        Value::Array(items) => items.iter().any(|v| v == item),
        _ => return Err(args.type_error(0, "Array, Object or String")),
    };
    Ok(Value::Bool(found))
}

fn distinct(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    match args.take(0) {
        Value::Array(items) => Ok(Value::Array(dedupe(items))),
        other => Err(type_error_for(&other, 1, "Array")),
    }
}

/// The standard type error for a value already taken out of [`Args`].
fn type_error_for(value: &Value, position: usize, expected: &str) -> FnError {
    FnError::msg(format!(
        "the argument at position {position} must be of type '{expected}', but the provided value is of type '{}'.",
        value.value_type()
    ))
}

/// Null, `""`, `[]` and `{}` are empty.
fn empty(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let empty = match require_known(&args.as_slice()[0])? {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => return Err(args.type_error(0, "Array, Object or String")),
    };
    Ok(Value::Bool(empty))
}

/// Array: first element (null when empty). String: first UTF-16 unit (`""` when empty). Null stays null.
fn first(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    match args.take(0) {
        Value::Array(items) => Ok(items.into_iter().next().unwrap_or(Value::Null)),
        Value::String(s) => Ok(Value::String(
            s.encode_utf16()
                .next()
                .map(|u| from_utf16(&[u]))
                .unwrap_or_default(),
        )),
        Value::Null => Ok(Value::Null),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(type_error_for(&other, 1, "Array or String")),
    }
}

/// Array: last element (null when empty). String: last UTF-16 unit (`""` when empty). Null stays null.
fn last(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    match args.take(0) {
        Value::Array(items) => Ok(items.into_iter().next_back().unwrap_or(Value::Null)),
        Value::String(s) => Ok(Value::String(
            s.chars()
                .next_back()
                .map(|c| {
                    let mut buf = [0u16; 2];
                    let units = c.encode_utf16(&mut buf);
                    from_utf16(&units[units.len() - 1..])
                })
                .unwrap_or_default(),
        )),
        Value::Null => Ok(Value::Null),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(type_error_for(&other, 1, "Array or String")),
    }
}

/// Flattens one level: every element must itself be an array.
fn flatten(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let items = match args.take(0) {
        Value::Array(items) => items,
        Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
        other => return Err(type_error_for(&other, 1, "Array")),
    };
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::Array(inner) => out.extend(inner),
            Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
            other => {
                return Err(FnError::msg(format!(
                    "the argument must be an array of arrays, but the element at index {i} is of type '{}'.",
                    other.value_type()
                )));
            }
        }
    }
    Ok(Value::Array(out))
}

/// Where `indexOf`/`lastIndexOf` look.
#[derive(Clone, Copy)]
enum SearchFrom {
    Start,
    End,
}

/// Arrays: deep equality (case-sensitive, no coercion). Strings: ordinal case-insensitive, UTF-16 indices.
/// Null: -1. Not found: -1.
fn search(args: &Args, from: SearchFrom) -> Result<Value, FnError> {
    let item = &args.as_slice()[1];
    let position = match &args.as_slice()[0] {
        Value::Null => None,
        Value::Array(items) => match from {
            SearchFrom::Start => items.iter().position(|v| v == item),
            SearchFrom::End => items.iter().rposition(|v| v == item),
        },
        Value::String(s) => {
            let Value::String(needle) = item else {
                return Err(args.type_error(1, "String"));
            };
            let haystack = fold_case_utf16(s);
            let needle = fold_case_utf16(needle);
            match from {
                SearchFrom::Start => find_units(&haystack, &needle),
                SearchFrom::End => rfind_units(&haystack, &needle),
            }
        }
        _ => return Err(args.type_error(0, "Array or String")),
    };
    Ok(position.map(int_of).unwrap_or(Value::Int(-1)))
}

fn index_of(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    search(&args, SearchFrom::Start)
}

fn last_index_of(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    search(&args, SearchFrom::End)
}

/// The element `n` places from the end (1-based: 1 = last), if any.
pub(super) fn element_from_end(items: &[Value], n: i64) -> Option<&Value> {
    let n = usize::try_from(n).ok().filter(|n| *n >= 1)?;
    items.len().checked_sub(n).and_then(|i| items.get(i))
}

/// `indexFromEnd(array, n)`: Bicep's `x[^n]`. Out of range is an error.
fn index_from_end(_: &mut Evaluator<'_>, mut args: Args) -> Result<Value, FnError> {
    let n = args.int(1)?;
    let items = match args.take(0) {
        Value::Array(items) => items,
        Value::Unevaluated(u) => return Err(FnError::unavailable(u.expression.clone())),
        other => return Err(type_error_for(&other, 1, "Array")),
    };
    element_from_end(&items, n).cloned().ok_or_else(|| {
        FnError::msg(format!(
            "the index from end '{n}' is out of range: it must be between 1 and the array length {}.",
            items.len()
        ))
    })
}

/// `tryIndexFromEnd(array, n, rest...)`: Bicep's `x[?^n]`; a miss is null, and the remaining arguments continue
/// the access chain as in `tryGet`.
fn try_index_from_end(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let values = args.into_vec();
    let start = match (require_known(&values[0])?, &values[1]) {
        (Value::Array(items), Value::Int(n)) => element_from_end(items, *n).cloned(),
        _ => None,
    };
    super::object::walk_access_chain(start.unwrap_or_default(), &values[2..], 3)
}

/// All arguments must be arrays, or all objects.
enum Collections {
    Arrays(Vec<Vec<Value>>),
    Objects(Vec<Object>),
}

fn collections(args: Args) -> Result<Collections, FnError> {
    let values = args.into_vec();
    match values.first() {
        Some(Value::Array(_)) => {
            let mut arrays = Vec::with_capacity(values.len());
            for (i, v) in values.into_iter().enumerate() {
                match v {
                    Value::Array(items) => arrays.push(items),
                    Value::Unevaluated(u) => {
                        return Err(FnError::unavailable(u.expression.clone()));
                    }
                    other => return Err(type_error_for(&other, i + 1, "Array")),
                }
            }
            Ok(Collections::Arrays(arrays))
        }
        Some(Value::Object(_)) => {
            let mut objects = Vec::with_capacity(values.len());
            for (i, v) in values.into_iter().enumerate() {
                match v {
                    Value::Object(o) => objects.push(o),
                    Value::Unevaluated(u) => {
                        return Err(FnError::unavailable(u.expression.clone()));
                    }
                    other => return Err(type_error_for(&other, i + 1, "Object")),
                }
            }
            Ok(Collections::Objects(objects))
        }
        Some(Value::Unevaluated(u)) => Err(FnError::unavailable(u.expression.clone())),
        Some(other) => Err(type_error_for(other, 1, "Array or Object")),
        None => Err(FnError::msg("the function expects at least one argument.")),
    }
}

/// Arrays: the distinct elements present in every array, in the first array's order. Objects: the members
/// (same name, case-sensitive, and deep-equal value) present in every object, in the first object's order.
fn intersection(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match collections(args)? {
        Collections::Arrays(mut arrays) => {
            let first = dedupe(std::mem::take(&mut arrays[0]));
            let others: Vec<ValueSet> = arrays[1..]
                .iter()
                .map(|items| items.iter().collect())
                .collect();
            Ok(Value::Array(
                first
                    .into_iter()
                    .filter(|v| others.iter().all(|set| set.contains(v)))
                    .collect(),
            ))
        }
        Collections::Objects(mut objects) => {
            let first = std::mem::take(&mut objects[0]);
            let rest = &objects[1..];
            let out: Object = first
                .into_iter()
                .filter(|(k, v)| {
                    rest.iter().all(|o| {
                        o.get_entry(k)
                            .is_some_and(|(name, value)| name == k && value == v)
                    })
                })
                .collect();
            Ok(Value::Object(out))
        }
    }
}

/// Merges `patch` into `target`: later values win, nested objects merge recursively, anything else (arrays
/// included) is replaced. Keys match case-insensitively and keep their first spelling, as a .NET JObject merge
/// that assigns into the existing property does. An object meeting an unevaluated marker cannot be merged yet
/// (the marker may turn out to be an object), so the result is unavailable then.
pub(super) fn merge_objects(target: &mut Object, patch: Object) -> Result<(), FnError> {
    for (key, value) in patch {
        match (target.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(inner)) => {
                merge_objects(existing, inner)?
            }
            (Some(Value::Object(_)), Value::Unevaluated(u)) => {
                return Err(FnError::unavailable(u.expression.clone()));
            }
            (Some(Value::Unevaluated(u)), Value::Object(_)) => {
                return Err(FnError::unavailable(u.expression.clone()));
            }
            (Some(slot), value) => *slot = value,
            (None, value) => target.insert(key, value),
        }
    }
    Ok(())
}

/// [`union`] of arrays whose items hold values known only at deployment. An item that differs from every item
/// kept before it in a known part (a member's known value, a member or element count) is kept whatever the
/// unknown parts turn out to be, so the result's length and its known parts stay known (role assignments built
/// from a `reference()`'s principal ID and a fixed role). Only an item that could turn out equal to one kept
/// before it, and so be dropped, leaves the whole result unknown.
fn union_partly_known(items: impl Iterator<Item = Value>) -> Result<Value, FnError> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        let item_known = !item.contains_unevaluated();
        let mut duplicate = false;
        for kept in &out {
            if item_known && !kept.contains_unevaluated() {
                if *kept == item {
                    duplicate = true;
                    break;
                }
            } else if may_equal(kept, &item) {
                require_fully_known(kept)?;
                require_fully_known(&item)?;
            }
        }
        if !duplicate {
            out.push(item);
        }
    }
    Ok(Value::Array(out))
}

/// Whether `a` and `b` could be equal once their unknown parts are known: false only when a known part tells
/// them apart (ARM's deep equality, as [`Value`]'s `PartialEq`).
fn may_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Unevaluated(_), _) | (_, Value::Unevaluated(_)) => true,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| may_equal(v, w))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| may_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Arrays: concatenation without duplicates (first occurrence kept). Objects: recursive merge, later wins.
fn union(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match collections(args)? {
        Collections::Arrays(arrays) => {
            if !arrays.iter().flatten().any(Value::contains_unevaluated) {
                return Ok(Value::Array(dedupe(arrays.into_iter().flatten())));
            }
            union_partly_known(arrays.into_iter().flatten())
        }
        Collections::Objects(objects) => {
            let mut out = Object::new();
            for o in objects {
                merge_objects(&mut out, o)?;
            }
            Ok(Value::Object(out))
        }
    }
}

/// String: UTF-16 units. Array: elements. Object: members. Null: 0 (the lenient reading of an open question:
/// the policy port of ARM's library returns 0 where PSRule fails).
fn length(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    match require_known(&args.as_slice()[0])? {
        Value::String(s) => Ok(int_of(utf16_len(s))),
        Value::Array(items) => Ok(int_of(items.len())),
        Value::Object(o) => Ok(int_of(o.len())),
        Value::Null => Ok(Value::Int(0)),
        _ => Err(args.type_error(0, "Array, Object or String")),
    }
}

/// Which extreme `max`/`min` pick.
#[derive(Clone, Copy, PartialEq)]
enum Extreme {
    Max,
    Min,
}

/// `max(1, 2, ...)` or `max(array)`: integers, or doubles when any value is a double.
fn extreme(args: &Args, which: Extreme) -> Result<Value, FnError> {
    let values: &[Value] = match args.as_slice() {
        [Value::Array(items)] => items,
        all => all,
    };
    if values.is_empty() {
        return Err(FnError::msg("the array must contain at least one number."));
    }
    let mut best_int: Option<i64> = None;
    let mut best_float: Option<f64> = None;
    let mut any_float = false;
    for v in values {
        match v {
            Value::Int(i) => {
                best_int = Some(match (best_int, which) {
                    (Some(b), Extreme::Max) => b.max(*i),
                    (Some(b), Extreme::Min) => b.min(*i),
                    (None, _) => *i,
                });
            }
            Value::Float(_) => any_float = true,
            other => {
                return Err(FnError::msg(format!(
                    "all values must be integers or floats, but one is of type '{}'.",
                    other.value_type()
                )));
            }
        }
    }
    if !any_float {
        return Ok(Value::Int(best_int.unwrap_or_default()));
    }
    for v in values {
        let x = match v {
            Value::Int(i) => *i as f64,
            Value::Float(x) => *x,
            _ => continue,
        };
        best_float = Some(match (best_float, which) {
            (Some(b), Extreme::Max) if b >= x => b,
            (Some(b), Extreme::Min) if b <= x => b,
            _ => x,
        });
    }
    Ok(Value::Float(best_float.unwrap_or(f64::NAN)))
}

fn max(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    extreme(&args, Extreme::Max)
}

fn min(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    extreme(&args, Extreme::Min)
}

/// `range(start, count)`: count in 0..=10000; start is a 32-bit integer and the last element must fit one too
/// (.NET `Enumerable.Range`; the docs phrase it as `start + count <= 2147483647`, one stricter).
fn range(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let start = args.int(0)?;
    let count = args.int(1)?;
    if !(0..=MAX_RANGE_COUNT).contains(&count) {
        return Err(FnError::msg(format!(
            "the count '{count}' must be between 0 and {MAX_RANGE_COUNT}."
        )));
    }
    // `start` is checked against the 32-bit range first, so `start + count - 1` cannot overflow.
    let start_fits = (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&start);
    if !start_fits || start + count - 1 > i64::from(i32::MAX) {
        return Err(FnError::msg(format!(
            "the range starting at '{start}' with {count} element(s) must stay within 32-bit integers."
        )));
    }
    Ok(Value::Array(
        (start..start + count).map(Value::Int).collect(),
    ))
}

/// Which end `skip`/`take` keep.
#[derive(Clone, Copy)]
enum Keep {
    AfterCount,
    FirstCount,
}

/// Arrays and strings (UTF-16 units); a count below 0 acts as 0, above the length as the length. Null stays null.
fn slice(mut args: Args, keep: Keep) -> Result<Value, FnError> {
    let n = args.int(1)?;
    match args.take(0) {
        Value::Array(mut items) => {
            let k = clamp_count(n, items.len());
            Ok(Value::Array(match keep {
                Keep::AfterCount => items.split_off(k),
                Keep::FirstCount => {
                    items.truncate(k);
                    items
                }
            }))
        }
        Value::String(s) => {
            let units: Vec<u16> = s.encode_utf16().collect();
            let k = clamp_count(n, units.len());
            Ok(Value::String(match keep {
                Keep::AfterCount => from_utf16(&units[k..]),
                Keep::FirstCount => from_utf16(&units[..k]),
            }))
        }
        Value::Null => Ok(Value::Null),
        Value::Unevaluated(u) => Err(FnError::unavailable(u.expression.clone())),
        other => Err(type_error_for(&other, 1, "Array or String")),
    }
}

fn skip(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    slice(args, Keep::AfterCount)
}

fn take(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    slice(args, Keep::FirstCount)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::env::SimpleEnvironment;
    use crate::functions::test_util::{check, check_err, eval, eval_in};
    use crate::value::Value;

    /// An environment whose parameters and variables are both `values` (conformance cases use either).
    fn env(values: serde_json::Value) -> SimpleEnvironment {
        let mut env = SimpleEnvironment::default();
        if let Value::Object(o) = Value::from(values) {
            env.parameters = o.clone();
            env.variables = o;
        }
        env
    }

    #[track_caller]
    fn check_in(values: serde_json::Value, expr: &str, expected: serde_json::Value) {
        match eval_in(&env(values), expr) {
            Ok(v) => assert_eq!(
                v,
                Value::from(expected.clone()),
                "{expr} gave {}",
                v.to_json()
            ),
            Err(e) => panic!("{expr} failed: {e}"),
        }
    }

    /// Like `check`, but object key order and int/float distinction matter too.
    #[track_caller]
    fn check_exact(expr: &str, expected: serde_json::Value) {
        let v = eval(expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(v.to_json().to_string(), expected.to_string(), "{expr}");
    }

    #[test]
    fn array_wraps_non_arrays() {
        // conformance: array-array
        check_in(json!({"i": 1}), "array(parameters('i'))", json!([1]));
        check_in(
            json!({"s": "efgh"}),
            "array(parameters('s'))",
            json!(["efgh"]),
        );
        check_in(
            json!({"o": {"a": "b", "c": "d"}}),
            "array(parameters('o'))",
            json!([{"a": "b", "c": "d"}]),
        );
        check("array(createArray(1, 2))", json!([1, 2]));
        check("array(null())", json!([null]));
    }

    #[test]
    fn create_array_takes_anything() {
        // conformance: array-createarray
        check("createArray('a', 'b', 'c')", json!(["a", "b", "c"]));
        check("createArray(1, 2, 3)", json!([1, 2, 3]));
        check_in(
            json!({"o": {"one": "a"}}),
            "createArray(parameters('o'))",
            json!([{"one": "a"}]),
        );
        check_in(
            json!({"a": ["one", "two"]}),
            "createArray(parameters('a'))",
            json!([["one", "two"]]),
        );
        check("createArray()", json!([]));
        check("createArray(8, -13)", json!([8, -13]));
    }

    #[test]
    fn concat_arrays_and_strings() {
        // conformance: array-concat
        check_in(
            json!({"a": ["1-1", "1-2", "1-3"], "b": ["2-1", "2-2", "2-3"]}),
            "concat(parameters('a'), parameters('b'))",
            json!(["1-1", "1-2", "1-3", "2-1", "2-2", "2-3"]),
        );
        check("concat('a', 'b', 'c')", json!("abc"));
        check("concat('n', 1, '-', -2)", json!("n1--2"));
        check("concat('x', true(), false())", json!("xTrueFalse"));
        check("concat('a', null(), 'b')", json!("ab"));
        check("concat(null())", json!(""));
        check("concat(createArray())", json!([]));
        check(
            "concat(createArray(1), createArray(createArray(2)))",
            json!([1, [2]]),
        );
        // conformance: object-json concatObjectOutput builds JSON text with concat
        check(
            "concat('{\"a\": \"', 'demo value', '\"}')",
            json!("{\"a\": \"demo value\"}"),
        );
        check_err(
            "concat(createArray(1), 'a')",
            "position 1 is of type 'Array'",
        );
        check_err(
            "concat('a', createObject())",
            "position 2 is of type 'Object'",
        );
        check_err("concat('a', json('1.5'))", "Float");
        check_err("concat()", "at least 1");
    }

    #[test]
    fn contains_per_type() {
        // conformance: array-contains
        let vals = json!({"s": "OneTwoThree", "o": {"one": "a", "two": "b", "three": "c"}, "a": ["one", "two", "three"]});
        check_in(vals.clone(), "contains(parameters('s'), 'e')", json!(true));
        check_in(vals.clone(), "contains(parameters('s'), 'z')", json!(false));
        check_in(
            vals.clone(),
            "contains(parameters('o'), 'one')",
            json!(true),
        );
        check_in(vals.clone(), "contains(parameters('o'), 'a')", json!(false));
        check_in(
            vals.clone(),
            "contains(parameters('a'), 'three')",
            json!(true),
        );
        check_in(vals, "contains(parameters('a'), 'four')", json!(false));
        // evaluation: indexof_contains_function_evaluation_works
        let vals = json!({"inputString": "FOOBAR", "inputArray": ["FOO", "BAR"]});
        check_in(
            vals.clone(),
            "contains(parameters('inputString'), 'foo')",
            json!(false),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputString'), 'FOO')",
            json!(true),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputString'), 'bar')",
            json!(false),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputString'), 'BAR')",
            json!(true),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputArray'), 'foo')",
            json!(false),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputArray'), 'FOO')",
            json!(true),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputArray'), 'bar')",
            json!(false),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputArray'), 'BAR')",
            json!(true),
        );
        check_in(
            vals.clone(),
            "contains(parameters('inputArray'), false())",
            json!(false),
        );
        check_in(
            vals,
            "contains(parameters('inputArray'), 123)",
            json!(false),
        );
        // object keys ignore case; arrays compare deeply, ints equal floats
        check("contains(createObject('Key', 1), 'kEY')", json!(true));
        check(
            "contains(createArray(createObject('a', createArray(1))), createObject('a', createArray(1)))",
            json!(true),
        );
        check("contains(createArray(1), json('1.0'))", json!(true));
        check("contains(createArray('1'), 1)", json!(false));
        check("contains('', '')", json!(true));
        check_err("contains('abc', 1)", "position 2 must be of type 'String'");
        check_err(
            "contains(createObject(), 1)",
            "position 2 must be of type 'String'",
        );
        check_err(
            "contains(1, 1)",
            "position 1 must be of type 'Array, Object or String'",
        );
        check_err("contains(null(), 'a')", "position 1");
    }

    #[test]
    fn empty_values() {
        // conformance: array-empty, object-null, object-json (empty(json('null')))
        check("empty(createArray())", json!(true));
        check("empty(createObject())", json!(true));
        check("empty('')", json!(true));
        check("empty(null())", json!(true));
        check("empty(json('null'))", json!(true));
        check("empty(createArray(null()))", json!(false));
        check("empty(' ')", json!(false));
        check("empty(createObject('a', null()))", json!(false));
        check_err("empty(0)", "must be of type 'Array, Object or String'");
        check_err("empty(false())", "Boolean");
    }

    #[test]
    fn first_and_last() {
        // conformance: array-first, array-last
        check_in(
            json!({"a": ["one", "two", "three"]}),
            "first(parameters('a'))",
            json!("one"),
        );
        check("first('One Two Three')", json!("O"));
        check_in(
            json!({"a": ["one", "two", "three"]}),
            "last(parameters('a'))",
            json!("three"),
        );
        check("last('One Two Three')", json!("e"));
        check("first(createArray())", json!(null));
        check("last(createArray())", json!(null));
        check("first('')", json!(""));
        check("last('')", json!(""));
        check("first(null())", json!(null));
        check("last(null())", json!(null));
        check("first('é!')", json!("é"));
        // A non-BMP character is two UTF-16 units; .NET returns half of it, which becomes U+FFFD here.
        check("first('😀x')", json!("\u{FFFD}"));
        check("last('x😀')", json!("\u{FFFD}"));
        check_err("first(1)", "must be of type 'Array or String'");
        check_err("last(createObject())", "must be of type 'Array or String'");
    }

    #[test]
    fn flatten_one_level() {
        // evaluation: List_comprehension flattenedArrayOfArrays / flattenedEmptyArray
        check(
            "flatten(createArray(createArray(0, 1), createArray(2, 3), createArray(4, 5)))",
            json!([0, 1, 2, 3, 4, 5]),
        );
        check("flatten(createArray())", json!([]));
        check(
            "flatten(createArray(createArray(createArray(1)), createArray()))",
            json!([[1]]),
        );
        check_err(
            "flatten(createArray(1))",
            "element at index 0 is of type 'Integer'",
        );
        check_err("flatten('ab')", "must be of type 'Array'");
    }

    #[test]
    fn index_of_arrays() {
        // conformance: array-indexof-lastindexof-inline
        let vals = json!({
            "names": ["one", "two", "three"],
            "numbers": [4, 5, 6],
            "collection": [["one", "two", "three"], [4, 5, 6]],
            "duplicates": [1, 2, 3, 1]
        });
        check_in(
            vals.clone(),
            "lastIndexOf(variables('names'), 'two')",
            json!(1),
        );
        check_in(vals.clone(), "indexOf(variables('names'), 'one')", json!(0));
        check_in(
            vals.clone(),
            "lastIndexOf(variables('names'), 'Three')",
            json!(-1),
        );
        check_in(
            vals.clone(),
            "lastIndexOf(variables('numbers'), 4)",
            json!(0),
        );
        check_in(vals.clone(), "indexOf(variables('numbers'), 6)", json!(2));
        check_in(
            vals.clone(),
            "lastIndexOf(variables('numbers'), '5')",
            json!(-1),
        );
        check_in(
            vals.clone(),
            "indexOf(variables('collection'), variables('numbers'))",
            json!(1),
        );
        check_in(
            vals.clone(),
            "indexOf(variables('duplicates'), 1)",
            json!(0),
        );
        check_in(vals, "lastIndexOf(variables('duplicates'), 1)", json!(3));
        // evaluation: indexof_contains_function_evaluation_works
        let vals = json!({"inputArray": ["FOO", "BAR"]});
        check_in(
            vals.clone(),
            "indexOf(parameters('inputArray'), 'foo')",
            json!(-1),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputArray'), 'FOO')",
            json!(0),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputArray'), 'bar')",
            json!(-1),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputArray'), 'BAR')",
            json!(1),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputArray'), false())",
            json!(-1),
        );
        check_in(vals, "indexOf(parameters('inputArray'), 123)", json!(-1));
        check("indexOf(null(), 'a')", json!(-1));
        check(
            "indexOf(createArray(createObject('a', 1, 'b', 2)), createObject('b', 2, 'a', 1))",
            json!(0),
        );
        check_err("indexOf(1, 1)", "must be of type 'Array or String'");
    }

    #[test]
    fn index_of_strings() {
        // conformance: string-indexof
        check("indexOf('test', 't')", json!(0));
        check("lastIndexOf('test', 't')", json!(3));
        check("indexOf('abcdef', 'CD')", json!(2));
        check("lastIndexOf('abcdef', 'AB')", json!(0));
        check("indexOf('abcdef', 'z')", json!(-1));
        // evaluation: indexof_contains_function_evaluation_works
        let vals = json!({"inputString": "FOOBAR"});
        check_in(
            vals.clone(),
            "indexOf(parameters('inputString'), 'foo')",
            json!(0),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputString'), 'FOO')",
            json!(0),
        );
        check_in(
            vals.clone(),
            "indexOf(parameters('inputString'), 'bar')",
            json!(3),
        );
        check_in(vals, "indexOf(parameters('inputString'), 'BAR')", json!(3));
        // Empty needle: 0 from the start; the string length from the end (.NET 5+ behaviour).
        check("indexOf('abcdef', '')", json!(0));
        check("lastIndexOf('abcdef', '')", json!(6));
        check("lastIndexOf('', '')", json!(0));
        check("indexOf('ab', 'abc')", json!(-1));
        // UTF-16 indices and non-ASCII case folding
        check("indexOf('😀ab', 'B')", json!(3));
        check("indexOf('ÄÖÜ', 'öü')", json!(1));
        check("lastIndexOf('abcABC', 'b')", json!(4));
        check_err("indexOf('abc', 1)", "position 2 must be of type 'String'");
        check_err(
            "lastIndexOf('abc', null())",
            "position 2 must be of type 'String'",
        );
    }

    #[test]
    fn index_from_end() {
        check(
            "indexFromEnd(createArray('one', 'two', 'three'), 1)",
            json!("three"),
        );
        check(
            "indexFromEnd(createArray('one', 'two', 'three'), 3)",
            json!("one"),
        );
        check_err(
            "indexFromEnd(createArray('one', 'two', 'three'), 4)",
            "out of range",
        );
        check_err("indexFromEnd(createArray('one'), 0)", "out of range");
        check_err("indexFromEnd(createArray('one'), -1)", "out of range");
        check_err(
            "indexFromEnd(createArray('one'), '1')",
            "position 2 must be of type 'Integer'",
        );
        check_err("indexFromEnd(null(), 1)", "must be of type 'Array'");
    }

    #[test]
    fn try_index_from_end() {
        check(
            "tryIndexFromEnd(createArray('one', 'two', 'three'), 2)",
            json!("two"),
        );
        check(
            "tryIndexFromEnd(createArray('one', 'two', 'three'), 4)",
            json!(null),
        );
        check("tryIndexFromEnd(createArray('one'), 0)", json!(null));
        check("tryIndexFromEnd(createArray('one'), -1)", json!(null));
        check("tryIndexFromEnd(createArray('one'), '1')", json!(null));
        check("tryIndexFromEnd(null(), 1)", json!(null));
        // the rest of the chain, as Bicep emits for `x[?^1].foo` and `x[?^2][^1]`
        check(
            "tryIndexFromEnd(createArray(createObject('foo', 'bar')), 1, 'foo')",
            json!("bar"),
        );
        check(
            "tryIndexFromEnd(createArray(createObject('foo', 'bar')), 1, 'nope')",
            json!(null),
        );
        check(
            "tryIndexFromEnd(createArray(createArray(1, 2), 3), 2, createObject('value', 1, 'fromEnd', true()))",
            json!(2),
        );
        check(
            "tryIndexFromEnd(createArray(createArray(1, 2), 3), 2, createObject('value', 0))",
            json!(1),
        );
        check_err("tryIndexFromEnd(createArray(1), 1, true())", "position 3");
    }

    #[test]
    fn intersection_of_arrays_and_objects() {
        // conformance: array-intersection
        check_exact(
            "intersection(createObject('one', 'a', 'two', 'b', 'three', 'c'), createObject('one', 'a', 'two', 'z', 'three', 'c'))",
            json!({"one": "a", "three": "c"}),
        );
        check_exact(
            "intersection(createArray('one', 'two', 'three'), createArray('two', 'three'))",
            json!(["two", "three"]),
        );
        check_exact(
            "intersection(createArray(3, 1, 1, 2), createArray(1, 2, 3), createArray(2, 1))",
            json!([1, 2]),
        );
        check_exact("intersection(createArray(1), json('[1.0]'))", json!([1]));
        // member names compare case-sensitively, values deeply
        check(
            "intersection(createObject('a', 1), createObject('A', 1))",
            json!({}),
        );
        check(
            "intersection(createObject('a', createObject('x', 1, 'y', 2)), createObject('a', createObject('y', 2, 'x', 1)))",
            json!({"a": {"x": 1, "y": 2}}),
        );
        check_err(
            "intersection(createArray(), createObject())",
            "position 2 must be of type 'Array'",
        );
        check_err(
            "intersection('a', 'b')",
            "position 1 must be of type 'Array or Object'",
        );
        check_err("intersection(createArray())", "at least 2");
    }

    #[test]
    fn union_of_arrays_and_objects() {
        // conformance: array-union
        check_exact(
            "union(createObject('one', 'a', 'two', 'b', 'three', 'c1'), createObject('three', 'c2', 'four', 'd', 'five', 'e'))",
            json!({"one": "a", "two": "b", "three": "c2", "four": "d", "five": "e"}),
        );
        check_exact(
            "union(createArray('one', 'two', 'three'), createArray('three', 'four'))",
            json!(["one", "two", "three", "four"]),
        );
        // documented: nested objects merge recursively, nested arrays are replaced
        check_exact(
            "union(json('{\"property\": {\"one\": \"a\", \"two\": \"b\", \"three\": \"c1\"}, \"nestedArray\": [1, 2]}'), json('{\"property\": {\"three\": \"c2\", \"four\": \"d\", \"five\": \"e\"}, \"nestedArray\": [3, 4]}'))",
            json!({"property": {"one": "a", "two": "b", "three": "c2", "four": "d", "five": "e"}, "nestedArray": [3, 4]}),
        );
        check_exact(
            "union(json('[[\"one\", \"two\"], [\"three\"]]'), json('[[\"three\"], [\"four\", \"two\"]]'))",
            json!([["one", "two"], ["three"], ["four", "two"]]),
        );
        check_exact(
            "union(createArray(1, 1), createArray(json('1.0'), 2))",
            json!([1, 2]),
        );
        // keys merge case-insensitively and keep their first spelling
        check_exact(
            "union(createObject('Name', 1), createObject('name', 2))",
            json!({"Name": 2}),
        );
        check_exact(
            "union(createObject('a', createObject('x', 1)), createObject('a', 2))",
            json!({"a": 2}),
        );
        check_exact(
            "union(createObject('a', 1), createObject('a', null()))",
            json!({"a": null}),
        );
        // evaluation: List_comprehension reduceObjectUnion relies on union with an empty object
        check_exact(
            "union(createObject(), createObject('foo', 123))",
            json!({"foo": 123}),
        );
        check_err(
            "union(createArray(), 'a')",
            "position 2 must be of type 'Array'",
        );
        check_err("union(null(), null())", "Array or Object");
    }

    #[test]
    fn length_counts() {
        // conformance: array-length
        check_in(
            json!({"a": ["one", "two", "three"]}),
            "length(parameters('a'))",
            json!(3),
        );
        check("length('One Two Three')", json!(13));
        check_in(
            json!({"o": {"propA": "one", "propB": "two", "propC": "three", "propD": {"propD-1": "sub", "propD-2": "sub"}}}),
            "length(parameters('o'))",
            json!(4),
        );
        check("length('😀')", json!(2));
        check("length('')", json!(0));
        check("length(null())", json!(0));
        check_err("length(1)", "must be of type 'Array, Object or String'");
    }

    #[test]
    fn max_and_min() {
        // conformance: numeric-max, numeric-min
        check_in(
            json!({"a": [0, 3, 2, 5, 4]}),
            "max(parameters('a'))",
            json!(5),
        );
        check("max(0, 3, 2, 5, 4)", json!(5));
        check_in(
            json!({"a": [0, 3, 2, 5, 4]}),
            "min(parameters('a'))",
            json!(0),
        );
        check("min(0, 3, 2, 5, 4)", json!(0));
        check("max(-5)", json!(-5));
        check("min(createArray(7))", json!(7));
        check_exact("max(1, json('2.5'))", json!(2.5));
        check_exact("min(1, json('2.5'))", json!(1.0));
        check_exact("max(json('[1, 0.5]'))", json!(1.0));
        check_err("max(createArray())", "at least one number");
        check_err("max(1, 'a')", "'String'");
        check_err("min(createArray(1, createArray()))", "'Array'");
        check_err("max(createArray(1), 2)", "'Array'");
    }

    #[test]
    fn range_sequences() {
        // conformance: array-range
        check_in(
            json!({"s": 5, "n": 3}),
            "range(parameters('s'), parameters('n'))",
            json!([5, 6, 7]),
        );
        check("range(0, 0)", json!([]));
        check("range(-3, 2)", json!([-3, -2]));
        check("length(range(1, 10000))", json!(10000));
        check("range(2147483647, 1)", json!([2147483647]));
        check_err("range(0, 10001)", "between 0 and 10000");
        check_err("range(0, -1)", "between 0 and 10000");
        check_err("range(2147483647, 2)", "32-bit");
        check_err("range(-2147483649, 1)", "32-bit");
        check_err("range('0', 1)", "position 1 must be of type 'Integer'");
        check_err("range(json('9223372036854775807'), 2)", "32-bit");
        check_err("range(json('-9223372036854775808'), 2)", "32-bit");
    }

    #[test]
    fn skip_and_take() {
        // conformance: array-skip, array-take
        let vals = json!({"a": ["one", "two", "three"], "s": "one two three"});
        check_in(vals.clone(), "skip(parameters('a'), 2)", json!(["three"]));
        check_in(vals.clone(), "skip(parameters('s'), 4)", json!("two three"));
        check_in(
            vals.clone(),
            "take(parameters('a'), 2)",
            json!(["one", "two"]),
        );
        check_in(vals, "take(parameters('s'), 2)", json!("on"));
        // counts below zero / beyond the length
        check("skip(createArray(1, 2), -1)", json!([1, 2]));
        check("skip(createArray(1, 2), 5)", json!([]));
        check("take(createArray(1, 2), -1)", json!([]));
        check("take(createArray(1, 2), 5)", json!([1, 2]));
        check("skip('abc', 3)", json!(""));
        check("take('abc', 0)", json!(""));
        check("take('abc', 9223372036854775807)", json!("abc"));
        check("take('😀b', 2)", json!("😀"));
        check("skip('😀b', 2)", json!("b"));
        check("skip(null(), 1)", json!(null));
        check_err(
            "take(createObject(), 1)",
            "must be of type 'Array or String'",
        );
        check_err("skip('abc', '1')", "position 2 must be of type 'Integer'");
    }

    #[test]
    fn distinct_keeps_first() {
        check_exact(
            "distinct(createArray(1, 2, 1, 'a', 'A', 'a'))",
            json!([1, 2, "a", "A"]),
        );
        check_exact(
            "distinct(createArray(createObject('a', 1, 'b', 2), createObject('b', 2, 'a', 1)))",
            json!([{"a": 1, "b": 2}]),
        );
        check_exact("distinct(createArray())", json!([]));
        check_err("distinct('abc')", "must be of type 'Array'");
    }

    #[test]
    fn unevaluated_values_pass_through_or_defer() {
        use std::rc::Rc;

        use crate::value::Unevaluated;

        let marker = Value::Unevaluated(Rc::new(Unevaluated {
            expression: "[reference('x').id]".into(),
        }));
        let mut env = SimpleEnvironment::default();
        env.parameters.insert("u", marker.clone());
        let run = |expr: &str| eval_in(&env, expr).map(|v| v.to_json());

        // moved around: known length, element picked out
        assert_eq!(
            run("length(createArray(parameters('u'), 1))").ok(),
            Some(json!(2))
        );
        assert_eq!(
            run("first(createArray(parameters('u')))").ok(),
            Some(json!("[reference('x').id]"))
        );
        // replaced wholesale by a union: known
        assert_eq!(
            run("union(createObject('a', parameters('u')), createObject('a', 1))").ok(),
            Some(json!({"a": 1}))
        );
        // a union of arrays whose partly unknown items a known part tells apart: known length and known parts
        assert_eq!(
            run("length(union(createArray(createObject('p', parameters('u'), 'r', 'a')), createArray(createObject('p', 1, 'r', 'b'), createObject('p', 1, 'r', 'b'))))").ok(),
            Some(json!(2))
        );
        assert_eq!(
            run("union(createArray(createObject('p', parameters('u'))), createArray())").ok(),
            Some(json!([{"p": "[reference('x').id]"}]))
        );
        // inspected: the whole expression becomes unevaluated
        for expr in [
            "length(parameters('u'))",
            // the unknown member may equal the other item's: it may be dropped
            "union(createArray(createObject('p', parameters('u'), 'r', 'a')), createArray(createObject('p', 1, 'r', 'a')))",
            "union(createArray(parameters('u'), parameters('u')), createArray())",
            "concat('a', parameters('u'))",
            "first(parameters('u'))",
            "union(createArray(parameters('u')), createArray(1))",
            "contains(createArray(parameters('u')), 1)",
            "union(createObject('a', createObject('x', 1)), createObject('a', parameters('u')))",
            "union(createObject('a', parameters('u')), createObject('a', createObject('x', 1)))",
        ] {
            let v = eval_in(&env, expr).unwrap_or_else(|e| panic!("{expr} failed: {e}"));
            assert!(matches!(v, Value::Unevaluated(_)), "{expr} gave {v:?}");
        }
    }

    #[test]
    fn value_hash_agrees_with_equality() {
        use super::hash_value;
        let pairs = [
            (json!(1), json!(1.0)),
            (json!(0), json!(-0.0)),
            (json!({"a": 1, "b": [2]}), json!({"b": [2], "a": 1})),
        ];
        for (a, b) in pairs {
            let (a, b) = (Value::from(a), Value::from(b));
            assert_eq!(a, b);
            assert_eq!(hash_value(&a), hash_value(&b));
        }
    }
}
