//! The stack's deployment as the engine recorded it: its tree of nested deployments (what the managed set is
//! collected from) and its template (`exportTemplate`).

use cairn_arm::ArmError;
use cairn_arm::models::deployment::DeploymentExtended;
use cairn_arm::models::stack::DeploymentStackTemplateDefinition;
use cairn_stacks::DeploymentSnapshot;

use crate::service::StackService;

/// The `(scope, name)` of a deployment ID.
pub(crate) fn split_deployment_id(id: &str) -> Option<(String, String)> {
    const MARKER: &str = "/providers/microsoft.resources/deployments/";
    let at = id.to_ascii_lowercase().rfind(MARKER)?;
    let name = &id[at + MARKER.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_owned(), name.to_owned()))
}

impl StackService {
    /// The deployment tree of a finished deployment, with nested deployments found through its operations.
    pub(crate) async fn snapshot(
        &self,
        scope: &str,
        name: &str,
        depth: u32,
    ) -> Result<DeploymentSnapshot, ArmError> {
        let deployment = self
            .inner
            .engine
            .get(scope, name)
            .await
            .map_err(|e| e.to_arm())?;
        self.snapshot_of(deployment, scope, name, depth).await
    }

    /// [`StackService::snapshot`] of a deployment whose record was just read (as the engine's handle returns it when
    /// the deployment ends): a big deployment's record is not read twice.
    pub(crate) async fn snapshot_of(
        &self,
        deployment: DeploymentExtended,
        scope: &str,
        name: &str,
        depth: u32,
    ) -> Result<DeploymentSnapshot, ArmError> {
        let operations = self
            .inner
            .engine
            .operations(scope, name)
            .await
            .map_err(|e| e.to_arm())?;
        let mut nested = Vec::new();
        if depth < 32 {
            for operation in &operations {
                let Some(target) = operation
                    .properties
                    .target_resource
                    .as_ref()
                    .and_then(|t| t.id.as_deref())
                else {
                    continue;
                };
                if let Some((child_scope, child_name)) = split_deployment_id(target)
                    && let Ok(child) =
                        Box::pin(self.snapshot(&child_scope, &child_name, depth + 1)).await
                {
                    nested.push(child);
                }
            }
        }
        Ok(DeploymentSnapshot {
            deployment,
            operations,
            extra_dependencies: Vec::new(),
            nested,
        })
    }

    /// The template of the stack's deployment (`POST .../exportTemplate`).
    pub async fn export_template(
        &self,
        scope: &str,
        name: &str,
    ) -> Result<DeploymentStackTemplateDefinition, ArmError> {
        let stack = self.get(scope, name).await?;
        let Some((deployment_scope, deployment_name)) = stack
            .properties
            .deployment_id
            .as_deref()
            .and_then(split_deployment_id)
        else {
            return Ok(DeploymentStackTemplateDefinition {
                template: None,
                template_link: stack.properties.template_link.clone(),
            });
        };
        let exported = self
            .inner
            .engine
            .export_template(&deployment_scope, &deployment_name)
            .await
            .map_err(|e| e.to_arm())?;
        Ok(DeploymentStackTemplateDefinition {
            template: exported.template,
            template_link: stack.properties.template_link.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_ids_split_into_scope_and_name() {
        assert_eq!(
            split_deployment_id(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d"
            ),
            Some(("/subscriptions/s/resourceGroups/rg".into(), "d".into()))
        );
        assert_eq!(
            split_deployment_id("/subscriptions/s/resourceGroups/rg"),
            None
        );
        assert_eq!(
            split_deployment_id("/subscriptions/s/providers/Microsoft.Resources/deployments/"),
            None
        );
    }
}
