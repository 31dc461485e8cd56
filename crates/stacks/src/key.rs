//! Stable identities of managed resources: [`ResourceKey`], the key stacks diff and order by.
//!
//! An ARM resource is its resource ID compared ignoring case. An extensible resource has no ID; it is the
//! extension's name (ignoring case) and `configId` (the control plane), its type (ignoring case) and its
//! identifiers as canonical JSON (object keys sorted recursively). Alias, deployment ID, extension version and
//! `apiVersion` are deliberately not part of the key (REP 0006; seed 003: the identity "must not change across
//! provider versions"): they change without the resource changing, so moving a template to a new extension
//! version or `apiVersion` keeps its resources instead of deleting and recreating them.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use cairn_arm::ResourceId;
use cairn_extension_contract::canonical::to_canonical_string;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The identity of a managed resource. `Eq`, `Hash` and `Ord` agree with one another and are cheap: they
/// compare pre-folded strings.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKey {
    /// An ARM resource (including resource groups, subscriptions and management groups).
    Arm(ArmKey),
    /// An extensible (non-ARM) resource.
    Extensible(ExtensibleKey),
}

/// An ARM resource ID with its case-folded text, which is what it compares by.
#[derive(Clone)]
pub struct ArmKey {
    folded: Box<str>,
    id: ResourceId,
}

/// The identity of an extensible resource (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtensibleKey {
    extension_name: Box<str>,
    config_id: Option<Box<str>>,
    resource_type: Box<str>,
    identifiers: Box<str>,
}

/// Lower-cases the way [`ResourceId`]'s equality does (per character), so keys and IDs agree.
fn fold(text: &str) -> String {
    if text.is_ascii() {
        text.to_ascii_lowercase()
    } else {
        text.chars().flat_map(char::to_lowercase).collect()
    }
}

impl ArmKey {
    /// The key of an ARM resource ID.
    pub fn new(id: &ResourceId) -> Self {
        Self {
            folded: fold(&id.to_string()).into_boxed_str(),
            id: id.clone(),
        }
    }

    /// The resource ID, with its original casing.
    pub fn id(&self) -> &ResourceId {
        &self.id
    }

    /// The case-folded ID text the key compares by.
    pub fn folded(&self) -> &str {
        &self.folded
    }
}

impl PartialEq for ArmKey {
    fn eq(&self, other: &Self) -> bool {
        self.folded == other.folded
    }
}

impl Eq for ArmKey {}

impl Hash for ArmKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.folded.hash(state);
    }
}

impl PartialOrd for ArmKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ArmKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.folded.cmp(&other.folded)
    }
}

impl ExtensibleKey {
    /// The key of an extensible resource. An empty `config_id` is the same as none.
    pub fn new(
        extension_name: &str,
        config_id: Option<&str>,
        resource_type: &str,
        identifiers: &Value,
    ) -> Self {
        Self {
            extension_name: fold(extension_name).into_boxed_str(),
            config_id: config_id.filter(|c| !c.is_empty()).map(Into::into),
            resource_type: fold(resource_type).into_boxed_str(),
            identifiers: to_canonical_string(identifiers).into_boxed_str(),
        }
    }

    /// The extension name, lower-cased.
    pub fn extension_name(&self) -> &str {
        &self.extension_name
    }

    /// The control plane identifier the extension returned, if any.
    pub fn config_id(&self) -> Option<&str> {
        self.config_id.as_deref()
    }

    /// The resource type, lower-cased.
    pub fn resource_type(&self) -> &str {
        &self.resource_type
    }

    /// The identifiers as canonical JSON.
    pub fn canonical_identifiers(&self) -> &str {
        &self.identifiers
    }

    /// Whether `other` lives in the same control plane (same extension name and `configId`, whatever the
    /// extension versions that reached it).
    pub fn same_control_plane(&self, other: &Self) -> bool {
        self.extension_name == other.extension_name && self.config_id == other.config_id
    }
}

impl ResourceKey {
    /// The key of an ARM resource.
    pub fn arm(id: &ResourceId) -> Self {
        Self::Arm(ArmKey::new(id))
    }

    /// The key of an extensible resource (see [`ExtensibleKey::new`]).
    pub fn extensible(
        extension_name: &str,
        config_id: Option<&str>,
        resource_type: &str,
        identifiers: &Value,
    ) -> Self {
        Self::Extensible(ExtensibleKey::new(
            extension_name,
            config_id,
            resource_type,
            identifiers,
        ))
    }

    /// The ARM resource ID, for ARM keys.
    pub fn arm_id(&self) -> Option<&ResourceId> {
        match self {
            Self::Arm(key) => Some(key.id()),
            Self::Extensible(_) => None,
        }
    }
}

impl fmt::Display for ResourceKey {
    /// ARM keys print their ID as given; extensible keys print `{extension}[{configId}] {type} {identifiers}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Arm(key) => write!(f, "{}", key.id),
            Self::Extensible(key) => {
                write!(f, "{}", key.extension_name)?;
                if let Some(config_id) = &key.config_id {
                    write!(f, "[{config_id}]")?;
                }
                write!(f, " {} {}", key.resource_type, key.identifiers)
            }
        }
    }
}

impl fmt::Debug for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResourceKey({self})")
    }
}

/// The serialized form of a key, shaped like a stack's resource reference: `{"id"}` or
/// `{"extension": {name, configId?}, "type", "identifiers"}`. Keys written before the version left the identity
/// carry `extension.version`; like any unknown field, it is ignored.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<ResourceId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extension: Option<KeyExtension>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identifiers: Option<Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyExtension {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config_id: Option<String>,
}

impl Serialize for ResourceKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let record = match self {
            Self::Arm(key) => KeyRecord {
                id: Some(key.id.clone()),
                extension: None,
                resource_type: None,
                identifiers: None,
            },
            Self::Extensible(key) => KeyRecord {
                id: None,
                extension: Some(KeyExtension {
                    name: key.extension_name.to_string(),
                    config_id: key.config_id.as_deref().map(str::to_owned),
                }),
                resource_type: Some(key.resource_type.to_string()),
                // The canonical text was written from a JSON value, so it always reads back.
                identifiers: Some(
                    serde_json::from_str(&key.identifiers).map_err(serde::ser::Error::custom)?,
                ),
            },
        };
        record.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ResourceKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let record = KeyRecord::deserialize(deserializer)?;
        match (record.id, record.extension) {
            (Some(id), None) => Ok(Self::arm(&id)),
            (None, Some(extension)) => Ok(Self::extensible(
                &extension.name,
                extension.config_id.as_deref(),
                record.resource_type.as_deref().unwrap_or(""),
                record.identifiers.as_ref().unwrap_or(&Value::Null),
            )),
            _ => Err(serde::de::Error::custom(
                "a resource key needs exactly one of 'id' and 'extension'",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed::{ExtensionIdentity, ManagedResource};
    use serde_json::json;

    fn arm(text: &str) -> ResourceKey {
        ResourceKey::arm(&ResourceId::parse(text).unwrap())
    }

    #[test]
    fn arm_keys_ignore_case_and_keyword_spelling() {
        let a = arm("/subscriptions/S/resourceGroups/RG/providers/Microsoft.Web/sites/App");
        let b = arm("/subscriptions/s/resourcegroups/rg/providers/microsoft.web/SITES/app");
        assert_eq!(a, b);
        assert_eq!(a.cmp(&b), Ordering::Equal);
        assert_eq!(
            a.to_string(),
            "/subscriptions/S/resourceGroups/RG/providers/Microsoft.Web/sites/App"
        );
    }

    #[test]
    fn extensible_keys_ignore_identifier_order_but_not_config_id() {
        let key = |config: Option<&str>, ids: Value| {
            ResourceKey::extensible("Kubernetes", config, "core/ConfigMap", &ids)
        };
        let a = key(
            Some("C"),
            json!({"metadata": {"name": "s", "namespace": "app"}}),
        );
        let b = key(
            Some("C"),
            json!({"metadata": {"namespace": "app", "name": "s"}}),
        );
        assert_eq!(a, b);
        assert_ne!(
            a,
            key(
                Some("D"),
                json!({"metadata": {"namespace": "app", "name": "s"}})
            )
        );
        assert_eq!(
            key(Some(""), json!({})),
            key(None, json!({})),
            "an empty configId is no configId"
        );
        assert_eq!(
            ResourceKey::extensible(
                "KUBERNETES",
                Some("C"),
                "Core/configmap",
                &json!({"metadata": {"name": "s", "namespace": "app"}})
            ),
            a
        );
    }

    #[test]
    fn keys_round_trip_through_serde() {
        for key in [
            arm("/subscriptions/s/resourceGroups/rg"),
            ResourceKey::extensible("K", Some("c"), "t", &json!({"b": 1, "a": [2]})),
        ] {
            let text = serde_json::to_string(&key).unwrap();
            let back: ResourceKey = serde_json::from_str(&text).unwrap();
            assert_eq!(back, key, "{text}");
        }
        assert!(serde_json::from_value::<ResourceKey>(json!({})).is_err());
    }

    /// Seed 003: an extensible resource's identity "must not change across provider versions".
    #[test]
    fn extensible_keys_ignore_the_extension_version_but_not_the_type() {
        let ids = json!({"metadata": {"name": "s", "namespace": "app"}});
        let config_map = |version: &str| {
            ManagedResource::extensible(
                ExtensionIdentity {
                    name: "Kubernetes".into(),
                    version: version.into(),
                    config_id: Some("C".into()),
                },
                "core/ConfigMap",
                ids.clone(),
            )
        };
        let old = config_map("1.0.0");
        let new = config_map("1.1.0");
        assert_eq!(old.key(), new.key());
        assert_eq!(old.key().cmp(new.key()), Ordering::Equal);
        let keys = std::collections::HashSet::from([old.key().clone()]);
        assert!(keys.contains(new.key()), "hashes agree with equality");
        assert_eq!(old.key().to_string(), new.key().to_string());
        assert!(!new.key().to_string().contains("1.1.0"));
        let (ResourceKey::Extensible(a), ResourceKey::Extensible(b)) = (old.key(), new.key())
        else {
            panic!("extensible keys");
        };
        assert!(a.same_control_plane(b));
        assert_ne!(
            ResourceKey::extensible("Kubernetes", Some("C"), "core/Secret", &ids),
            *old.key(),
            "a Secret and a ConfigMap with one name are two resources"
        );
    }

    #[test]
    fn keys_written_with_a_version_read_back_without_it() {
        let stored = json!({"extension": {"name": "Widgets", "version": "1.0.0", "configId": "c1"},
                            "type": "widget", "identifiers": {"name": "a"}});
        let key: ResourceKey = serde_json::from_value(stored).unwrap();
        assert_eq!(
            key,
            ResourceKey::extensible("Widgets", Some("c1"), "widget", &json!({"name": "a"}))
        );
        assert_eq!(
            serde_json::to_value(&key).unwrap(),
            json!({"extension": {"name": "widgets", "configId": "c1"},
                   "type": "widget", "identifiers": {"name": "a"}})
        );
    }
}
