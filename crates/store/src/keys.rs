//! Record keys and the case rules behind them: ARM names and IDs compare case-insensitively, extension
//! identifiers compare exactly.

use std::fmt;

use serde_json::Value;

/// The comparison form of an ARM name, scope or ID: lower case, without a trailing `/`. Every backend stores this
/// beside the original spelling and looks records up by it, so `rg1` and `RG1` are one resource group.
pub fn fold_case(text: &str) -> String {
    text.trim_end_matches('/').to_lowercase()
}

/// A deployment's name within its scope: the user-facing key (`PUT {scope}/providers/Microsoft.Resources/
/// deployments/{name}`), compared case-insensitively.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeploymentKey {
    /// The scope ID: `/subscriptions/{sub}/resourceGroups/{rg}`, `/subscriptions/{sub}`,
    /// `/providers/Microsoft.Management/managementGroups/{mg}`, or `` (empty) for the tenant.
    pub scope: String,
    pub name: String,
}

impl DeploymentKey {
    pub fn new(scope: impl Into<String>, name: impl Into<String>) -> Self {
        DeploymentKey {
            scope: scope.into(),
            name: name.into(),
        }
    }

    /// The folded `(scope, name)` pair this key is stored and compared by.
    pub fn folded(&self) -> (String, String) {
        (fold_case(&self.scope), self.name.to_lowercase())
    }

    /// True when both keys address the same deployment.
    pub fn matches(&self, other: &DeploymentKey) -> bool {
        self.folded() == other.folded()
    }
}

impl fmt::Display for DeploymentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/providers/Microsoft.Resources/deployments/{}",
            self.scope.trim_end_matches('/'),
            self.name
        )
    }
}

/// The store's ID of one deployment run. A PUT that replaces a finished deployment of the same name starts a new
/// run with a new ID; the operation journal and the run's secrets hang off this ID.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeploymentId(String);

impl DeploymentId {
    /// A fresh random ID.
    pub fn generate() -> Self {
        DeploymentId(uuid::Uuid::new_v4().to_string())
    }

    /// An ID as read back from storage or a URL.
    pub fn from_string(id: impl Into<String>) -> Self {
        DeploymentId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeploymentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key of a managed resource in the inventory. Built by the constructors so that the same resource always
/// yields the same key: ARM IDs are case-folded, extension resources are keyed by extension name, configId,
/// resource type and the canonical JSON of their identifiers (object keys sorted recursively, values exact). The
/// extension version and `apiVersion` are not part of it: a resource keeps its key across extension upgrades.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey(String);

impl ResourceKey {
    /// The key of a resource addressed by an ARM resource ID.
    pub fn arm(resource_id: &str) -> Self {
        ResourceKey(format!("arm:{}", fold_case(resource_id)))
    }

    /// The key of an extension resource (REP 0006), `ext:{name}:{configId}:{type}:{identifiers}`: extension name,
    /// configId and resource type compare case-insensitively, identifiers exactly. Two types with equal
    /// identifiers (a ConfigMap and a Secret of one name) are two resources.
    pub fn extension(
        extension_name: &str,
        config_id: Option<&str>,
        resource_type: &str,
        identifiers: &Value,
    ) -> Self {
        let mut key = format!(
            "ext:{}:{}:{}:",
            extension_name.to_lowercase(),
            config_id.map(str::to_lowercase).unwrap_or_default(),
            resource_type.to_lowercase()
        );
        write_canonical_json(identifiers, &mut key);
        ResourceKey(key)
    }

    /// A key as read back from storage.
    pub fn from_stored(key: impl Into<String>) -> Self {
        ResourceKey(key.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Writes `value` as compact JSON with object keys sorted (recursively), so equal documents give equal text
/// whatever their key order.
pub fn write_canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical_json(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical_json(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_keys_compare_case_insensitively() {
        let a = DeploymentKey::new("/subscriptions/S1/resourceGroups/RG/", "Main");
        let b = DeploymentKey::new("/subscriptions/s1/resourcegroups/rg", "main");
        assert!(a.matches(&b));
        assert!(!a.matches(&DeploymentKey::new(
            "/subscriptions/s1/resourcegroups/rg",
            "other"
        )));
    }

    #[test]
    fn deployment_key_displays_as_arm_id() {
        let key = DeploymentKey::new("/subscriptions/s1", "d1");
        assert_eq!(
            key.to_string(),
            "/subscriptions/s1/providers/Microsoft.Resources/deployments/d1"
        );
    }

    #[test]
    fn arm_resource_keys_fold_case() {
        assert_eq!(
            ResourceKey::arm("/subscriptions/A/resourceGroups/B/providers/X.Y/z/N"),
            ResourceKey::arm("/subscriptions/a/resourcegroups/b/providers/x.y/z/n/")
        );
    }

    #[test]
    fn extension_keys_ignore_key_order_but_not_value_case() {
        let a = ResourceKey::extension(
            "Kubernetes",
            Some("3A7F"),
            "core/ConfigMap",
            &json!({"metadata": {"namespace": "app", "name": "s"}}),
        );
        let b = ResourceKey::extension(
            "kubernetes",
            Some("3a7f"),
            "core/configmap",
            &json!({"metadata": {"name": "s", "namespace": "app"}}),
        );
        let c = ResourceKey::extension(
            "kubernetes",
            Some("3a7f"),
            "core/ConfigMap",
            &json!({"metadata": {"name": "S", "namespace": "app"}}),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            a.as_str(),
            r#"ext:kubernetes:3a7f:core/configmap:{"metadata":{"name":"s","namespace":"app"}}"#
        );
    }

    #[test]
    fn extension_keys_tell_types_apart() {
        let identifiers = json!({"metadata": {"namespace": "app", "name": "s"}});
        assert_ne!(
            ResourceKey::extension("Kubernetes", Some("C"), "core/ConfigMap", &identifiers),
            ResourceKey::extension("Kubernetes", Some("C"), "core/Secret", &identifiers),
        );
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((".{0,6}", inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    fn reversed_keys(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), reversed_keys(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(reversed_keys).collect()),
            scalar => scalar.clone(),
        }
    }

    proptest::proptest! {
        #[test]
        fn canonical_json_parses_back_and_ignores_key_order(value in json_value()) {
            let mut text = String::new();
            write_canonical_json(&value, &mut text);
            let parsed: Value = serde_json::from_str(&text).expect("canonical JSON parses");
            proptest::prop_assert_eq!(&parsed, &value);
            let mut reordered = String::new();
            write_canonical_json(&reversed_keys(&value), &mut reordered);
            proptest::prop_assert_eq!(text, reordered);
        }
    }

    #[test]
    fn canonical_json_escapes_keys() {
        let mut out = String::new();
        write_canonical_json(&json!({"b\"": [1, null, true], "a": "x"}), &mut out);
        assert_eq!(out, r#"{"a":"x","b\"":[1,null,true]}"#);
    }
}
