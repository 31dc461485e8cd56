//! The runtime hook: how `reference()`, `list*()` and Key Vault references get answers. Offline expansion uses
//! [`Offline`] (no answers: values stay unevaluated); tests and `--context` use [`ContextRuntime`]; the
//! deployment engine supplies live provider results.

use cairn_eval::Value;

use crate::context::DeploymentContext;
use crate::params::KeyVaultReference;

/// A `reference()` request after the engine has resolved what it points at.
#[derive(Clone, Debug)]
pub struct ReferenceRequest<'a> {
    /// The ARM resource ID, or for an extensible resource its plan key.
    pub resource_id: &'a str,
    pub api_version: Option<&'a str>,
    /// `reference(x, v, 'Full')`: the whole resource envelope instead of `properties`.
    pub full: bool,
    /// The resource as this template declares it (evaluated), when it is one of the template's resources.
    pub declared: Option<&'a Value>,
    /// Declared with `existing: true` (read, never written).
    pub existing: bool,
    /// The extension alias of an extensible resource.
    pub extension: Option<&'a str>,
}

/// Answers runtime functions. `None` means "not known": the expression is kept as an unevaluated marker.
///
/// The answers of [`RuntimeHook::list`] and [`RuntimeHook::key_vault_secret`] are secure: an evaluation that reads
/// them (or a parameter filled from Key Vault) reports errors without quoting any value.
pub trait RuntimeHook {
    fn reference(&self, request: &ReferenceRequest<'_>) -> Option<Value>;
    /// `list*()`: `function` is the name as written (`listKeys`).
    fn list(
        &self,
        resource_id: &str,
        function: &str,
        api_version: &str,
        body: Option<&Value>,
    ) -> Option<Value>;
    /// A Key Vault secret's value for a parameter or config reference.
    fn key_vault_secret(&self, reference: &KeyVaultReference) -> Option<Value>;
    /// Whether the answers come from a deployment that is running, rather than from a validation or a preview.
    /// What only a run can tell apart is an error there and an open value elsewhere: `reference()` of a resource
    /// whose condition is false fails a deployment in ARM, but not its validation.
    fn deploying(&self) -> bool {
        false
    }
}

/// Knows nothing: every runtime value stays unevaluated.
#[derive(Clone, Copy, Debug, Default)]
pub struct Offline;

impl RuntimeHook for Offline {
    fn reference(&self, _: &ReferenceRequest<'_>) -> Option<Value> {
        None
    }
    fn list(&self, _: &str, _: &str, _: &str, _: Option<&Value>) -> Option<Value> {
        None
    }
    fn key_vault_secret(&self, _: &KeyVaultReference) -> Option<Value> {
        None
    }
}

/// Answers from a deployment context: `references`, `listResponses`, and with `echoProvider` a deployed
/// resource's declared properties.
#[derive(Clone, Copy, Debug)]
pub struct ContextRuntime<'c> {
    pub context: &'c DeploymentContext,
}

impl RuntimeHook for ContextRuntime<'_> {
    fn reference(&self, request: &ReferenceRequest<'_>) -> Option<Value> {
        if let Some(refs) = &self.context.references {
            let found = refs
                .iter()
                .find(|(id, _)| id.eq_ignore_ascii_case(request.resource_id));
            if let Some((_, answer)) = found {
                let answer = Value::from_json(answer);
                if request.full {
                    return Some(answer);
                }
                return answer
                    .as_object()
                    .and_then(|o| o.get("properties"))
                    .cloned()
                    .or(Some(Value::Null));
            }
        }
        if !self.context.echo_provider {
            return None;
        }
        let declared = request.declared?;
        if request.full {
            let mut full = declared.as_object().cloned().unwrap_or_default();
            full.insert("id", Value::from(request.resource_id));
            return Some(Value::Object(full));
        }
        if request.extension.is_some() {
            return declared
                .as_object()
                .and_then(|o| o.get("properties"))
                .cloned();
        }
        Some(
            declared
                .as_object()
                .and_then(|o| o.get("properties"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Default::default())),
        )
    }

    fn list(&self, resource_id: &str, function: &str, _: &str, _: Option<&Value>) -> Option<Value> {
        let key = format!("{resource_id}|{}", function.to_ascii_lowercase());
        let responses = self.context.list_responses.as_ref()?;
        responses
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(&key))
            .map(|(_, v)| Value::from_json(v))
    }

    fn key_vault_secret(&self, _: &KeyVaultReference) -> Option<Value> {
        None
    }
}
