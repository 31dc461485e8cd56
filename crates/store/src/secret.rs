//! Handles for secrets kept encrypted by the store: who owns a secret, and the reference that stands in for its
//! value in every non-secret document (deployment requests, extension configs).

use std::fmt;

use serde_json::{Map, Value};

use crate::keys::DeploymentId;

/// The JSON member that marks a secret reference inside an otherwise plain document.
pub const SECRET_REF_MEMBER: &str = "$cairnSecretRef";

/// Who a secret belongs to. Deleting or replacing a deployment deletes the secrets of its
/// [`SecretOwner::Deployment`]; other owners delete theirs with `SecretStore::delete_secrets`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SecretOwner {
    /// A deployment run: its secure parameter values and secret extension-config values.
    Deployment(DeploymentId),
    /// Anything else (a deployment stack's credential directives, ...): a kind and an ID within it.
    Other { kind: String, id: String },
}

impl SecretOwner {
    /// The `(kind, id)` pair backends store.
    pub fn parts(&self) -> (&str, &str) {
        match self {
            SecretOwner::Deployment(id) => ("deployment", id.as_str()),
            SecretOwner::Other { kind, id } => (kind.as_str(), id.as_str()),
        }
    }

    /// The owner stored as `(kind, id)`.
    pub fn from_parts(kind: &str, id: &str) -> Self {
        if kind == "deployment" {
            SecretOwner::Deployment(DeploymentId::from_string(id))
        } else {
            SecretOwner::Other {
                kind: kind.to_owned(),
                id: id.to_owned(),
            }
        }
    }
}

/// An opaque reference to one stored secret. It is safe to persist, log and print: it reveals nothing about the
/// value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SecretRef(String);

impl SecretRef {
    /// A fresh random reference, for backends creating a secret.
    pub fn generate() -> Self {
        SecretRef(uuid::Uuid::new_v4().to_string())
    }

    /// A reference as read back from storage or a document.
    pub fn from_string(id: impl Into<String>) -> Self {
        SecretRef(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The JSON that stands in for the secret's value in a plain document: `{"$cairnSecretRef": "<id>"}`.
    pub fn to_marker(&self) -> Value {
        let mut map = Map::new();
        map.insert(SECRET_REF_MEMBER.to_owned(), Value::String(self.0.clone()));
        Value::Object(map)
    }

    /// The reference a marker written by [`SecretRef::to_marker`] holds; `None` for any other JSON.
    pub fn from_marker(value: &Value) -> Option<SecretRef> {
        let map = value.as_object()?;
        if map.len() != 1 {
            return None;
        }
        map.get(SECRET_REF_MEMBER)?
            .as_str()
            .map(SecretRef::from_string)
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markers_round_trip() {
        let r = SecretRef::from_string("abc");
        assert_eq!(r.to_marker(), json!({"$cairnSecretRef": "abc"}));
        assert_eq!(SecretRef::from_marker(&r.to_marker()), Some(r));
    }

    #[test]
    fn other_json_is_no_marker() {
        assert_eq!(SecretRef::from_marker(&json!("abc")), None);
        assert_eq!(SecretRef::from_marker(&json!({"$cairnSecretRef": 1})), None);
        assert_eq!(
            SecretRef::from_marker(&json!({"$cairnSecretRef": "a", "b": 1})),
            None
        );
    }

    #[test]
    fn owners_round_trip_through_parts() {
        for owner in [
            SecretOwner::Deployment(DeploymentId::from_string("d1")),
            SecretOwner::Other {
                kind: "stack".into(),
                id: "s1".into(),
            },
        ] {
            let (kind, id) = owner.parts();
            assert_eq!(SecretOwner::from_parts(kind, id), owner);
        }
    }
}
