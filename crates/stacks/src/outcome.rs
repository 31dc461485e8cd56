//! The end of a stack operation: the new managed set and the stack's `deletedResources`, `detachedResources`,
//! `failedResources` and `error`, from the diff and the delete report.

use cairn_arm::ErrorDetail;
use cairn_arm::models::stack::{DeploymentStackProperties, ResourceReference, ResourceStatusMode};

use crate::diff::UnmanageDiff;
use crate::error::codes;
use crate::managed::ManagedSet;
use crate::run::DeleteReport;

/// What a stack PUT or DELETE leaves behind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StackOperationResult {
    /// The managed set from now on: kept, added, and resources whose delete failed (`deleteFailed`, retried
    /// by the next operation).
    pub resources: ManagedSet,
    pub deleted_resources: Vec<ResourceReference>,
    pub detached_resources: Vec<ResourceReference>,
    /// Each with its `error`.
    pub failed_resources: Vec<ResourceReference>,
    /// `DeploymentStackDeleteResourcesFailed` when anything failed.
    pub error: Option<ErrorDetail>,
}

impl StackOperationResult {
    /// Combines the diff with the report of running its delete plan. `correlation_id` goes into the error
    /// message, as ARM's does.
    pub fn assemble(diff: UnmanageDiff, report: DeleteReport, correlation_id: &str) -> Self {
        let mut resources = ManagedSet::from_resources(diff.kept.into_iter().chain(diff.added));
        let mut detached_resources = Vec::new();
        for removal in &diff.removed {
            if removal.action == crate::diff::RemovalAction::Detach {
                detached_resources.push(removal.resource.to_reference());
            }
        }
        detached_resources.extend(report.detached.iter().map(|r| r.to_reference()));
        let deleted_resources = report
            .deleted
            .iter()
            .map(|r| ResourceReference {
                reason: report
                    .reasons
                    .iter()
                    .find(|(key, _)| key == r.key())
                    .map(|(_, reason)| reason.clone()),
                ..r.to_reference()
            })
            .collect();
        let mut failed_resources = Vec::with_capacity(report.failed.len());
        for failed in report.failed {
            failed_resources.push(ResourceReference {
                error: Some(failed.error),
                ..failed.resource.to_reference()
            });
            let mut still_managed = failed.resource;
            still_managed.status = ResourceStatusMode::DeleteFailed;
            resources.insert(still_managed);
        }
        // Canceled before their turn: still managed, as they were.
        for resource in report.not_attempted {
            resources.insert(resource);
        }
        let error = (!failed_resources.is_empty()).then(|| {
            ErrorDetail::new(
                codes::DEPLOYMENT_STACK_DELETE_RESOURCES_FAILED,
                format!("One or more resources could not be deleted. Correlation id: '{correlation_id}'."),
            )
            .with_details([ErrorDetail::new(
                codes::DEPLOYMENT_STACK_DELETE_RESOURCES_FAILED,
                "An error occurred while deleting resources. These resources are still present in the stack but \
                 can be deleted manually. Please see the FailedResources property for specific error information.",
            )])
        });
        Self {
            resources,
            deleted_resources,
            detached_resources,
            failed_resources,
            error,
        }
    }

    /// Writes the result into the stack's properties: `resources`, `deploymentExtensions`,
    /// `deletedResources`, `detachedResources`, `failedResources` (the last three describe this operation
    /// only) and `error` (only when this result has one; the caller owns other errors).
    pub fn apply_to(&self, properties: &mut DeploymentStackProperties) {
        properties.resources = Some(self.resources.to_references());
        let extensions = self.resources.deployment_extensions();
        properties.deployment_extensions = (!extensions.is_empty()).then_some(extensions);
        properties.deleted_resources = Some(self.deleted_resources.clone());
        properties.detached_resources = Some(self.detached_resources.clone());
        properties.failed_resources = Some(self.failed_resources.clone());
        if self.error.is_some() {
            properties.error = self.error.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{Ownership, diff};
    use crate::managed::ManagedResource;
    use crate::policy::ResourcePolicy;
    use crate::run::{DeleteOutcome, DeleteTask, RunSettings, run_to_completion};
    use cairn_arm::ResourceId;
    use cairn_arm::models::stack::{ActionOnUnmanage, DenySettings};
    use serde_json::json;

    fn site(name: &str) -> ManagedResource {
        ManagedResource::arm(
            ResourceId::parse(&format!(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/{name}"
            ))
            .unwrap(),
        )
    }

    #[test]
    fn failed_deletes_stay_managed_and_the_stack_reports_them() {
        let previous = ManagedSet::from_resources([site("keep"), site("gone"), site("stuck")]);
        let next = ManagedSet::from_resources([site("keep"), site("new")]);
        let action = ActionOnUnmanage::from_cli_preset("deleteResources").unwrap();
        let result = diff(
            &previous,
            &next,
            true,
            &action,
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        let plan = result.delete_plan();
        let report = run_to_completion(
            plan,
            RunSettings {
                max_rounds: 2,
                ..RunSettings::default()
            },
            &mut |t: &DeleteTask| {
                if t.key == *site("stuck").key() {
                    DeleteOutcome::Failed(ErrorDetail::new("ScopeLocked", "locked"))
                } else {
                    DeleteOutcome::Deleted
                }
            },
        )
        .unwrap();
        let outcome = StackOperationResult::assemble(result, report, "c0ffee");
        let statuses: Vec<(String, String)> = outcome
            .resources
            .iter()
            .map(|r| {
                (
                    r.arm_id().unwrap().name().unwrap().to_owned(),
                    r.status.to_string(),
                )
            })
            .collect();
        assert_eq!(
            statuses,
            [
                ("keep", "managed"),
                ("new", "managed"),
                ("stuck", "deleteFailed")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        let mut properties = DeploymentStackProperties::new(action, DenySettings::none());
        outcome.apply_to(&mut properties);
        let value = serde_json::to_value(&properties).unwrap();
        assert_eq!(
            value["deletedResources"],
            json!([{"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/gone"}])
        );
        assert_eq!(
            value["failedResources"][0]["error"]["code"],
            "DeletionFailed"
        );
        assert_eq!(
            value["failedResources"][0]["error"]["details"][0]["code"],
            "ScopeLocked"
        );
        assert_eq!(
            value["error"]["code"],
            "DeploymentStackDeleteResourcesFailed"
        );
        assert!(
            value["error"]["message"]
                .as_str()
                .unwrap()
                .contains("'c0ffee'")
        );
        assert_eq!(value["resources"][2]["status"], "deleteFailed");
    }

    fn directive_error(kind: cairn_config::DirectiveErrorKind) -> cairn_config::DirectiveError {
        cairn_config::DirectiveError {
            alias: "k8s".into(),
            property: "kubeConfig".into(),
            kind,
        }
    }

    /// Seed 001: a resource whose config's source answers 404 is gone with its control plane, and says so on
    /// `deletedResources[]`; a missing Key Vault or secret, or any other failure, stays a failure (retried).
    #[test]
    fn a_gone_config_source_deletes_with_a_reason_and_other_failures_fail() {
        use cairn_config::DirectiveErrorKind::{ApiFailed, ApiNotFound, SecretNotFound};
        const AKS: &str = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/aks";
        const SECRET: &str =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv/secrets/kc";
        let gone = ApiNotFound {
            call: "POST listClusterAdminCredential".into(),
            resource: AKS.into(),
        };
        let cases = [
            (gone.clone(), Some("DeploymentStackConfigSourceGone")),
            (
                ApiNotFound {
                    call: "POST listValue".into(),
                    resource: SECRET.into(),
                },
                None,
            ),
            (
                SecretNotFound {
                    vault: SECRET.into(),
                    secret: "kc".into(),
                },
                None,
            ),
            (
                ApiFailed {
                    call: "POST listClusterAdminCredential".into(),
                    resource: AKS.into(),
                    message: "busy".into(),
                },
                None,
            ),
        ];
        for (kind, gone_code) in cases {
            let outcome = DeleteOutcome::config_unresolved(&directive_error(kind.clone()));
            match (&outcome, gone_code) {
                (DeleteOutcome::ConfigSourceGone { reason }, Some(code)) => {
                    assert_eq!(reason.code(), code);
                    assert!(reason.message().contains(AKS), "{reason:?}");
                    assert!(outcome.is_deleted());
                }
                (DeleteOutcome::Failed(error), None) => {
                    assert_eq!(error, &directive_error(kind).to_error_detail());
                }
                _ => panic!("{kind:?} gave {outcome:?}"),
            }
        }

        let pod = ManagedResource::extensible(
            crate::managed::ExtensionIdentity {
                name: "Kubernetes".into(),
                version: "1.0.0".into(),
                config_id: Some("aks".into()),
            },
            "core/Pod",
            json!({"name": "web"}),
        );
        let previous = ManagedSet::from_resources([pod.clone(), site("plain")]);
        let action = ActionOnUnmanage::from_cli_preset("deleteResources").unwrap();
        let result = diff(
            &previous,
            &ManagedSet::default(),
            true,
            &action,
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        let report = run_to_completion(
            result.delete_plan(),
            RunSettings::default(),
            &mut |t: &DeleteTask| {
                if t.key == *pod.key() {
                    DeleteOutcome::config_unresolved(&directive_error(gone.clone()))
                } else {
                    DeleteOutcome::Deleted
                }
            },
        )
        .unwrap();
        assert_eq!(report.attempts, 2, "the pod is not retried");
        let outcome = StackOperationResult::assemble(result, report, "c0ffee");
        assert_eq!(outcome.error, None);
        let reasons: Vec<Option<&str>> = outcome
            .deleted_resources
            .iter()
            .map(|r| r.reason.as_ref().map(ErrorDetail::code))
            .collect();
        assert_eq!(reasons, [Some("DeploymentStackConfigSourceGone"), None]);
    }
}
