//! Adopting existing extension resources: what a stack's deployment is told about the resources stacks already
//! manage (so it asks the extension whether any other one exists before writing it, see the engine's
//! `ExistingResourceCheck`), and how a PUT reports the resources it found existing and did not take over.
//!
//! A resource counts as managed — written without asking — when this stack manages it (on any control plane: a
//! `configId` change is refused after the deployment, as before) or another stack does (on the same control
//! plane; taking it is refused after the deployment with `DeploymentStackResourceManagedByAnotherStack`, as
//! before). When the extension's preview names no `configId`, identity alone (extension, type, identifiers) counts.

use std::collections::HashSet;
use std::sync::Arc;

use cairn_arm::ErrorDetail;
use cairn_engine::{
    ExistingResourceCheck, ExtensionResource, ManagedResources, RESOURCE_EXISTS_UNMANAGED,
};
use cairn_stacks::{DeploymentSnapshot, ManagedSet, Ownership, ResourceKey};

/// Extension, type and identifiers: an extensible key without its `configId`.
type Identity = (String, String, String);

fn identity_of(key: &ResourceKey) -> Option<Identity> {
    match key {
        ResourceKey::Extensible(key) => Some((
            key.extension_name().to_owned(),
            key.resource_type().to_owned(),
            key.canonical_identifiers().to_owned(),
        )),
        ResourceKey::Arm(_) => None,
    }
}

/// The extension resources deployment stacks manage, as a stack's deployment asks about them.
struct StacksManage {
    /// Keys of other stacks' resources.
    others: HashSet<ResourceKey>,
    /// Identities of this stack's resources (any control plane).
    own: HashSet<Identity>,
    /// Identities of every stack's resources, for a resource whose `configId` the preview did not name.
    any: HashSet<Identity>,
}

impl ManagedResources for StacksManage {
    fn manages(&self, resource: &ExtensionResource<'_>) -> bool {
        let key = ResourceKey::extensible(
            resource.extension,
            resource.config_id,
            resource.resource_type,
            resource.identifiers,
        );
        let Some(identity) = identity_of(&key) else {
            return false;
        };
        if self.own.contains(&identity) {
            return true;
        }
        match resource.config_id {
            Some(_) => self.others.contains(&key),
            None => self.any.contains(&identity),
        }
    }
}

/// What a stack's deployment does with extension resources that exist unmanaged: take them over with `adopt`.
pub(crate) fn existing_resource_check(
    adopt: bool,
    own: &ManagedSet,
    ownership: &Ownership,
) -> ExistingResourceCheck {
    let own: HashSet<Identity> = own.iter().filter_map(|r| identity_of(r.key())).collect();
    let others: HashSet<ResourceKey> = ownership.claimed().cloned().collect();
    let any = own
        .iter()
        .cloned()
        .chain(others.iter().filter_map(identity_of))
        .collect();
    ExistingResourceCheck {
        adopt,
        managed: Arc::new(StacksManage { others, own, any }),
    }
}

/// The stack-level error naming every resource the deployment found existing and left alone, with the fix.
pub(crate) fn exists_unmanaged_report(snapshot: &DeploymentSnapshot) -> Option<ErrorDetail> {
    let mut refused = Vec::new();
    collect_refusals(snapshot, &mut refused);
    (!refused.is_empty()).then(|| {
        ErrorDetail::new(
            RESOURCE_EXISTS_UNMANAGED,
            format!(
                "{} extension resource(s) of the template already exist and no deployment stack manages them; \
                 they were not changed and the stack does not manage them. To take them over, deploy the stack \
                 with 'adoptExistingResources' set to true (cairn stack ... create --adopt).",
                refused.len()
            ),
        )
        .with_details(refused)
    })
}

fn collect_refusals(snapshot: &DeploymentSnapshot, out: &mut Vec<ErrorDetail>) {
    for operation in &snapshot.operations {
        if let Some(error) = operation
            .properties
            .status_message
            .as_ref()
            .and_then(|m| m.error.as_ref())
            .filter(|e| e.code() == RESOURCE_EXISTS_UNMANAGED)
        {
            let mut detail = error.clone();
            if detail.target.is_none() {
                detail.target = operation
                    .properties
                    .target_resource
                    .as_ref()
                    .and_then(|t| t.symbolic_name.clone());
            }
            out.push(detail);
        }
    }
    for nested in &snapshot.nested {
        collect_refusals(nested, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_stacks::{ExtensionIdentity, ManagedResource, StackClaim};
    use serde_json::json;

    fn widget(config_id: &str, name: &str) -> ManagedResource {
        ManagedResource::extensible(
            ExtensionIdentity {
                name: "Widgets".into(),
                version: "1.0.0".into(),
                config_id: Some(config_id.into()),
            },
            "widget",
            json!({ "name": name }),
        )
    }

    fn asks(check: &ExistingResourceCheck, config_id: Option<&str>, name: &str) -> bool {
        let identifiers = json!({ "name": name });
        !check.managed.manages(&ExtensionResource {
            extension: "WIDGETS",
            config_id,
            resource_type: "Widget",
            identifiers: &identifiers,
        })
    }

    #[test]
    fn own_resources_on_any_control_plane_and_others_on_theirs_are_managed() {
        let own: ManagedSet = [widget("c1", "mine")].into_iter().collect();
        let mut ownership = Ownership::new();
        ownership.claim(
            widget("c1", "theirs").key().clone(),
            StackClaim {
                stack_id: "other".into(),
                shared: false,
            },
        );
        let check = existing_resource_check(false, &own, &ownership);
        assert!(!asks(&check, Some("c1"), "mine"));
        assert!(
            !asks(&check, Some("c2"), "mine"),
            "a configId change is refused later"
        );
        assert!(!asks(&check, Some("c1"), "theirs"));
        assert!(asks(&check, Some("c2"), "theirs"), "another control plane");
        assert!(!asks(&check, None, "theirs"), "no configId: identity alone");
        assert!(asks(&check, Some("c1"), "new"));
        assert!(asks(&check, None, "new"));
    }
}
