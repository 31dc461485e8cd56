//! The runtime hook the engine gives the template expansion: `reference()` answers from what providers and
//! extensions returned for deployed (or read) resources; `list*()`, Key Vault references and `reference()` of
//! resources outside the template answer from caches. A cache miss is recorded and the expression stays
//! unevaluated; the engine fetches the misses (provider GET or action, Key Vault read) and evaluates again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use cairn_eval::Value;
use cairn_template::{KeyVaultReference, ReferenceRequest, RuntimeHook};
use serde_json::Value as Json;

use crate::secrets::SecretReference;

/// Something a runtime function asked for that is not known yet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Miss {
    /// GET of a resource outside the template.
    Read {
        id: String,
        api_version: Option<String>,
    },
    /// A `list*` action.
    List {
        key: String,
        id: String,
        function: String,
        api_version: String,
        body: Option<Json>,
    },
    /// A Key Vault secret.
    Secret(SecretReference),
}

/// Runtime values shared by every deployment of one run (root and nested): ARM resources by lower-case ID, `list*`
/// responses, Key Vault secrets. Secrets live here only in memory.
#[derive(Default)]
pub(crate) struct RuntimeValues {
    arm: RefCell<HashMap<String, Json>>,
    lists: RefCell<HashMap<String, Json>>,
    secrets: RefCell<HashMap<String, cairn_host::Redacted<String>>>,
}

impl RuntimeValues {
    pub(crate) fn put_arm(&self, id: &str, envelope: Json) {
        self.arm
            .borrow_mut()
            .insert(id.to_ascii_lowercase(), envelope);
    }

    pub(crate) fn put_list(&self, key: String, response: Json) {
        self.lists.borrow_mut().insert(key, response);
    }

    pub(crate) fn put_secret(&self, reference: &SecretReference, value: String) {
        self.secrets
            .borrow_mut()
            .insert(reference.cache_key(), cairn_host::Redacted::new(value));
    }
}

/// The hook of one deployment: its own extension resources (keyed by plan key, which is only unique within a
/// deployment) plus the run's shared values.
pub(crate) struct EngineHook {
    shared: Rc<RuntimeValues>,
    local: RefCell<HashMap<String, Json>>,
    misses: RefCell<Vec<Miss>>,
    /// The hook of a running deployment (not of a preflight or a what-if).
    deploying: bool,
}

impl EngineHook {
    /// A hook for validating or previewing.
    pub(crate) fn new(shared: Rc<RuntimeValues>) -> Self {
        EngineHook {
            shared,
            local: RefCell::new(HashMap::new()),
            misses: RefCell::new(Vec::new()),
            deploying: false,
        }
    }

    /// A hook for a running deployment: what only a run can tell (a `reference()` of a skipped resource) is an
    /// error here.
    pub(crate) fn deploying(shared: Rc<RuntimeValues>) -> Self {
        EngineHook {
            deploying: true,
            ..EngineHook::new(shared)
        }
    }

    pub(crate) fn shared(&self) -> &Rc<RuntimeValues> {
        &self.shared
    }

    /// Records what an extension resource reported (`{properties, identifiers, ...}`) under its plan key.
    pub(crate) fn put_extension(&self, key: &str, envelope: Json) {
        self.local
            .borrow_mut()
            .insert(key.to_ascii_lowercase(), envelope);
    }

    /// The misses since the last call, deduplicated.
    pub(crate) fn take_misses(&self) -> Vec<Miss> {
        let mut misses = std::mem::take(&mut *self.misses.borrow_mut());
        let mut unique: Vec<Miss> = Vec::with_capacity(misses.len());
        for m in misses.drain(..) {
            if !unique.contains(&m) {
                unique.push(m);
            }
        }
        unique
    }

    fn miss(&self, miss: Miss) {
        self.misses.borrow_mut().push(miss);
    }
}

/// The key of a `list*` call in the cache.
pub(crate) fn list_key(id: &str, function: &str, api_version: &str, body: Option<&Json>) -> String {
    format!(
        "{}|{}|{}|{}",
        id.to_ascii_lowercase(),
        function.to_ascii_lowercase(),
        api_version,
        body.map(Json::to_string).unwrap_or_default()
    )
}

fn answer(envelope: &Json, full: bool) -> Value {
    if full {
        return Value::from_json(envelope);
    }
    match envelope.get("properties") {
        Some(p) => Value::from_json(p),
        None => Value::Object(Default::default()),
    }
}

impl RuntimeHook for EngineHook {
    fn deploying(&self) -> bool {
        self.deploying
    }

    fn reference(&self, request: &ReferenceRequest<'_>) -> Option<Value> {
        let key = request.resource_id.to_ascii_lowercase();
        if request.extension.is_some() {
            return self
                .local
                .borrow()
                .get(&key)
                .map(|e| answer(e, request.full));
        }
        if let Some(envelope) = self.shared.arm.borrow().get(&key) {
            return Some(answer(envelope, request.full));
        }
        if request.declared.is_some() {
            // A resource of this template that is not deployed (yet): the dependency order makes this rare, and
            // a GET would only find the old state.
            return None;
        }
        if request.resource_id.starts_with('/') {
            self.miss(Miss::Read {
                id: request.resource_id.to_string(),
                api_version: request.api_version.map(str::to_string),
            });
        }
        None
    }

    fn list(
        &self,
        resource_id: &str,
        function: &str,
        api_version: &str,
        body: Option<&Value>,
    ) -> Option<Value> {
        let body = body.map(Value::to_json);
        let key = list_key(resource_id, function, api_version, body.as_ref());
        if let Some(found) = self.shared.lists.borrow().get(&key) {
            return Some(Value::from_json(found));
        }
        self.miss(Miss::List {
            key,
            id: resource_id.to_string(),
            function: function.to_string(),
            api_version: api_version.to_string(),
            body,
        });
        None
    }

    fn key_vault_secret(&self, reference: &KeyVaultReference) -> Option<Value> {
        let reference = SecretReference {
            vault_id: reference.vault_id.clone(),
            secret_name: reference.secret_name.clone(),
            secret_version: reference.secret_version.clone(),
        };
        if let Some(found) = self.shared.secrets.borrow().get(&reference.cache_key()) {
            return Some(Value::from(found.expose().as_str()));
        }
        self.miss(Miss::Secret(reference));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(id: &str) -> ReferenceRequest<'_> {
        ReferenceRequest {
            resource_id: id,
            api_version: Some("2024-01-01"),
            full: false,
            declared: None,
            existing: false,
            extension: None,
        }
    }

    #[test]
    fn deployed_resources_answer_and_unknown_ones_are_misses() {
        let shared = Rc::new(RuntimeValues::default());
        shared.put_arm("/S/a", json!({"id": "/S/a", "properties": {"x": 1}}));
        let hook = EngineHook::new(shared);
        assert_eq!(
            hook.reference(&request("/s/A")).map(|v| v.to_json()),
            Some(json!({"x": 1}))
        );
        assert!(hook.reference(&request("/s/b")).is_none());
        assert!(hook.reference(&request("/s/b")).is_none());
        assert_eq!(
            hook.take_misses(),
            vec![Miss::Read {
                id: "/s/b".into(),
                api_version: Some("2024-01-01".into())
            }]
        );
        assert!(hook.take_misses().is_empty());
    }

    #[test]
    fn lists_and_secrets_come_from_the_cache() {
        let shared = Rc::new(RuntimeValues::default());
        let hook = EngineHook::new(shared.clone());
        assert!(hook.list("/s/a", "listKeys", "v1", None).is_none());
        let misses = hook.take_misses();
        let [Miss::List { key, .. }] = misses.as_slice() else {
            panic!("expected one list miss: {misses:?}");
        };
        let key = key.clone();
        shared.put_list(key, json!({"keys": []}));
        assert_eq!(
            hook.list("/S/A", "LISTKEYS", "v1", None)
                .map(|v| v.to_json()),
            Some(json!({"keys": []}))
        );
        let kv = KeyVaultReference {
            vault_id: "/kv".into(),
            secret_name: "s".into(),
            secret_version: None,
        };
        assert!(hook.key_vault_secret(&kv).is_none());
        let misses = hook.take_misses();
        let [Miss::Secret(r)] = misses.as_slice() else {
            panic!("expected one secret miss: {misses:?}");
        };
        shared.put_secret(r, "v".into());
        assert_eq!(
            hook.key_vault_secret(&kv).map(|v| v.to_json()),
            Some(json!("v"))
        );
    }
}
