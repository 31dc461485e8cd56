//! Deployment records and operations in the 2025-04-01 wire shapes: `DeploymentExtended` from a stored
//! `DeploymentRecord`, `DeploymentOperation` from journal rows, and the engine's own annotation of a stored request
//! (`$cairnEngine`: pinned clock and GUIDs for resumption, dependencies, template hash), which never reaches a
//! response.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_arm::models::deployment::{
    Dependency, DeploymentExtended, DeploymentMode, DeploymentPropertiesExtended,
    DeploymentProvisioningState, DeploymentResourceReference,
};
use cairn_arm::models::extension::DeploymentExtension;
use cairn_arm::models::operation::{
    DeploymentOperation, DeploymentOperationProperties, ProvisioningOperation, StatusMessage,
    TargetResource,
};
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_arm::time::{format_duration, format_timestamp};
use cairn_arm::{Access, ErrorDetail};
use cairn_store::{DeploymentKey, DeploymentRecord, DeploymentStatus, OperationRecord, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The member of a stored request that holds the engine's annotation.
pub const ENGINE_MEMBER: &str = "$cairnEngine";

/// What the engine keeps beside a stored request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EngineAnnotation {
    /// The clock `utcNow()` reads, pinned so a resumed run evaluates the same values.
    pub utc_now: String,
    /// The GUIDs `newGuid()` returns, pinned likewise.
    pub new_guids: Vec<String>,
    /// `dependencies[]` of the record.
    pub dependencies: Vec<Dependency>,
    pub template_hash: Option<String>,
    /// The deployment location (subscription and above) or the resource group's.
    pub location: Option<String>,
    /// A stack's deployment checks extension resources for existence before their first write (see
    /// [`crate::ExistingResourceCheck`]): kept so a run resumed after a crash checks them too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub existing_resources: Option<ExistingResourcesAnnotation>,
    /// What the caller that started the deployment may reach: a resumed run, its nested deployments and its
    /// runtime reads are held to it as the request was.
    #[serde(skip_serializing_if = "Access::is_unrestricted")]
    pub access: Access,
}

/// How a stack's deployment treats extension resources that exist before their first write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExistingResourcesAnnotation {
    /// `adoptExistingResources`: write them, so the stack manages them.
    pub adopt: bool,
}

impl EngineAnnotation {
    pub fn read(request: &Value) -> EngineAnnotation {
        request
            .get(ENGINE_MEMBER)
            .and_then(|v| EngineAnnotation::deserialize(v).ok())
            .unwrap_or_default()
    }
}

/// A store timestamp as a `SystemTime`.
pub fn system_time(t: Timestamp) -> SystemTime {
    let millis = t.unix_millis();
    if millis >= 0 {
        UNIX_EPOCH + Duration::from_millis(millis as u64)
    } else {
        UNIX_EPOCH
    }
}

pub fn provisioning_state(status: DeploymentStatus) -> DeploymentProvisioningState {
    match status {
        DeploymentStatus::Accepted => DeploymentProvisioningState::Accepted,
        DeploymentStatus::Running => DeploymentProvisioningState::Running,
        DeploymentStatus::Succeeded => DeploymentProvisioningState::Succeeded,
        DeploymentStatus::Failed => DeploymentProvisioningState::Failed,
        DeploymentStatus::Canceled => DeploymentProvisioningState::Canceled,
    }
}

/// `value` read as `T` straight from the tree it is part of (no copy of the tree first: a deployment's output
/// resources are thousands of entries).
fn from_json<T: serde::de::DeserializeOwned>(value: Option<&Value>) -> Option<T> {
    value.and_then(|v| T::deserialize(v).ok())
}

/// The deployment as GET returns it. Secure parameter values are never in it: they are markers in the stored
/// request, and the response drops secure entries' values whatever they hold.
pub fn deployment_extended(record: &DeploymentRecord) -> DeploymentExtended {
    let request = &record.request;
    let annotation = EngineAnnotation::read(request);
    let template = request.get("template").unwrap_or(&Value::Null);
    let parameters = from_json::<DeploymentParameters>(request.get("parameters"))
        .map(|p| cairn_arm::secure::response_parameters(&p, template));
    let end = record.finished_at.unwrap_or(record.updated_at);
    let start = record.started_at.unwrap_or(record.created_at);
    let duration =
        Duration::from_millis(end.unix_millis().saturating_sub(start.unix_millis()).max(0) as u64);
    let status = record.status;
    let properties = DeploymentPropertiesExtended {
        provisioning_state: Some(provisioning_state(status)),
        correlation_id: Some(record.correlation_id.clone()),
        timestamp: Some(format_timestamp(system_time(end))),
        duration: Some(format_duration(duration)),
        outputs: if status == DeploymentStatus::Succeeded {
            record.outputs.clone()
        } else {
            None
        },
        providers: None,
        dependencies: Some(annotation.dependencies),
        // A root request's query string is a sealed secret marker: never shown.
        template_link: from_json(
            request
                .get("templateLink")
                .map(|link| {
                    let mut link = link.clone();
                    if let Value::Object(map) = &mut link {
                        map.remove("queryString");
                    }
                    link
                })
                .as_ref(),
        ),
        parameters,
        parameters_link: from_json(request.get("parametersLink")),
        extensions: from_json::<Vec<DeploymentExtension>>(record.extensions.as_ref())
            .filter(|e| !e.is_empty() || status.is_terminal()),
        mode: Some(
            from_json::<DeploymentMode>(request.get("mode")).unwrap_or(DeploymentMode::Incremental),
        ),
        debug_setting: from_json(request.get("debugSetting")),
        on_error_deployment: from_json(request.get("onErrorDeployment")),
        template_hash: annotation.template_hash,
        output_resources: from_json::<Vec<DeploymentResourceReference>>(
            record.output_resources.as_ref(),
        ),
        validated_resources: None,
        error: from_json::<ErrorDetail>(record.error.as_ref()),
        diagnostics: None,
        validation_level: from_json(request.get("validationLevel")),
    };
    DeploymentExtended {
        id: Some(record.key.to_string()),
        name: Some(record.key.name.clone()),
        resource_type: Some(DeploymentExtended::TYPE.to_string()),
        system_data: None,
        location: record.location.clone(),
        tags: if record.tags.is_empty() {
            None
        } else {
            serde_json::to_value(&record.tags)
                .ok()
                .and_then(|v| serde_json::from_value(v).ok())
        },
        properties,
    }
}

/// One operation as `GET .../operations` returns it.
pub fn deployment_operation(key: &DeploymentKey, row: &OperationRecord) -> DeploymentOperation {
    let step = &row.step;
    DeploymentOperation {
        id: Some(format!("{key}/operations/{}", step.operation_id)),
        operation_id: Some(step.operation_id.clone()),
        properties: DeploymentOperationProperties {
            provisioning_operation: Some(ProvisioningOperation::parse(
                &step.provisioning_operation,
            )),
            provisioning_state: Some(DeploymentProvisioningState::parse(&step.provisioning_state)),
            timestamp: Some(format_timestamp(system_time(step.timestamp))),
            duration: step
                .duration_ms
                .map(|ms| format_duration(Duration::from_millis(ms.max(0) as u64))),
            service_request_id: step.service_request_id.clone(),
            status_code: step.status_code.clone(),
            status_message: from_json::<StatusMessage>(step.status_message.as_ref()),
            target_resource: from_json::<TargetResource>(step.target_resource.as_ref()),
            request: None,
            response: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_store::{DeploymentId, OperationStep, Tags};
    use serde_json::json;

    fn record(status: DeploymentStatus) -> DeploymentRecord {
        DeploymentRecord {
            id: DeploymentId::from_string("d"),
            key: DeploymentKey::new("/subscriptions/s/resourceGroups/rg", "main"),
            parent: None,
            location: None,
            tags: Tags::new(),
            request: json!({
                "mode": "Incremental",
                "template": {"parameters": {"pw": {"type": "securestring"}, "n": {"type": "int"}}},
                "parameters": {"pw": {"value": {"$cairnSecretRef": "x"}}, "n": {"value": 3}},
                ENGINE_MEMBER: {"utcNow": "2024-01-01T00:00:00Z", "templateHash": "42"}
            }),
            status,
            correlation_id: "c".into(),
            stack_initiated: false,
            created_at: Timestamp::from_unix_millis(1_000),
            updated_at: Timestamp::from_unix_millis(3_500),
            started_at: Some(Timestamp::from_unix_millis(2_000)),
            finished_at: Some(Timestamp::from_unix_millis(3_500)),
            outputs: Some(json!({"o": {"type": "String", "value": "v"}})),
            error: None,
            output_resources: Some(json!([{"id": "/x"}])),
            extensions: Some(json!([])),
            owner: None,
            cancel_requested: false,
            version: 3,
        }
    }

    #[test]
    fn records_become_deployment_extended() {
        let d = serde_json::to_value(deployment_extended(&record(DeploymentStatus::Succeeded)))
            .unwrap();
        assert_eq!(
            d["id"],
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/main"
        );
        let p = &d["properties"];
        assert_eq!(p["provisioningState"], "Succeeded");
        assert_eq!(p["duration"], "PT1.5S");
        assert_eq!(p["parameters"]["pw"], json!({"type": "SecureString"}));
        assert_eq!(p["parameters"]["n"], json!({"type": "Int", "value": 3}));
        assert_eq!(p["templateHash"], "42");
        assert_eq!(p["outputs"]["o"]["value"], "v");
        assert!(!d.to_string().contains("cairnSecretRef"));
        assert!(!d.to_string().contains(ENGINE_MEMBER));
        let failed =
            serde_json::to_value(deployment_extended(&record(DeploymentStatus::Failed))).unwrap();
        assert!(failed["properties"].get("outputs").is_none());
    }

    #[test]
    fn operations_carry_target_and_status() {
        let row = OperationRecord {
            sequence: 2,
            step: OperationStep {
                deployment_id: DeploymentId::from_string("d"),
                operation_id: "ABC".into(),
                target_resource: Some(
                    json!({"id": "/x", "resourceType": "A.B/c", "resourceName": "x"}),
                ),
                provisioning_operation: "Create".into(),
                provisioning_state: "Failed".into(),
                status_code: Some("BadRequest".into()),
                status_message: Some(json!({"error": {"code": "Bad", "message": "no"}})),
                service_request_id: None,
                timestamp: Timestamp::from_unix_millis(0),
                duration_ms: Some(250),
                extension: None,
                request_content: None,
                response_content: None,
            },
        };
        let key = DeploymentKey::new("/subscriptions/s", "d1");
        let op = serde_json::to_value(deployment_operation(&key, &row)).unwrap();
        assert_eq!(
            op["id"],
            "/subscriptions/s/providers/Microsoft.Resources/deployments/d1/operations/ABC"
        );
        assert_eq!(op["properties"]["duration"], "PT0.25S");
        assert_eq!(op["properties"]["statusMessage"]["error"]["code"], "Bad");
        assert_eq!(op["properties"]["targetResource"]["resourceType"], "A.B/c");
    }
}
