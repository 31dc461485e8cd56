//! Extension configs: the wrapper items (`{value}`, `{keyVaultReference}`, `{apiReference}`), the older seed forms
//! they are normalised from, and the merge of template defaults with deployment inputs.

use cairn_eval::{Object, Value};

/// The wrapper keys a normalised config item may hold.
pub const WRAPPER_KEYS: [&str; 3] = ["value", "keyVaultReference", "apiReference"];

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn field(o: &Object, key: &str) -> Value {
    o.get(key).cloned().unwrap_or(Value::Null)
}

/// Normalises one config item to `{value}`, `{keyVaultReference}` or `{apiReference}`. Accepts the shipped forms
/// and the seed-document forms: `{reference: {keyVault...}}` (REP 0004), `{runtimeReference}` (REP 0004),
/// typed `{type, value}` items including `keyVaultReference` and `armApiCall`/`apiCall` (REP 0006 early).
pub fn normalize_config_item(item: &Value) -> Result<Value, String> {
    if let Value::Unevaluated(_) = item {
        // Known at deployment time only (e.g. inherited from a config given then): kept as is.
        return Ok(item.clone());
    }
    let Some(o) = item.as_object() else {
        return Err(
            "An extension config property must be an object such as { \"value\": ... }.".into(),
        );
    };
    if o.contains_key("value") && !o.contains_key("type") {
        return Ok(obj(vec![("value", field(o, "value"))]));
    }
    if let Some(kv) = o.get("keyVaultReference").or_else(|| o.get("reference")) {
        check_key_vault_reference(kv)?;
        return Ok(obj(vec![("keyVaultReference", kv.clone())]));
    }
    if let Some(api) = o.get("apiReference") {
        return Ok(obj(vec![("apiReference", api.clone())]));
    }
    if let Some(Value::Object(rt)) = o.get("runtimeReference") {
        return Ok(obj(vec![(
            "apiReference",
            obj(vec![
                ("method", Value::from("POST")),
                ("armResourceId", field(rt, "resourceId")),
                ("apiVersion", field(rt, "apiVersion")),
                ("action", field(rt, "action")),
                ("responseValuePath", field(rt, "propertyPath")),
            ]),
        )]));
    }
    if let Some(ty) = o.get("type").and_then(Value::as_str) {
        let value = field(o, "value");
        if ty.eq_ignore_ascii_case("keyVaultReference") {
            check_key_vault_reference(&value)?;
            return Ok(obj(vec![("keyVaultReference", value)]));
        }
        if ty.eq_ignore_ascii_case("armApiCall") || ty.eq_ignore_ascii_case("apiCall") {
            let call = o
                .get("apiCall")
                .or_else(|| o.get("armApiCall"))
                .cloned()
                .unwrap_or(value);
            let Some(c) = call.as_object() else {
                return Err("An 'armApiCall' config item needs the call object.".into());
            };
            return Ok(obj(vec![(
                "apiReference",
                obj(vec![
                    ("method", field(c, "method")),
                    ("armResourceId", field(c, "resourceId")),
                    ("apiVersion", field(c, "apiVersion")),
                    ("action", field(c, "path")),
                    ("query", field(c, "query")),
                    ("responseValuePath", field(c, "valueJsonPath")),
                ]),
            )]));
        }
        return Ok(obj(vec![("value", value)]));
    }
    if o.is_empty() {
        return Err("An extension config property must hold 'value', 'keyVaultReference' or 'apiReference'.".into());
    }
    Err(format!(
        "Unknown extension config item shape with keys '{}': expected 'value', 'keyVaultReference' or 'apiReference'.",
        o.keys().cloned().collect::<Vec<_>>().join(", ")
    ))
}

fn check_key_vault_reference(v: &Value) -> Result<(), String> {
    let ok = v
        .as_object()
        .and_then(|o| {
            Some((
                o.get("keyVault")?.as_object()?.get("id")?,
                o.get("secretName")?,
            ))
        })
        .is_some();
    if ok {
        Ok(())
    } else {
        Err("A Key Vault reference needs 'keyVault.id' and 'secretName'.".into())
    }
}

/// Overlays `input` items on `defaults` (property by property, case-insensitively).
pub fn merge_config(defaults: &Object, input: &Object) -> Object {
    let mut out = defaults.clone();
    for (k, v) in input {
        out.insert_ci(k.clone(), v.clone());
    }
    out
}

/// Normalises a whole alias value (an object of items, or a typed `{type: object|inherit, value}` entry).
/// `inherit` resolves through `parent` (alias → the parent's effective config).
pub fn normalize_alias_input(
    value: &Value,
    parent: &dyn Fn(&str) -> Option<Object>,
) -> Result<Object, String> {
    if let Value::Unevaluated(_) = value {
        // The whole config is known at deployment time only: nothing to overlay now.
        return Ok(Object::new());
    }
    let Some(o) = value.as_object() else {
        return Err("An extension config must be an object of config properties.".into());
    };
    if let Some(ty) = o.get("type").and_then(Value::as_str)
        && o.contains_key("value")
        && o.len() == 2
    {
        if ty.eq_ignore_ascii_case("inherit") {
            let Some(alias) = o.get("value").and_then(Value::as_str) else {
                return Err(
                    "An 'inherit' extension config needs the parent alias as 'value'.".into(),
                );
            };
            return parent(alias).ok_or_else(|| {
                format!("The parent deployment has no extension with alias '{alias}' to inherit.")
            });
        }
        if ty.eq_ignore_ascii_case("object")
            && let Some(Value::Object(props)) = o.get("value")
        {
            return normalize_items(props);
        }
    }
    normalize_items(o)
}

fn normalize_items(props: &Object) -> Result<Object, String> {
    let mut out = Object::new();
    for (k, v) in props {
        out.insert(
            k.clone(),
            normalize_config_item(v).map_err(|e| format!("{k}: {e}"))?,
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: serde_json::Value) -> serde_json::Value {
        normalize_config_item(&Value::from(v)).unwrap().to_json()
    }

    #[test]
    fn item_forms() {
        assert_eq!(norm(json!({"value": 1})), json!({"value": 1}));
        let kv = json!({"keyVault": {"id": "/kv"}, "secretName": "s"});
        assert_eq!(
            norm(json!({"keyVaultReference": kv})),
            json!({"keyVaultReference": kv})
        );
        assert_eq!(
            norm(json!({"reference": kv})),
            json!({"keyVaultReference": kv})
        );
        assert_eq!(
            norm(json!({"type": "string", "value": "x"})),
            json!({"value": "x"})
        );
        assert_eq!(
            norm(
                json!({"type": "armApiCall", "apiCall": {"method": "POST", "resourceId": "/r", "apiVersion": "v", "path": "listCredential", "valueJsonPath": "$.a"}})
            ),
            json!({"apiReference": {"method": "POST", "armResourceId": "/r", "apiVersion": "v", "action": "listCredential", "responseValuePath": "$.a"}})
        );
        assert!(normalize_config_item(&Value::from(json!({"keyVaultReference": {}}))).is_err());
        assert!(normalize_config_item(&Value::from(json!("x"))).is_err());
    }

    #[test]
    fn inherit() {
        let parent = |a: &str| {
            (a == "k8s").then(|| {
                Object::from_iter([("ns".to_string(), Value::from(json!({"value": "x"})))])
            })
        };
        let got = normalize_alias_input(
            &Value::from(json!({"type": "inherit", "value": "k8s"})),
            &parent,
        )
        .unwrap();
        assert_eq!(Value::Object(got).to_json(), json!({"ns": {"value": "x"}}));
        assert!(
            normalize_alias_input(
                &Value::from(json!({"type": "inherit", "value": "nope"})),
                &parent
            )
            .is_err()
        );
    }
}
