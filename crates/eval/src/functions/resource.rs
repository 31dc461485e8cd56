//! Resource functions: the resource ID family per scope, and the runtime functions (`reference`, `references`,
//! `resourceInfo`, `list*`, `extensions`, `extensionConfigs`, zones) answered by the environment's hook.

use super::{Args, FunctionDef};
use crate::env::{RuntimeCall, ScopeKind};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::ids;
use crate::value::Value;

pub(super) const FUNCTIONS: &[FunctionDef] = &[
    FunctionDef::eager("resourceId", 2, None, resource_id),
    FunctionDef::eager("subscriptionResourceId", 2, None, subscription_resource_id),
    FunctionDef::eager("tenantResourceId", 2, None, tenant_resource_id),
    FunctionDef::eager(
        "managementGroupResourceId",
        2,
        None,
        management_group_resource_id,
    ),
    FunctionDef::eager("extensionResourceId", 3, None, extension_resource_id),
    FunctionDef::eager("reference", 1, Some(3), runtime),
    FunctionDef::eager("references", 1, Some(2), runtime),
    FunctionDef::eager("resourceInfo", 1, Some(1), runtime),
    FunctionDef::eager("extensions", 1, Some(1), runtime),
    FunctionDef::eager("extensionConfigs", 1, Some(1), runtime),
    FunctionDef::eager("pickZones", 3, Some(5), pick_zones),
    FunctionDef::eager("providers", 1, Some(2), runtime),
    FunctionDef::eager("externalInputs", 1, Some(2), runtime),
];

fn runtime(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(ev.runtime(RuntimeCall {
        name: args.function_name(),
        args: args.as_slice(),
    })?)
}

/// Every `list*` function (`listKeys`, `listSecrets`, ...): `(resourceIdOrName, apiVersion[, body])`.
pub(super) fn list_call(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    Ok(ev.runtime(RuntimeCall {
        name: "list",
        args: args.as_slice(),
    })?)
}

fn strings(args: &Args) -> Result<Vec<&str>, FnError> {
    (0..args.len()).map(|i| args.string(i)).collect()
}

fn id_error(e: ids::IdError) -> FnError {
    FnError::msg(e.to_string())
}

/// Splits `[prefix...], type, names...` at the first argument containing `/`.
fn split_at_type<'a>(all: &[&'a str]) -> Result<(Vec<&'a str>, &'a str, Vec<&'a str>), FnError> {
    let Some(pos) = all.iter().position(|a| a.contains('/')) else {
        return Err(FnError::msg(
            "no argument is a resource type ('Namespace/type').",
        ));
    };
    Ok((all[..pos].to_vec(), all[pos], all[pos + 1..].to_vec()))
}

fn resource_id(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let all = strings(&args)?;
    let (prefix, full_type, names) = split_at_type(&all)?;
    let facts = ev.env().facts();
    let current_sub = facts.subscription_id.as_deref();
    let scope = match prefix.as_slice() {
        [] => match facts.scope {
            ScopeKind::ResourceGroup | ScopeKind::Local => {
                match (current_sub, facts.resource_group.as_deref()) {
                    (Some(s), Some(rg)) => ids::resource_group_scope(s, rg),
                    (Some(s), None) => ids::subscription_scope(s),
                    _ => String::new(),
                }
            }
            ScopeKind::Subscription => current_sub.map(ids::subscription_scope).unwrap_or_default(),
            ScopeKind::ManagementGroup => facts
                .management_group
                .as_deref()
                .map(ids::management_group_scope)
                .unwrap_or_default(),
            ScopeKind::Tenant => String::new(),
        },
        [rg] => {
            let s = current_sub
                .ok_or_else(|| FnError::msg("there is no current subscription at this scope."))?;
            ids::resource_group_scope(s, rg)
        }
        [s, rg] => ids::resource_group_scope(s, rg),
        _ => return Err(FnError::msg("too many arguments before the resource type.")),
    };
    ids::resource_id(&scope, full_type, &names)
        .map(Value::String)
        .map_err(id_error)
}

fn subscription_resource_id(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let all = strings(&args)?;
    let (prefix, full_type, names) = split_at_type(&all)?;
    let sub = match prefix.as_slice() {
        [] => ev
            .env()
            .facts()
            .subscription_id
            .clone()
            .ok_or_else(|| FnError::msg("there is no current subscription at this scope."))?,
        [s] => s.to_string(),
        _ => return Err(FnError::msg("too many arguments before the resource type.")),
    };
    ids::resource_id(&ids::subscription_scope(&sub), full_type, &names)
        .map(Value::String)
        .map_err(id_error)
}

fn tenant_resource_id(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let all = strings(&args)?;
    let (prefix, full_type, names) = split_at_type(&all)?;
    if !prefix.is_empty() {
        return Err(FnError::msg(
            "the first argument must be the resource type.",
        ));
    }
    ids::resource_id("", full_type, &names)
        .map(Value::String)
        .map_err(id_error)
}

fn management_group_resource_id(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let all = strings(&args)?;
    let (prefix, full_type, names) = split_at_type(&all)?;
    let mg =
        match prefix.as_slice() {
            [] => ev.env().facts().management_group.clone().ok_or_else(|| {
                FnError::msg("there is no current management group at this scope.")
            })?,
            [mg] => mg.to_string(),
            _ => return Err(FnError::msg("too many arguments before the resource type.")),
        };
    ids::resource_id(&ids::management_group_scope(&mg), full_type, &names)
        .map(Value::String)
        .map_err(id_error)
}

fn extension_resource_id(_: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let all = strings(&args)?;
    let base = all[0].trim_end_matches('/');
    let full_type = all[1];
    ids::resource_id(base, full_type, &all[2..])
        .map(Value::String)
        .map_err(id_error)
}

/// `pickZones(namespace, type, location[, numberOfZones[, offset]])` from the facts' zone table.
fn pick_zones(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let namespace = args.string(0)?;
    let resource_type = args.string(1)?;
    let location = args.string(2)?;
    let count = if args.len() > 3 { args.int(3)? } else { 1 };
    let offset = if args.len() > 4 { args.int(4)? } else { 0 };
    if count < 0 || offset < 0 {
        return Err(FnError::msg(
            "numberOfZones and offset must not be negative.",
        ));
    }
    let key = format!("{namespace}/{resource_type}");
    let wanted_location: String = location.chars().filter(|c| !c.is_whitespace()).collect();
    let zones = ev
        .env()
        .facts()
        .availability_zones
        .get(&key)
        .and_then(|by_location| {
            by_location.as_object()?.iter().find_map(|(loc, zones)| {
                let loc: String = loc.chars().filter(|c| !c.is_whitespace()).collect();
                loc.eq_ignore_ascii_case(&wanted_location)
                    .then(|| zones.clone())
            })
        });
    let zones = match zones {
        Some(Value::Array(z)) => z,
        _ => return Ok(Value::Array(vec![])),
    };
    Ok(Value::Array(
        zones
            .into_iter()
            .skip(offset as usize)
            .take(count as usize)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::env::SimpleEnvironment;
    use crate::functions::test_util::{check, eval_in};
    use crate::value::Value;
    use serde_json::json;

    #[test]
    fn resource_ids() {
        let mut env = SimpleEnvironment::default();
        env.facts.subscription_id = Some("sub".into());
        env.facts.resource_group = Some("rg".into());
        let id = |e: &str| eval_in(&env, e).unwrap().to_json();
        assert_eq!(
            id("resourceId('Microsoft.Storage/storageAccounts', 'sa')"),
            json!(
                "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa"
            )
        );
        assert_eq!(
            id("resourceId('other', 'Microsoft.Network/virtualNetworks/subnets', 'v', 's')"),
            json!(
                "/subscriptions/sub/resourceGroups/other/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
            )
        );
        assert_eq!(
            id("subscriptionResourceId('Microsoft.Resources/resourceGroups', 'x')"),
            json!("/subscriptions/sub/resourceGroups/x")
        );
        assert!(
            eval_in(
                &env,
                "resourceId('Microsoft.Storage/storageAccounts', 'a', 'b')"
            )
            .is_err()
        );
        check(
            "extensionResourceId('/subscriptions/s', 'Microsoft.Authorization/locks', 'l')",
            json!("/subscriptions/s/providers/Microsoft.Authorization/locks/l"),
        );
        check(
            "tenantResourceId('Microsoft.Foo/bars', 'b')",
            json!("/providers/Microsoft.Foo/bars/b"),
        );
    }

    #[test]
    fn runtime_calls_are_unevaluated_without_a_hook() {
        let v = crate::functions::test_util::eval("reference('x').id").unwrap();
        assert!(matches!(v, Value::Unevaluated(u) if u.expression == "[reference('x').id]"));
        let v = crate::functions::test_util::eval("listKeys('x', '2020-01-01')").unwrap();
        assert!(matches!(v, Value::Unevaluated(_)));
    }

    #[test]
    fn values_built_around_a_runtime_value_keep_what_is_known() {
        // The array's length is known although its element's `id` is not.
        check(
            "length(createArray(createObject('id', reference('x').id)))",
            json!(1),
        );
        let v = crate::functions::test_util::eval("createObject('id', reference('x').id, 'n', 1)")
            .unwrap();
        let o = v.as_object().expect("an object");
        assert_eq!(o.get("n"), Some(&Value::Int(1)));
        assert!(
            matches!(o.get("id"), Some(Value::Unevaluated(u)) if u.expression == "[reference('x').id]")
        );
        // A function that needs the value itself still waits for it, as the whole expression.
        let v = crate::functions::test_util::eval("toUpper(reference('x').id)").unwrap();
        assert!(
            matches!(v, Value::Unevaluated(u) if u.expression == "[toUpper(reference('x').id)]")
        );
    }

    #[test]
    fn a_property_copy_count_known_only_at_deployment_leaves_the_property_unevaluated() {
        let node = cairn_json::parse(
            r#"{"a": 1, "copy": [{"name": "items", "count": "[length(reference('x').list)]", "input": "[copyIndex('items')]"}]}"#,
        )
        .unwrap();
        let env = SimpleEnvironment::default();
        let v = crate::eval::Evaluator::new(&env).eval_node(&node).unwrap();
        let o = v.as_object().expect("an object");
        assert_eq!(o.get("a"), Some(&Value::Int(1)));
        assert!(matches!(o.get("items"), Some(Value::Unevaluated(_))));
    }
}
