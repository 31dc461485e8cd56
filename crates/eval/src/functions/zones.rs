//! Availability zone mapping functions (`az` namespace): `toLogicalZone(s)` and `toPhysicalZone(s)`.
//!
//! Logical zones (`'1'`, `'2'`, `'3'`) map to physical zones (`'eastus-az1'`) differently in every subscription;
//! ARM reads the mapping from the subscription's locations (`availabilityZoneMappings`). That is deployment data
//! the evaluator does not hold, so after checking the arguments these functions ask the environment's runtime
//! hook, like `reference()`: a host that knows the mappings answers, an offline expansion gets an unevaluated
//! value, and a host without zone data reports that the function is not available.

use super::Args;
use crate::env::RuntimeCall;
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::value::Value;

/// Checks `(subscriptionId, location, zone)` and asks the runtime hook for a single zone.
fn single(ev: &mut Evaluator<'_>, args: &Args) -> Result<Value, FnError> {
    check_scope(args)?;
    let zone = args.string(2)?;
    if zone.trim().is_empty() {
        return Err(FnError::msg("the zone must not be empty."));
    }
    let answer = ev.env().runtime(RuntimeCall {
        name: args.function_name(),
        args: args.as_slice(),
    })?;
    match answer {
        Value::String(_) | Value::Unevaluated(_) => Ok(answer),
        other => Err(FnError::msg(format!(
            "the zone mapping returned a value of type '{}' instead of a string.",
            other.value_type()
        ))),
    }
}

/// Checks `(subscriptionId, location, zones[])` and asks the runtime hook for the mapped zones, in order.
fn many(ev: &mut Evaluator<'_>, args: &Args) -> Result<Value, FnError> {
    check_scope(args)?;
    let zones = args.array(2)?;
    if let Some(position) = zones.iter().position(|z| !matches!(z, Value::String(_))) {
        return Err(FnError::msg(format!(
            "the zones must be strings, but the element at index {position} is of type '{}'.",
            zones[position].value_type()
        )));
    }
    if zones.is_empty() {
        // Nothing to map, so no mapping data is needed.
        return Ok(Value::Array(Vec::new()));
    }
    let answer = ev.env().runtime(RuntimeCall {
        name: args.function_name(),
        args: args.as_slice(),
    })?;
    match answer {
        Value::Array(ref mapped) if mapped.len() == zones.len() => Ok(answer),
        Value::Unevaluated(_) => Ok(answer),
        other => Err(FnError::msg(format!(
            "the zone mapping did not return one zone per input zone (got a value of type '{}').",
            other.value_type()
        ))),
    }
}

fn check_scope(args: &Args) -> Result<(), FnError> {
    if args.string(0)?.trim().is_empty() {
        return Err(FnError::msg("the subscription ID must not be empty."));
    }
    if args.string(1)?.trim().is_empty() {
        return Err(FnError::msg("the location must not be empty."));
    }
    Ok(())
}

/// `toLogicalZone(subscriptionId, location, physicalZone)` → `'1'`.
pub(super) fn to_logical_zone(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    single(ev, &args)
}

/// `toLogicalZones(subscriptionId, location, physicalZones)` → `['1', '2']`.
pub(super) fn to_logical_zones(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    many(ev, &args)
}

/// `toPhysicalZone(subscriptionId, location, logicalZone)` → `'eastus-az1'`.
pub(super) fn to_physical_zone(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    single(ev, &args)
}

/// `toPhysicalZones(subscriptionId, location, logicalZones)` → `['eastus-az1', 'eastus-az2']`.
pub(super) fn to_physical_zones(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    many(ev, &args)
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use crate::env::{DeploymentFacts, Environment, RuntimeCall, SimpleEnvironment, UserFunction};
    use crate::error::EvalError;
    use crate::eval::Evaluator;
    use crate::functions::test_util::{check, check_err, eval};
    use crate::value::Value;

    /// A host that knows one subscription's mapping in eastus: logical 1 → az2, 2 → az3, 3 → az1.
    struct ZoneHost(SimpleEnvironment);

    const MAPPING: [(&str, &str); 3] = [
        ("1", "eastus-az2"),
        ("2", "eastus-az3"),
        ("3", "eastus-az1"),
    ];

    impl ZoneHost {
        fn map(&self, name: &str, zone: &str) -> Result<Value, EvalError> {
            let to_logical = name.to_ascii_lowercase().starts_with("tological");
            MAPPING
                .iter()
                .find(|(l, p)| if to_logical { *p == zone } else { *l == zone })
                .map(|(l, p)| Value::from(if to_logical { *l } else { *p }))
                .ok_or_else(|| EvalError::expression(format!("The zone '{zone}' is not known.")))
        }
    }

    impl Environment for ZoneHost {
        fn parameter(&self, name: &str) -> Result<Value, EvalError> {
            self.0.parameter(name)
        }
        fn variable(&self, name: &str) -> Result<Value, EvalError> {
            self.0.variable(name)
        }
        fn user_function(&self, ns: &str, name: &str) -> Option<Rc<UserFunction>> {
            self.0.user_function(ns, name)
        }
        fn budget(&self) -> &crate::Budget {
            self.0.budget()
        }
        fn facts(&self) -> &DeploymentFacts {
            self.0.facts()
        }
        fn runtime(&self, call: RuntimeCall<'_>) -> Result<Value, EvalError> {
            match &call.args[2] {
                Value::String(zone) => self.map(call.name, zone),
                Value::Array(zones) => zones
                    .iter()
                    .map(|z| self.map(call.name, z.as_str().unwrap_or_default()))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Value::Array),
                _ => Err(EvalError::expression("unexpected zone argument")),
            }
        }
        fn new_guid(&self) -> String {
            self.0.new_guid()
        }
    }

    #[track_caller]
    fn check_host(expr: &str, expected: serde_json::Value) {
        let host = ZoneHost(SimpleEnvironment::default());
        let v = Evaluator::new(&host)
            .eval_string(&format!("[{expr}]"))
            .unwrap_or_else(|e| panic!("{expr} failed: {e}"));
        assert_eq!(v, Value::from(expected), "{expr}");
    }

    const SUB: &str = "'00000000-0000-0000-0000-000000000000'";

    #[test]
    fn mapping_comes_from_the_host() {
        check_host(
            &format!("toLogicalZone({SUB}, 'eastus', 'eastus-az1')"),
            json!("3"),
        );
        check_host(
            &format!("toPhysicalZone({SUB}, 'eastus', '1')"),
            json!("eastus-az2"),
        );
        check_host(
            &format!("toLogicalZones({SUB}, 'eastus', createArray('eastus-az1', 'eastus-az2'))"),
            json!(["3", "1"]),
        );
        check_host(
            &format!("toPhysicalZones({SUB}, 'eastus', createArray('1', '2'))"),
            json!(["eastus-az2", "eastus-az3"]),
        );
    }

    #[test]
    fn empty_zone_lists_need_no_data() {
        // The Bicep test's emptyLogicalZones / emptyPhysicalZones outputs.
        check(
            &format!("toLogicalZones({SUB}, 'eastus', createArray())"),
            json!([]),
        );
        check(
            &format!("toPhysicalZones({SUB}, 'eastus', createArray())"),
            json!([]),
        );
    }

    #[test]
    fn without_zone_data_the_value_is_not_known_yet() {
        let v =
            eval(&format!("toLogicalZone({SUB}, 'eastus', 'eastus-az1')")).expect("unevaluated");
        assert!(matches!(v, Value::Unevaluated(_)), "{v:?}");
        let v = eval(&format!(
            "toPhysicalZones({SUB}, 'eastus', createArray('1'))"
        ))
        .expect("unevaluated");
        assert!(matches!(v, Value::Unevaluated(_)), "{v:?}");
    }

    #[test]
    fn argument_errors() {
        check_err(
            "toLogicalZone('', 'eastus', 'eastus-az1')",
            "subscription ID must not be empty",
        );
        check_err(
            &format!("toLogicalZone({SUB}, '', 'eastus-az1')"),
            "location must not be empty",
        );
        check_err(
            &format!("toPhysicalZone({SUB}, 'eastus', '')"),
            "zone must not be empty",
        );
        check_err(
            &format!("toPhysicalZone({SUB}, 'eastus', 1)"),
            "must be of type 'String'",
        );
        check_err(
            &format!("toLogicalZones({SUB}, 'eastus', 'eastus-az1')"),
            "must be of type 'Array'",
        );
        check_err(
            &format!("toPhysicalZones({SUB}, 'eastus', createArray('1', 2))"),
            "index 1 is of type 'Integer'",
        );
        check_err(
            "toLogicalZone(1, 'eastus', 'eastus-az1')",
            "must be of type 'String'",
        );
        let host = ZoneHost(SimpleEnvironment::default());
        let err = Evaluator::new(&host)
            .eval_string(&format!("[toPhysicalZone({SUB}, 'eastus', '4')]"))
            .expect_err("zone 4 is unknown");
        assert!(err.to_string().contains("'4' is not known"), "{err}");
    }
}
