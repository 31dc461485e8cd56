//! Round trips of the wire models over JSON fixtures written from the reference examples: every fixture
//! must read into its model and write back to the same JSON, and no `s3cr3t` value may show in `Debug`.

use std::path::Path;

use cairn_arm::models::common::ListResult;
use cairn_arm::models::deployment::{
    Deployment, DeploymentExportResult, DeploymentExtended, DeploymentListResult,
    DeploymentValidateResult, DeploymentWhatIf, TemplateHashResult,
};
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::lro::OperationStatusResult;
use cairn_arm::models::operation::DeploymentOperationsListResult;
use cairn_arm::models::resource_group::{ResourceGroup, ResourceGroupListResult};
use cairn_arm::models::stack::{
    DeploymentStack, DeploymentStackTemplateDefinition, DeploymentStackValidateResult,
};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_arm::models::what_if::WhatIfOperationResult;
use cairn_arm::{ErrorResponse, ResourceId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Reads `name` as `T`, writes it back and compares; returns the model for further checks.
fn round_trip<T: DeserializeOwned + Serialize + std::fmt::Debug>(name: &str) -> T {
    let json = load(name);
    let model: T = serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&model).unwrap();
    assert_eq!(back, json, "{name} did not round-trip");
    let debug = format!("{model:?}");
    assert!(
        !debug.contains("s3cr3t"),
        "{name}: a secret shows in Debug output: {debug}"
    );
    model
}

#[test]
fn deployment_request() {
    let d: Deployment = round_trip("deployment_put_request.json");
    assert_eq!(
        d.properties
            .extension_configs
            .as_ref()
            .map(|c| c["k8s"].len()),
        Some(2)
    );
    assert!(d.properties.debug_setting.unwrap().logs_response_content());
}

#[test]
fn deployment_responses() {
    let ok: DeploymentExtended = round_trip("deployment_get_extensible.json");
    let props = &ok.properties;
    assert!(props.provisioning_state.as_ref().unwrap().is_terminal());
    assert_eq!(
        props.extensions.as_ref().unwrap()[0].alias.as_deref(),
        Some("k8s")
    );
    let outputs = props.output_resources.as_ref().unwrap();
    assert_eq!(outputs[0].resource_type.as_deref(), Some("core/ConfigMap"));
    assert!(outputs[1].id.is_some());
    assert!(
        outputs[2]
            .reference_id
            .as_deref()
            .unwrap()
            .starts_with("01-")
    );
    assert_eq!(
        ok.id
            .as_deref()
            .map(|id| ResourceId::parse(id).unwrap().resource_type())
            .as_deref(),
        Some(DeploymentExtended::TYPE)
    );

    let failed: DeploymentExtended = round_trip("deployment_get_failed.json");
    let error = failed.properties.error.unwrap();
    assert_eq!(error.code(), "DeploymentFailed");
    assert_eq!(
        error.details.unwrap()[0].details.as_ref().unwrap()[0].code(),
        "InUseSubnetCannotBeDeleted"
    );

    let list: DeploymentListResult = round_trip("deployment_list.json");
    assert_eq!(list.value.len(), 2);
    assert!(list.next_link.is_some());
}

#[test]
fn deployment_operations() {
    let ops: DeploymentOperationsListResult = round_trip("deployment_operations.json");
    let extensible = ops.value[0].properties.target_resource.as_ref().unwrap();
    assert_eq!(
        extensible.extension.as_ref().unwrap().alias.as_deref(),
        Some("k8s")
    );
    let failed = ops.value[1].properties.status_message.as_ref().unwrap();
    assert_eq!(
        failed.error.as_ref().unwrap().target.as_deref(),
        Some("name")
    );
}

#[test]
fn deployment_actions() {
    let invalid: DeploymentValidateResult = round_trip("deployment_validate_400.json");
    assert_eq!(invalid.error.unwrap().code(), "InvalidTemplateDeployment");
    let valid: DeploymentValidateResult = round_trip("deployment_validate_200.json");
    assert_eq!(
        valid.properties.unwrap().validated_resources.unwrap().len(),
        2
    );
    let what_if: DeploymentWhatIf = round_trip("deployment_what_if_request.json");
    let (properties, settings) = what_if.properties.into_parts();
    assert!(settings.is_some() && properties.template_link.is_some());
    let result: WhatIfOperationResult = round_trip("deployment_what_if_result.json");
    assert_eq!(
        result.properties.unwrap().changes.unwrap()[0]
            .delta
            .as_ref()
            .unwrap()[0]
            .children
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    let _: TemplateHashResult = round_trip("template_hash.json");
    let _: DeploymentExportResult = round_trip("deployment_export.json");
}

#[test]
fn stacks() {
    let stack: DeploymentStack = round_trip("stack_get.json");
    let props = &stack.properties;
    assert!(props.provisioning_state.as_ref().unwrap().is_terminal());
    let resources = props.resources.as_ref().unwrap();
    assert_eq!(resources.len(), 3);
    assert!(resources.iter().all(|r| r.key().is_some()));
    assert_eq!(
        props.failed_resources.as_ref().unwrap()[0]
            .error
            .as_ref()
            .unwrap()
            .code(),
        "DeletionFailed"
    );
    assert!(
        props.deployment_extensions.as_ref().unwrap()[0]
            .config
            .as_ref()
            .unwrap()["kubeConfig"]
            .is_directive()
    );

    let put: DeploymentStack = round_trip("stack_put_request.json");
    assert!(
        put.properties.extension_configs.unwrap()["k8s"]["kubeConfig"]
            .api_reference
            .is_some()
    );
    let list: ListResult<DeploymentStack> = round_trip("stack_list.json");
    assert!(list.value.iter().all(|s| {
        !s.properties
            .provisioning_state
            .as_ref()
            .unwrap()
            .is_terminal()
    }));
    let invalid: DeploymentStackValidateResult = round_trip("stack_validate_400.json");
    assert_eq!(
        invalid.error.unwrap().message(),
        "Deployment validation failed"
    );
    let _: DeploymentStackValidateResult = round_trip("stack_validate_200.json");
    let _: DeploymentStackTemplateDefinition = round_trip("stack_export.json");
    let what_if: DeploymentStacksWhatIfResult = round_trip("stack_what_if_result.json");
    let changes = what_if.properties.changes.unwrap();
    assert_eq!(changes.resource_changes.len(), 4);
    assert_eq!(changes.deny_settings_change.delta.unwrap().len(), 2);
}

#[test]
fn resource_groups_lro_errors_and_directives() {
    let rg: ResourceGroup = round_trip("resource_group.json");
    assert_eq!(rg.resource_type.as_deref(), Some(ResourceGroup::TYPE));
    let _: ResourceGroupListResult = round_trip("resource_group_list.json");
    let _: ResourceGroup = round_trip("resource_group_put.json");
    let failed: OperationStatusResult = round_trip("operation_status_failed.json");
    assert!(failed.status.is_terminal());
    let running: OperationStatusResult = round_trip("operation_status_running.json");
    assert!(!running.status.is_terminal());
    let error: ErrorResponse = round_trip("error_response.json");
    assert_eq!(error.error.code(), "AuthorizationFailed");
    let extension: DeploymentExtension = round_trip("extension_with_api_reference.json");
    let api = extension.config.unwrap()["kubeConfig"]
        .api_reference
        .clone()
        .unwrap();
    assert_eq!(api.response_value_path, "kubeconfigs[0].value");
}

#[test]
fn unknown_fields_are_ignored_and_unknown_enum_values_kept() {
    let json = serde_json::json!({
        "properties": {"mode": "Incremental", "template": {}, "futureField": {"x": 1}, "validationLevel": "Paranoid"},
        "futureTop": true
    });
    let d: Deployment = serde_json::from_value(json).unwrap();
    let back = serde_json::to_value(&d).unwrap();
    assert_eq!(back["properties"]["validationLevel"], "Paranoid");
    assert!(back["properties"].get("futureField").is_none());
}

#[test]
fn nulls_are_read_as_absent_and_never_written() {
    let json = serde_json::json!({"id": null, "name": "d", "properties": {"provisioningState": null, "outputs": null, "error": null}});
    let d: DeploymentExtended = serde_json::from_value(json).unwrap();
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        serde_json::json!({"name": "d", "properties": {}})
    );
}
