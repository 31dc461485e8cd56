//! The Kubernetes extension's types in Bicep's type format. Kinds are open-ended (any installed CRD), so the
//! fallback resource type is the manifest as the extension takes any kind: `metadata` with `name` and
//! `namespace` as identifiers, cairn's options (`force`, `propagationPolicy`, `waitFor`), and every other
//! top-level field (`spec`, `data`, ...) open. A few core kinds whose top level is fixed are declared closed, so
//! a misspelt `spce` or `dta` is caught; their `spec` stays open (its schema is the cluster's).

use cairn_extension_sdk::types::{Flags, TypeBuilder, TypeRef, TypeSet};

use crate::{NAME, VERSION};

/// Kinds declared with a closed top level of `metadata`, cairn's options, `spec` and `status` (both open).
const SPEC_KINDS: &[(&str, &str)] = &[
    ("core/Namespace", "v1"),
    ("core/Service", "v1"),
    ("core/Pod", "v1"),
    ("core/ServiceAccount", "v1"),
    ("apps/Deployment", "v1"),
    ("apps/StatefulSet", "v1"),
    ("apps/DaemonSet", "v1"),
    ("batch/Job", "v1"),
    ("batch/CronJob", "v1"),
];

/// The extension's types.
pub fn types() -> TypeSet {
    let mut b = TypeBuilder::new(NAME, VERSION);
    let string = b.string();
    let any = b.any();
    let boolean = b.bool();
    let strings = b.map("stringMap", string.clone());
    let open = b.map("object", any.clone());
    let metadata = b.object(
        "metadata",
        vec![
            (
                "name",
                string.clone(),
                Flags::REQUIRED | Flags::IDENTIFIER,
                "The object's name.",
            ),
            (
                "namespace",
                string.clone(),
                Flags::IDENTIFIER,
                "The namespace (the config's when absent).",
            ),
            ("labels", strings.clone(), Flags::NONE, ""),
            ("annotations", strings.clone(), Flags::NONE, ""),
            // What the API server sets; a template that writes them conflicts with it.
            ("uid", string.clone(), Flags::READ_ONLY, ""),
            ("resourceVersion", string.clone(), Flags::READ_ONLY, ""),
            ("creationTimestamp", string.clone(), Flags::READ_ONLY, ""),
            ("generation", any.clone(), Flags::READ_ONLY, ""),
            ("managedFields", any.clone(), Flags::READ_ONLY, ""),
            ("selfLink", string.clone(), Flags::READ_ONLY, ""),
        ],
        // The rest of ObjectMeta (finalizers, ownerReferences, ...) is the API server's to judge.
        Some(any.clone()),
    );
    let timeout = b.int_range(Some(0), Some(3600));
    let wait_for = b.object(
        "waitFor",
        vec![
            (
                "condition",
                string.clone(),
                Flags::REQUIRED,
                "The condition type, e.g. Available.",
            ),
            (
                "status",
                string.clone(),
                Flags::NONE,
                "True (default), False or Unknown.",
            ),
            (
                "timeoutSeconds",
                timeout,
                Flags::NONE,
                "How long the resource may take (300).",
            ),
        ],
        None,
    );
    // cairn's options and the manifest's own header, on every kind.
    let common = || -> Vec<(&'static str, TypeRef, Flags, &'static str)> {
        vec![
            (
                "metadata",
                metadata.clone(),
                Flags::REQUIRED,
                "The object's metadata.",
            ),
            (
                "apiVersion",
                string.clone(),
                Flags::NONE,
                "Must match the type's (may be left out).",
            ),
            (
                "kind",
                string.clone(),
                Flags::NONE,
                "Must match the type's (may be left out).",
            ),
            (
                "force",
                boolean.clone(),
                Flags::NONE,
                "Take over fields another field manager owns.",
            ),
            // Parsed ignoring case by the extension, so not an enum here.
            (
                "propagationPolicy",
                string.clone(),
                Flags::NONE,
                "Background, Foreground or Orphan.",
            ),
            (
                "waitFor",
                wait_for.clone(),
                Flags::NONE,
                "Readiness to wait for after the apply.",
            ),
        ]
    };

    let manifest_properties = common();
    let manifest = b.object("manifest", manifest_properties, Some(any.clone()));
    b.fallback(manifest);

    for (kind, api_version) in SPEC_KINDS {
        let mut properties = common();
        properties.push(("spec", open.clone(), Flags::NONE, ""));
        properties.push(("status", open.clone(), Flags::NONE, ""));
        let body = b.object(*kind, properties, None);
        b.resource(kind, api_version, body);
    }

    let mut config_map = common();
    config_map.extend([
        ("data", strings.clone(), Flags::NONE, ""),
        ("binaryData", strings.clone(), Flags::NONE, "Base64 values."),
        ("immutable", boolean.clone(), Flags::NONE, ""),
    ]);
    let config_map = b.object("core/ConfigMap", config_map, None);
    b.resource("core/ConfigMap", "v1", config_map);

    let mut secret = common();
    secret.extend([
        ("data", strings.clone(), Flags::WRITE_ONLY, "Base64 values."),
        ("stringData", strings.clone(), Flags::WRITE_ONLY, ""),
        ("type", string.clone(), Flags::NONE, "e.g. Opaque."),
        ("immutable", boolean.clone(), Flags::NONE, ""),
    ]);
    let secret = b.object("core/Secret", secret, None);
    b.resource("core/Secret", "v1", secret);

    let kubeconfig = b.secure_string();
    let auth = b.object(
        "auth",
        vec![
            ("kubeConfig", kubeconfig.clone(), Flags::NONE, ""),
            ("kubeconfig", kubeconfig.clone(), Flags::NONE, ""),
        ],
        Some(any.clone()),
    );
    let config = b.object(
        "configuration",
        vec![
            (
                "kubeConfig",
                kubeconfig.clone(),
                Flags::NONE,
                "Base64 or YAML kubeconfig.",
            ),
            (
                "kubeconfig",
                kubeconfig,
                Flags::NONE,
                "Base64 or YAML kubeconfig (OCI types' name).",
            ),
            (
                "namespace",
                string.clone(),
                Flags::NONE,
                "The default namespace.",
            ),
            (
                "context",
                string.clone(),
                Flags::NONE,
                "The kubeconfig context.",
            ),
            (
                "clusterType",
                string.clone(),
                Flags::NONE,
                "Custom (Managed is refused).",
            ),
            ("auth", auth, Flags::NONE, "Credentials: { kubeConfig }."),
            ("fieldManager", string.clone(), Flags::NONE, ""),
            ("force", boolean, Flags::NONE, ""),
            ("managedClusterId", string.clone(), Flags::NONE, ""),
            ("credentialType", string, Flags::NONE, ""),
        ],
        None,
    );
    b.configuration(config);
    b.finish()
}

#[cfg(test)]
mod tests {
    use cairn_extension_sdk::types::{Body, FindingKind, check_body};
    use serde_json::json;

    use super::*;

    fn kinds(resource_type: &str, body: serde_json::Value) -> Vec<FindingKind> {
        let set = types();
        let id = set
            .resource(resource_type, Some("v1"), None)
            .or(set.fallback())
            .unwrap();
        check_body(&set, id, &Body::from_json(&body))
            .into_iter()
            .map(|f| f.kind)
            .collect()
    }

    #[test]
    fn the_files_load_back() {
        let set = types();
        assert_eq!(TypeSet::from_files(&set.to_files()).unwrap(), set);
        assert!(set.fallback().is_some());
    }

    #[test]
    fn custom_resources_are_open_but_need_a_name() {
        let backup = json!({"metadata": {"name": "nightly", "namespace": "shop", "finalizers": ["x"]},
                            "spec": {"schedule": "0 2 * * *", "retainDays": 7}, "anything": [1]});
        assert_eq!(kinds("shop.example.com/Backup", backup), vec![]);
        assert_eq!(
            kinds("shop.example.com/Backup", json!({"metadata": {}})),
            vec![FindingKind::MissingProperty]
        );
    }

    #[test]
    fn core_kinds_have_a_closed_top_level() {
        let deployment = json!({"metadata": {"name": "web", "labels": {"app": "web"}},
                                "spec": {"replicas": 2, "template": {}}, "waitFor": {"condition": "Available"},
                                "propagationPolicy": "foreground", "force": true});
        assert_eq!(kinds("apps/Deployment", deployment), vec![]);
        assert_eq!(
            kinds(
                "apps/Deployment",
                json!({"metadata": {"name": "web"}, "spce": {}})
            ),
            vec![FindingKind::UnknownProperty]
        );
        assert_eq!(
            kinds(
                "core/Secret",
                json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}, "type": "Opaque"})
            ),
            vec![]
        );
        assert_eq!(
            kinds(
                "core/ConfigMap",
                json!({"metadata": {"name": "c", "resourceVersion": "1"}})
            ),
            vec![FindingKind::ReadOnlyProperty]
        );
    }
}
