//! The stack's deployment as the engine recorded it: its tree of nested deployments (what the managed set is
//! collected from) and its template (`exportTemplate`).

use cairn_arm::ArmError;
use std::collections::HashMap;
use std::time::Duration;

use cairn_arm::models::deployment::{DeploymentExtended, DeploymentResourceReference};
use cairn_arm::models::operation::DeploymentOperation;
use cairn_arm::models::stack::DeploymentStackTemplateDefinition;
use cairn_engine::{Engine, OperationsCursor};
use cairn_stacks::DeploymentSnapshot;

use crate::service::StackService;

/// The `(scope, name)` of a deployment ID.
pub(crate) fn split_deployment_id(id: &str) -> Option<(String, String)> {
    const MARKER: &str = "/providers/microsoft.resources/deployments/";
    let at = id.to_ascii_lowercase().rfind(MARKER)?;
    let name = &id[at + MARKER.len()..];
    (!name.is_empty() && !name.contains('/')).then(|| (id[..at].to_owned(), name.to_owned()))
}

/// Drops from a deployment's `outputResources` the entries a deployment nested in it lists too. A deployment lists
/// every resource of the deployments nested in it as well as its own, so a stack's tree would otherwise hold each
/// nested resource's entry once per level (a 5,000-resource stack of modules: 10,000 entries); the collected set
/// is the same, as each entry is still read, from the nested deployment's own list.
fn drop_listed_by(parent: &mut DeploymentExtended, child: &DeploymentExtended) {
    let (Some(listed), Some(nested)) = (
        parent.properties.output_resources.as_mut(),
        child.properties.output_resources.as_ref(),
    ) else {
        return;
    };
    if listed.is_empty() || nested.is_empty() {
        return;
    }
    let mut by_name: HashMap<EntryName<'_>, Vec<&DeploymentResourceReference>> =
        HashMap::with_capacity(nested.len());
    for entry in nested {
        by_name.entry(EntryName::of(entry)).or_default().push(entry);
    }
    listed.retain(|entry| {
        !by_name
            .get(&EntryName::of(entry))
            .is_some_and(|same_name| same_name.contains(&entry))
    });
}

/// What tells output entries apart cheaply; entries with the same name are compared in full.
#[derive(PartialEq, Eq, Hash)]
struct EntryName<'a> {
    id: Option<&'a str>,
    resource_type: Option<&'a str>,
    reference_id: Option<&'a str>,
}

impl<'a> EntryName<'a> {
    fn of(entry: &'a DeploymentResourceReference) -> Self {
        EntryName {
            id: entry.id.as_deref(),
            resource_type: entry.resource_type.as_deref(),
            reference_id: entry.reference_id.as_deref(),
        }
    }
}

/// How often a running deployment's new journal steps are read (see [`StackService::follow_operations`]).
const FOLLOW_EVERY: Duration = Duration::from_millis(100);

/// A deployment's operations as read so far while it runs: each operation's latest step, in the order the operations
/// first appeared (the list `Engine::operations` reads), and where the reading stands.
#[derive(Default)]
pub(crate) struct FollowedOperations {
    cursor: Option<OperationsCursor>,
    operations: Vec<DeploymentOperation>,
    at: HashMap<String, usize>,
}

impl FollowedOperations {
    /// Reads the steps journaled since the last read and applies them.
    async fn catch_up(&mut self, engine: &Engine, scope: &str, name: &str) -> Result<(), ArmError> {
        let delta = engine
            .operations_after(scope, name, self.cursor.as_ref())
            .await
            .map_err(|e| e.to_arm())?;
        if !delta.continues {
            // The first read, or the deployment's name now names another run: its list starts again.
            self.operations.clear();
            self.at.clear();
        }
        for (_, operation) in delta.changed {
            let id = operation.operation_id.clone().unwrap_or_default();
            match self.at.get(&id) {
                Some(&index) => self.operations[index] = operation,
                None => {
                    self.at.insert(id, self.operations.len());
                    self.operations.push(operation);
                }
            }
        }
        self.cursor = Some(delta.cursor);
        Ok(())
    }
}

impl StackService {
    /// Reads the operations of a deployment this process runs while it runs, until `ended`: a big deployment's end
    /// then reads only its last steps rather than every operation at once (an 800-resource stack: 2,400 journal
    /// rows, decoded while the next steps had to wait). `None` when a read failed: the snapshot reads them all.
    pub(crate) async fn follow_operations(
        &self,
        scope: &str,
        name: &str,
        ended: impl Future<Output = ()>,
    ) -> Option<FollowedOperations> {
        let mut ended = std::pin::pin!(ended);
        let mut followed = FollowedOperations::default();
        loop {
            tokio::select! {
                () = &mut ended => return Some(followed),
                () = tokio::time::sleep(FOLLOW_EVERY) => {
                    if let Err(error) = followed.catch_up(&self.inner.engine, scope, name).await {
                        tracing::debug!(deployment = name, error = %error.detail().message(),
                            "could not read the deployment's operations while it runs");
                        ended.await;
                        return None;
                    }
                }
            }
        }
    }

    /// The deployment tree of a finished deployment, with nested deployments found through its operations. The
    /// record and the operations are read side by side (for a big deployment, each is thousands of entries); with
    /// `followed`, the root's operations are those read while it ran and the steps after them.
    pub(crate) async fn snapshot(
        &self,
        scope: &str,
        name: &str,
        depth: u32,
        followed: Option<FollowedOperations>,
    ) -> Result<DeploymentSnapshot, ArmError> {
        // Side by side on two threads: each is milliseconds of decoding for a big deployment (its record's output
        // resources, its operations), which one task would run one after the other.
        let engine = self.inner.engine.clone();
        let (record_scope, record_name) = (scope.to_owned(), name.to_owned());
        let record = tokio::spawn(async move { engine.get(&record_scope, &record_name).await });
        let operations = match followed {
            Some(mut followed) => match followed.catch_up(&self.inner.engine, scope, name).await {
                Ok(()) => Ok(followed.operations),
                Err(_) => self.inner.engine.operations(scope, name).await,
            },
            None => self.inner.engine.operations(scope, name).await,
        };
        let mut deployment = match record.await {
            Ok(deployment) => deployment.map_err(|e| e.to_arm())?,
            Err(_) => {
                return Err(ArmError::new(
                    500,
                    "InternalServerError",
                    "The read of the stack's deployment stopped unexpectedly.",
                ));
            }
        };
        let operations = operations.map_err(|e| e.to_arm())?;
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
                        Box::pin(self.snapshot(&child_scope, &child_name, depth + 1, None)).await
                {
                    drop_listed_by(&mut deployment, &child.deployment);
                    nested.push(child);
                }
            }
        }
        if let Some(listed) = deployment.properties.output_resources.as_mut() {
            listed.shrink_to_fit();
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

    fn listing(entries: serde_json::Value) -> DeploymentExtended {
        serde_json::from_value(serde_json::json!({"properties": {"outputResources": entries}}))
            .unwrap()
    }

    #[test]
    fn a_deployment_keeps_only_the_output_entries_no_nested_deployment_lists() {
        let own =
            serde_json::json!({"id": "/subscriptions/s/resourceGroups/rg/providers/A.B/c/own"});
        let nested_arm =
            serde_json::json!({"id": "/subscriptions/s/resourceGroups/rg/providers/A.B/c/n"});
        let nested_ext = serde_json::json!({"extension": {"name": "K", "version": "1"}, "resourceType": "T",
            "identifiers": {"name": "x"}, "referenceId": "0-abc"});
        // Same name as the nested entry, other identifiers: not the same entry.
        let lookalike = serde_json::json!({"extension": {"name": "K", "version": "1"}, "resourceType": "T",
            "identifiers": {"name": "y"}, "referenceId": "0-abc"});
        let mut parent = listing(serde_json::json!([own, nested_arm, nested_ext, lookalike]));
        let child = listing(serde_json::json!([nested_ext, nested_arm]));
        drop_listed_by(&mut parent, &child);
        assert_eq!(parent, listing(serde_json::json!([own, lookalike])));
        // A child that lists nothing leaves the parent's list as it is.
        let before = parent.clone();
        drop_listed_by(&mut parent, &DeploymentExtended::default());
        assert_eq!(parent, before);
    }

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
