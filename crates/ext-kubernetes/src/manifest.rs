//! The resource body is the manifest, as Bicep's Kubernetes types take it (`metadata`, `spec`, `data`,
//! `stringData`, ...): checked, completed with `apiVersion`, `kind` and the namespace, and stripped of
//! cairn's own options before it is applied; and the live object made into the properties a response
//! carries.
//!
//! cairn's options sit beside the manifest's fields and never reach the API server:
//! - `force: true` takes over fields another field manager owns (server-side apply's `force`);
//! - `propagationPolicy: Background | Foreground | Orphan` is how a delete treats dependents. A delete
//!   request carries only identifiers, so the policy is kept on the object as the annotation
//!   [`PROPAGATION_ANNOTATION`] (owned by cairn's field manager: dropping the option drops it).
//! - `waitFor: { condition, status?, timeoutSeconds? }`: the apply is done once the condition holds
//!   ([`crate::readiness`]), kept as the annotation [`WAIT_FOR_ANNOTATION`] for the same reason.
//!
//! Responses carry the live object without the noise every write changes (`managedFields`,
//! `resourceVersion`, `generation`) and without `status` unless the template declared it (cairn's field
//! manager owns part of it), so that what-if and drift compare what the template manages. A Secret's
//! `data` and `stringData` are write-only: no response carries them.

use cairn_extension_sdk::{ExtensionError, Validator};
use serde_json::{Map, Value, json};

use crate::discovery::{ApiKind, TypeName};
use crate::error::{Redactor, k8s_codes};
use crate::readiness::{WAIT_FOR_ANNOTATION, WaitFor};

/// The annotation keeping a resource's `propagationPolicy` for its delete.
pub const PROPAGATION_ANNOTATION: &str = "cairn/propagation-policy";

/// The top-level properties that are cairn's options, not the manifest's.
pub const OPTIONS: &[&str] = &["force", "propagationPolicy", "waitFor"];

/// How a delete treats the object's dependents (Kubernetes' `propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the object now; the garbage collector deletes dependents afterwards (the default).
    #[default]
    Background,
    /// Delete dependents first; the object goes last.
    Foreground,
    /// Delete the object, leave its dependents.
    Orphan,
}

impl Propagation {
    /// Parses the policy's name (case-insensitively).
    pub fn parse(text: &str) -> Option<Propagation> {
        [
            Propagation::Background,
            Propagation::Foreground,
            Propagation::Orphan,
        ]
        .into_iter()
        .find(|policy| policy.as_str().eq_ignore_ascii_case(text))
    }

    /// The Kubernetes name.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        }
    }

    /// The client's form.
    pub fn to_kube(self) -> kube::core::params::PropagationPolicy {
        match self {
            Propagation::Background => kube::core::params::PropagationPolicy::Background,
            Propagation::Foreground => kube::core::params::PropagationPolicy::Foreground,
            Propagation::Orphan => kube::core::params::PropagationPolicy::Orphan,
        }
    }

    /// The policy an object keeps in its [`PROPAGATION_ANNOTATION`], if any.
    pub fn of_object(object: &Value) -> Option<Propagation> {
        object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(PROPAGATION_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(Propagation::parse)
    }
}

/// A manifest to apply.
#[derive(Debug, Clone)]
pub struct Manifest {
    body: Map<String, Value>,
    name: String,
    namespace: Option<String>,
    force: bool,
    propagation: Option<Propagation>,
    wait_for: Option<WaitFor>,
    redactor: Redactor,
}

impl Manifest {
    /// Checks `properties` as a manifest of `type_name`: an object with `metadata.name`, `apiVersion` and
    /// `kind` (when given) matching the type, cairn's options well-formed.
    pub fn parse(properties: Value, type_name: &TypeName) -> Result<Manifest, ExtensionError> {
        let Value::Object(mut body) = properties else {
            return Err(ExtensionError::invalid(
                k8s_codes::INVALID_PROPERTY,
                "/properties",
                "The properties must be the object's manifest (an object with 'metadata', 'spec', ...).",
            ));
        };
        let mut validator = Validator::new();
        let force = match body.remove("force") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(force)) => force,
            Some(_) => {
                validator.error(
                    k8s_codes::INVALID_PROPERTY,
                    "/properties/force",
                    "'force' must be true or false.",
                );
                false
            }
        };
        let propagation = match body.remove("propagationPolicy") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => {
                let policy = Propagation::parse(&text);
                validator.check(
                    policy.is_some(),
                    k8s_codes::INVALID_PROPERTY,
                    "/properties/propagationPolicy",
                    "'propagationPolicy' must be 'Background', 'Foreground' or 'Orphan'.",
                );
                policy
            }
            Some(_) => {
                validator.error(
                    k8s_codes::INVALID_PROPERTY,
                    "/properties/propagationPolicy",
                    "'propagationPolicy' must be 'Background', 'Foreground' or 'Orphan'.",
                );
                None
            }
        };
        let wait_for = match body.remove("waitFor") {
            None | Some(Value::Null) => None,
            Some(value) => WaitFor::parse(value, &mut validator),
        };
        let expected_api_version = type_name.api_version();
        match body.get("apiVersion") {
            None | Some(Value::Null) => {}
            Some(Value::String(api_version)) if *api_version == expected_api_version => {}
            Some(_) => validator.error(
                k8s_codes::INVALID_PROPERTY,
                "/properties/apiVersion",
                format!(
                    "'apiVersion' must be '{expected_api_version}' for this resource type (or be left out)."
                ),
            ),
        }
        match body.get("kind") {
            None | Some(Value::Null) => {}
            Some(Value::String(kind)) if kind.eq_ignore_ascii_case(&type_name.kind) => {}
            Some(_) => validator.error(
                k8s_codes::INVALID_PROPERTY,
                "/properties/kind",
                format!(
                    "'kind' must be '{}' for this resource type (or be left out).",
                    type_name.kind
                ),
            ),
        }
        let mut name = None;
        let mut namespace = None;
        match body.get("metadata") {
            Some(Value::Object(metadata)) => {
                match metadata.get("name") {
                    Some(Value::String(text)) if is_object_name(text) => name = Some(text.clone()),
                    Some(Value::String(_)) => validator.error(
                        k8s_codes::INVALID_PROPERTY,
                        "/properties/metadata/name",
                        "'metadata.name' must be a Kubernetes object name (no '/' or '%', not '.' or '..', \
                         at most 253 characters).",
                    ),
                    _ => validator.error(
                        k8s_codes::INVALID_PROPERTY,
                        "/properties/metadata/name",
                        "'metadata.name' is required (generateName is not supported: the name identifies \
                         the object).",
                    ),
                }
                match metadata.get("namespace") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(text)) if is_dns_label(text) => {
                        namespace = Some(text.clone())
                    }
                    Some(_) => validator.error(
                        k8s_codes::INVALID_PROPERTY,
                        "/properties/metadata/namespace",
                        "'metadata.namespace' must be a namespace name (lower-case letters, digits and '-').",
                    ),
                }
            }
            _ => validator.error(
                k8s_codes::INVALID_PROPERTY,
                "/properties/metadata",
                "The manifest needs 'metadata' with the object's 'name'.",
            ),
        }
        validator.finish()?;
        let Some(name) = name else {
            return Err(ExtensionError::internal(
                "The manifest could not be parsed.",
            ));
        };
        let mut redactor = Redactor::new();
        if type_name.group.is_empty() && type_name.kind == "Secret" {
            secret_values(&body, &mut redactor);
        }
        let mut annotations = Vec::new();
        if let Some(policy) = propagation {
            annotations.push((PROPAGATION_ANNOTATION, policy.as_str().to_owned()));
        }
        if let Some(wait_for) = &wait_for {
            annotations.push((WAIT_FOR_ANNOTATION, wait_for.to_annotation()));
        }
        if !annotations.is_empty() {
            let metadata = body
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .expect("metadata was checked");
            let existing = metadata.entry("annotations").or_insert_with(|| json!({}));
            if let Value::Object(existing) = existing {
                for (key, value) in annotations {
                    existing.insert(key.to_owned(), Value::String(value));
                }
            }
        }
        Ok(Manifest {
            body,
            name,
            namespace,
            force,
            propagation,
            wait_for,
            redactor,
        })
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace the manifest names, if any.
    pub fn declared_namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether the resource asks to take over conflicting fields.
    pub fn force(&self) -> bool {
        self.force
    }

    /// The resource's propagation policy, if it names one.
    pub fn propagation(&self) -> Option<Propagation> {
        self.propagation
    }

    /// The resource's readiness wait, if it asks for one.
    pub fn wait_for(&self) -> Option<&WaitFor> {
        self.wait_for.as_ref()
    }

    /// What cuts this manifest's secret values out of messages.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The namespace the object lives in as `kind` (`None` for cluster-wide kinds): the manifest's, else
    /// `default_namespace`. A namespace on a cluster-wide kind is refused (it would silently be dropped).
    pub fn namespace_for(
        &self,
        kind: &ApiKind,
        default_namespace: &str,
    ) -> Result<Option<String>, ExtensionError> {
        if kind.namespaced {
            Ok(Some(
                self.namespace
                    .clone()
                    .unwrap_or_else(|| default_namespace.to_owned()),
            ))
        } else if self.namespace.is_some() {
            Err(ExtensionError::invalid(
                k8s_codes::INVALID_PROPERTY,
                "/properties/metadata/namespace",
                format!(
                    "{} is cluster-scoped: its manifest must not name a namespace.",
                    kind.name.kind
                ),
            ))
        } else {
            Ok(None)
        }
    }

    /// The body to apply as `kind` in `namespace`: `apiVersion`, `kind` and `metadata.namespace` set.
    pub fn body_for(&self, kind: &ApiKind, namespace: Option<&str>) -> Value {
        let mut body = self.body.clone();
        body.insert("apiVersion".into(), Value::String(kind.name.api_version()));
        body.insert("kind".into(), Value::String(kind.name.kind.clone()));
        if let (Some(namespace), Some(Value::Object(metadata))) =
            (namespace, body.get_mut("metadata"))
        {
            metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
        }
        // apiVersion and kind first, as manifests are written.
        let mut ordered = Map::new();
        for key in ["apiVersion", "kind", "metadata"] {
            if let Some(value) = body.remove(key) {
                ordered.insert(key.to_owned(), value);
            }
        }
        ordered.extend(body);
        Value::Object(ordered)
    }

    /// What a preview that cannot ask the API server predicts: the manifest as it would be sent, with
    /// cairn's options.
    pub fn echo(&self, type_name: &TypeName, namespace: Option<&str>) -> Value {
        let kind = ApiKind {
            name: type_name.clone(),
            plural: String::new(),
            namespaced: namespace.is_some(),
        };
        let mut body = self.body_for(&kind, namespace);
        if let Value::Object(body) = &mut body {
            if type_name.group.is_empty() && type_name.kind == "Secret" {
                body.remove("data");
                body.remove("stringData");
            }
            if let Some(policy) = self.propagation {
                body.insert(
                    "propagationPolicy".into(),
                    Value::String(policy.as_str().into()),
                );
            }
            if let Some(wait_for) = &self.wait_for {
                body.insert(
                    "waitFor".into(),
                    serde_json::to_value(wait_for).unwrap_or_default(),
                );
            }
        }
        body
    }
}

/// A Secret's values, base64 and decoded, for redaction.
fn secret_values(body: &Map<String, Value>, redactor: &mut Redactor) {
    if let Some(Value::Object(string_data)) = body.get("stringData") {
        for value in string_data.values().filter_map(Value::as_str) {
            redactor.add(value);
        }
    }
    if let Some(Value::Object(data)) = body.get("data") {
        for value in data.values().filter_map(Value::as_str) {
            redactor.add(value);
            if let Ok(bytes) = data_encoding::BASE64.decode(value.as_bytes())
                && let Ok(text) = String::from_utf8(bytes)
            {
                redactor.add(&text);
            }
        }
    }
}

/// The identifiers of an object: `{ metadata: { name, namespace } }` (no namespace for cluster-wide kinds).
pub fn identifiers(name: &str, namespace: Option<&str>) -> Value {
    match namespace {
        Some(namespace) => json!({ "metadata": { "name": name, "namespace": namespace } }),
        None => json!({ "metadata": { "name": name } }),
    }
}

/// Name and namespace from identifiers `{ metadata: { name, namespace? } }` (the reference extension's
/// legacy `serverHostHash` is tolerated and ignored).
pub fn parse_identifiers(identifiers: &Value) -> Result<(String, Option<String>), ExtensionError> {
    let invalid = |target: &str, message: &str| {
        ExtensionError::invalid(k8s_codes::INVALID_IDENTIFIER, target, message)
    };
    let Some(metadata) = identifiers.get("metadata").and_then(Value::as_object) else {
        return Err(invalid(
            "/identifiers/metadata",
            "The identifiers must be { metadata: { name, namespace } }.",
        ));
    };
    let name = match metadata.get("name") {
        Some(Value::String(name)) if is_object_name(name) => name.clone(),
        _ => {
            return Err(invalid(
                "/identifiers/metadata/name",
                "'metadata.name' must be a Kubernetes object name.",
            ));
        }
    };
    let namespace = match metadata.get("namespace") {
        None | Some(Value::Null) => None,
        Some(Value::String(namespace)) if is_dns_label(namespace) => Some(namespace.clone()),
        Some(_) => {
            return Err(invalid(
                "/identifiers/metadata/namespace",
                "'metadata.namespace' must be a namespace name.",
            ));
        }
    };
    Ok((name, namespace))
}

/// The live (or dry-run) object as response properties: without `managedFields`, `resourceVersion`,
/// `generation` and `selfLink`; without `status` unless `field_manager` applied part of it; without a
/// Secret's values; with the `propagationPolicy` option read back from its annotation.
pub fn present(mut object: Value, kind: &ApiKind, field_manager: &str) -> Value {
    let Value::Object(body) = &mut object else {
        return object;
    };
    let mut declares_status = false;
    if let Some(Value::Object(metadata)) = body.get_mut("metadata") {
        if let Some(Value::Array(entries)) = metadata.remove("managedFields") {
            declares_status = entries.iter().any(|entry| {
                entry.get("manager").and_then(Value::as_str) == Some(field_manager)
                    && entry.get("operation").and_then(Value::as_str) == Some("Apply")
                    && entry.pointer("/fieldsV1/f:status").is_some()
            });
        }
        for noise in ["resourceVersion", "generation", "selfLink"] {
            metadata.remove(noise);
        }
    }
    if !declares_status {
        body.remove("status");
    }
    if kind.is_secret() {
        body.remove("data");
        body.remove("stringData");
    }
    if let Some(policy) = Propagation::of_object(&object) {
        object["propagationPolicy"] = Value::String(policy.as_str().to_owned());
    }
    if let Some(wait_for) = WaitFor::of_object(&object) {
        object["waitFor"] = serde_json::to_value(wait_for).unwrap_or_default();
    }
    object
}

/// Whether `name` is a namespace name (an RFC 1123 DNS label).
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` can name an object in a URL path (the API server's own rule for every kind; each kind
/// checks its stricter one itself).
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name != "."
        && name != ".."
        && !name.contains(['/', '%'])
        && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn type_name(resource_type: &str) -> TypeName {
        TypeName::parse(resource_type, Some("v1")).unwrap()
    }

    fn kind(resource_type: &str, plural: &str, namespaced: bool) -> ApiKind {
        ApiKind {
            name: type_name(resource_type),
            plural: plural.into(),
            namespaced,
        }
    }

    #[test]
    fn manifests_get_api_version_kind_and_namespace_and_lose_cairn_options() {
        let manifest = Manifest::parse(
            json!({ "metadata": { "name": "app" }, "data": { "a": "1" }, "force": true,
                    "propagationPolicy": "foreground" }),
            &type_name("core/ConfigMap"),
        )
        .unwrap();
        assert!(manifest.force());
        assert_eq!(manifest.propagation(), Some(Propagation::Foreground));
        let config_map = kind("core/ConfigMap", "configmaps", true);
        let namespace = manifest.namespace_for(&config_map, "team").unwrap();
        assert_eq!(namespace.as_deref(), Some("team"));
        assert_eq!(
            manifest.body_for(&config_map, namespace.as_deref()),
            json!({ "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": "app", "namespace": "team",
                                  "annotations": { PROPAGATION_ANNOTATION: "Foreground" } },
                    "data": { "a": "1" } })
        );
        let namespaced = Manifest::parse(
            json!({ "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": "app", "namespace": "own" } }),
            &type_name("core/ConfigMap"),
        )
        .unwrap();
        assert_eq!(
            namespaced
                .namespace_for(&config_map, "team")
                .unwrap()
                .as_deref(),
            Some("own")
        );
        let err = namespaced
            .namespace_for(&kind("core/Namespace", "namespaces", false), "team")
            .unwrap_err();
        assert_eq!(
            err.error().target.as_deref(),
            Some("/properties/metadata/namespace")
        );
    }

    #[test]
    fn bad_manifests_point_at_each_problem() {
        let err = Manifest::parse(
            json!({ "apiVersion": "apps/v1", "kind": "Secret", "metadata": { "namespace": "Bad" },
                    "force": "yes", "propagationPolicy": "Later" }),
            &type_name("core/ConfigMap"),
        )
        .unwrap_err();
        let mut targets: Vec<String> = err
            .error()
            .details
            .clone()
            .unwrap()
            .into_iter()
            .filter_map(|d| d.target)
            .collect();
        targets.sort();
        assert_eq!(
            targets,
            [
                "/properties/apiVersion",
                "/properties/force",
                "/properties/kind",
                "/properties/metadata/name",
                "/properties/metadata/namespace",
                "/properties/propagationPolicy",
            ]
        );
        for bad in [
            json!("x"),
            json!({}),
            json!({ "metadata": { "name": "a/b" } }),
            json!({ "metadata": { "name": ".." } }),
        ] {
            assert!(
                Manifest::parse(bad.clone(), &type_name("core/ConfigMap")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn secret_values_are_registered_for_redaction() {
        let manifest = Manifest::parse(
            json!({ "metadata": { "name": "s" }, "stringData": { "password": "hunter2" },
                    "data": { "token": data_encoding::BASE64.encode(b"t0ken-value") } }),
            &type_name("core/Secret"),
        )
        .unwrap();
        let text = manifest
            .redactor()
            .redact("hunter2 dDBrZW4tdmFsdWU= t0ken-value");
        assert!(
            !text.contains("hunter2") && !text.contains("t0ken"),
            "{text}"
        );
        let echo = manifest.echo(&type_name("core/Secret"), Some("default"));
        assert!(echo.get("stringData").is_none() && echo.get("data").is_none());
    }

    #[test]
    fn live_objects_lose_noise_and_secret_values() {
        let live = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": { "name": "s", "namespace": "n", "uid": "u", "resourceVersion": "7",
                          "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
                          "annotations": { PROPAGATION_ANNOTATION: "Orphan" },
                          "managedFields": [ { "manager": "cairn", "operation": "Apply",
                                               "fieldsV1": { "f:data": {} } } ] },
            "data": { "k": "c2VjcmV0" }, "type": "Opaque", "status": { "x": 1 }
        });
        let shown = present(live, &kind("core/Secret", "secrets", true), "cairn");
        assert_eq!(
            shown,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": "s", "namespace": "n", "uid": "u",
                              "creationTimestamp": "2026-01-01T00:00:00Z",
                              "annotations": { PROPAGATION_ANNOTATION: "Orphan" } },
                "type": "Opaque", "propagationPolicy": "Orphan"
            })
        );
        // A status cairn applied stays.
        let live = json!({
            "metadata": { "name": "c", "managedFields": [
                { "manager": "cairn", "operation": "Apply", "fieldsV1": { "f:status": { "f:phase": {} } } } ] },
            "status": { "phase": "Set" }
        });
        let shown = present(live, &kind("example.com/Thing", "things", true), "cairn");
        assert_eq!(shown["status"], json!({ "phase": "Set" }));
    }

    #[test]
    fn identifiers_round_trip() {
        let ids = identifiers("app", Some("team"));
        assert_eq!(
            parse_identifiers(&ids).unwrap(),
            ("app".into(), Some("team".into()))
        );
        assert_eq!(
            parse_identifiers(&identifiers("ns", None)).unwrap(),
            ("ns".into(), None)
        );
        let legacy = json!({ "metadata": { "name": "a", "serverHostHash": "x" } });
        assert!(parse_identifiers(&legacy).is_ok());
        for bad in [
            json!({}),
            json!({ "metadata": { "name": "" } }),
            json!({ "metadata": { "name": "a", "namespace": 5 } }),
        ] {
            assert_eq!(
                parse_identifiers(&bad).unwrap_err().code(),
                k8s_codes::INVALID_IDENTIFIER
            );
        }
    }
}
