//! The unmanage diff: the previous managed set against the new one gives the resources kept, added and
//! removed, and each removed resource is deleted or detached as `actionOnUnmanage` says.
//!
//! Rules (deployments-and-stacks-api.md §1.3, §2.2, §2.4):
//! - Removed resources are bucketed: resource groups follow `actionOnUnmanage.resourceGroups`, management
//!   groups `actionOnUnmanage.managementGroups` (both `detach` when absent), everything else — including
//!   extensible resources and subscriptions — `actionOnUnmanage.resources`.
//! - `resourcesWithoutDeleteSupport` (`detach` | `fail`, default `fail` like the CLI and PowerShell) applies
//!   when a delete reports the type cannot be deleted; see [`crate::run`].
//! - A resource left `deleteFailed` by the last run is still in the previous set, so it is retried if it is
//!   still unmanaged, and becomes `managed` again if the template declares it again.
//! - An **incomplete** new set (the deployment failed) lists what may have been created, not what the
//!   template declares, so nothing is unmanaged: resources only in the previous set are kept as they are.
//! - Ownership (cairn's addition, after Azure/deployment-stacks #15 and #50): adding a resource another stack
//!   manages is refused unless that stack marked it shared; a removed resource another stack also manages is
//!   detached, never deleted.

use std::collections::HashMap;

use cairn_arm::ErrorDetail;
use cairn_arm::models::stack::{
    ActionOnUnmanage, ResourceStatusMode, ResourcesWithoutDeleteSupportAction, UnmanageAction,
};

use crate::collect::CollectedSet;
use crate::error::codes;
use crate::key::ResourceKey;
use crate::managed::{ManagedResource, ManagedSet, UnmanageBucket};
use crate::plan::DeletePlan;
use crate::policy::ResourcePolicy;

/// Another stack's claim on a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackClaim {
    /// The other stack's resource ID.
    pub stack_id: String,
    /// Whether that stack lets other stacks manage the resource too.
    pub shared: bool,
}

/// Which other stacks manage which resources (never the stack being diffed).
#[derive(Clone, Debug, Default)]
pub struct Ownership {
    claims: HashMap<ResourceKey, Vec<StackClaim>>,
}

impl Ownership {
    /// No other stack manages anything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `claim.stack_id` manages `key`.
    pub fn claim(&mut self, key: ResourceKey, claim: StackClaim) {
        self.claims.entry(key).or_default().push(claim);
    }

    /// The claims on `key`.
    pub fn claims(&self, key: &ResourceKey) -> &[StackClaim] {
        self.claims.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The claims on whatever `key` may name: an extensible key without a `configId` (a caller naming a resource
    /// before its extension said which control plane it is in) may name the resource of that extension, type and
    /// identifiers in any control plane.
    pub fn claims_on_any_match(&self, key: &ResourceKey) -> Vec<&StackClaim> {
        let ResourceKey::Extensible(wanted) = key else {
            return self.claims(key).iter().collect();
        };
        if wanted.config_id().is_some() {
            return self.claims(key).iter().collect();
        }
        self.claims
            .iter()
            .filter(|(claimed, _)| match claimed {
                ResourceKey::Extensible(claimed) => {
                    claimed.extension_name() == wanted.extension_name()
                        && claimed.resource_type() == wanted.resource_type()
                        && claimed.canonical_identifiers() == wanted.canonical_identifiers()
                }
                ResourceKey::Arm(_) => false,
            })
            .flat_map(|(_, claims)| claims)
            .collect()
    }

    /// Every resource another stack manages.
    pub fn claimed(&self) -> impl Iterator<Item = &ResourceKey> {
        self.claims.keys()
    }
}

/// What happens to a removed resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RemovalAction {
    Delete,
    Detach,
}

/// Why a removed resource gets its action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemovalReason {
    /// The `actionOnUnmanage` setting of this bucket.
    ActionOnUnmanage(UnmanageBucket),
    /// Another stack still manages it, so it is detached whatever `actionOnUnmanage` says.
    ManagedByOtherStack { stack_id: String },
    /// A `retain` pattern names it, so it is detached whatever `actionOnUnmanage` says.
    Retained { pattern: String },
}

/// A resource leaving the stack.
#[derive(Clone, Debug, PartialEq)]
pub struct Removal {
    /// The resource as the previous set recorded it (its dependency edges and config are what deleting needs).
    pub resource: ManagedResource,
    pub action: RemovalAction,
    pub reason: RemovalReason,
}

/// The result of a diff. Every key of the previous and new sets is in exactly one of the three lists.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnmanageDiff {
    /// In both sets (with the new record, status `managed`), or only in the previous set when the new set is
    /// incomplete (unchanged).
    pub kept: Vec<ManagedResource>,
    /// Only in the new set.
    pub added: Vec<ManagedResource>,
    /// Only in the previous set (never when the new set is incomplete).
    pub removed: Vec<Removal>,
}

impl UnmanageDiff {
    /// The removed resources to delete.
    pub fn to_delete(&self) -> Vec<ManagedResource> {
        self.removed_with(RemovalAction::Delete).cloned().collect()
    }

    /// The removed resources to detach.
    pub fn to_detach(&self) -> Vec<ManagedResource> {
        self.removed_with(RemovalAction::Detach).cloned().collect()
    }

    fn removed_with(&self, action: RemovalAction) -> impl Iterator<Item = &ManagedResource> {
        self.removed
            .iter()
            .filter(move |r| r.action == action)
            .map(|r| &r.resource)
    }

    /// The ordered delete plan for the resources to delete.
    pub fn delete_plan(&self) -> DeletePlan {
        DeletePlan::build(self.to_delete())
    }
}

/// Why a diff was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error("'actionOnUnmanage.{setting}' is '{value}'; expected 'delete' or 'detach'")]
    UnknownUnmanageAction {
        setting: &'static str,
        value: String,
    },
    #[error(
        "'actionOnUnmanage.resourcesWithoutDeleteSupport' is '{value}'; expected 'detach' or 'fail'"
    )]
    UnknownWithoutDeleteSupportAction { value: String },
    #[error(
        "{} resource(s) are managed by another deployment stack that does not share them. Fix: remove them from \
         the template, or have the owning stack share them",
        .conflicts.len()
    )]
    ManagedByAnotherStack { conflicts: Vec<OwnershipConflict> },
    #[error(
        "{} resource(s) would be deleted but are protected by the stack's 'protect' patterns; nothing was deleted. \
         Fix: keep them in the template, add them to 'retain', or repeat the operation with 'bypassProtection'",
        .resources.len()
    )]
    ProtectedResources { resources: Vec<ProtectedRemoval> },
}

/// A resource an operation would delete although a `protect` pattern names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtectedRemoval {
    /// The resource's selector.
    pub resource: String,
    /// The pattern that protects it, as written.
    pub pattern: String,
}

/// A resource the diff would take from another stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnershipConflict {
    /// The resource key, formatted.
    pub resource: String,
    pub stack_id: String,
}

impl DiffError {
    /// The ARM error (400-class: the request cannot be carried out as given).
    pub fn to_error_detail(&self) -> ErrorDetail {
        match self {
            Self::UnknownUnmanageAction { setting, .. } => {
                ErrorDetail::new(codes::INVALID_ACTION_ON_UNMANAGE, self.to_string())
                    .with_target(format!("properties.actionOnUnmanage.{setting}"))
            }
            Self::UnknownWithoutDeleteSupportAction { .. } => {
                ErrorDetail::new(codes::INVALID_ACTION_ON_UNMANAGE, self.to_string())
                    .with_target("properties.actionOnUnmanage.resourcesWithoutDeleteSupport")
            }
            Self::ManagedByAnotherStack { conflicts } => {
                ErrorDetail::new(codes::RESOURCE_MANAGED_BY_ANOTHER_STACK, self.to_string())
                    .with_details(conflicts.iter().map(|c| {
                        ErrorDetail::new(
                            codes::RESOURCE_MANAGED_BY_ANOTHER_STACK,
                            format!(
                                "The resource is managed by deployment stack '{}'.",
                                c.stack_id
                            ),
                        )
                        .with_target(c.resource.clone())
                    }))
            }
            Self::ProtectedResources { resources } => {
                ErrorDetail::new(codes::RESOURCE_PROTECTED, self.to_string()).with_details(
                    resources.iter().map(|r| {
                        ErrorDetail::new(
                            codes::RESOURCE_PROTECTED,
                            format!("The resource is protected by the pattern '{}'.", r.pattern),
                        )
                        .with_target(r.resource.clone())
                    }),
                )
            }
        }
    }
}

/// The delete-or-detach decision of each bucket, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnmanagePolicy {
    pub resources: RemovalAction,
    pub resource_groups: RemovalAction,
    pub management_groups: RemovalAction,
}

impl UnmanagePolicy {
    /// Reads `actionOnUnmanage`; values other than `delete` / `detach` are refused.
    pub fn from_action(action: &ActionOnUnmanage) -> Result<Self, DiffError> {
        fn read(
            setting: &'static str,
            action: &UnmanageAction,
        ) -> Result<RemovalAction, DiffError> {
            match action {
                UnmanageAction::Delete => Ok(RemovalAction::Delete),
                UnmanageAction::Detach => Ok(RemovalAction::Detach),
                UnmanageAction::Other(value) => Err(DiffError::UnknownUnmanageAction {
                    setting,
                    value: value.clone(),
                }),
            }
        }
        Ok(Self {
            resources: read("resources", &action.resources)?,
            resource_groups: read("resourceGroups", action.for_resource_groups())?,
            management_groups: read("managementGroups", action.for_management_groups())?,
        })
    }

    /// The action for a bucket.
    pub fn for_bucket(&self, bucket: UnmanageBucket) -> RemovalAction {
        match bucket {
            UnmanageBucket::Resources => self.resources,
            UnmanageBucket::ResourceGroups => self.resource_groups,
            UnmanageBucket::ManagementGroups => self.management_groups,
        }
    }
}

/// What to do when a type cannot be deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithoutDeleteSupport {
    Detach,
    Fail,
}

impl WithoutDeleteSupport {
    /// Reads `actionOnUnmanage.resourcesWithoutDeleteSupport`; absent means `fail` (the CLI and PowerShell
    /// default, and what stacks did before the setting existed).
    pub fn from_action(action: &ActionOnUnmanage) -> Result<Self, DiffError> {
        match &action.resources_without_delete_support {
            None | Some(ResourcesWithoutDeleteSupportAction::Fail) => Ok(Self::Fail),
            Some(ResourcesWithoutDeleteSupportAction::Detach) => Ok(Self::Detach),
            Some(ResourcesWithoutDeleteSupportAction::Other(value)) => {
                Err(DiffError::UnknownWithoutDeleteSupportAction {
                    value: value.clone(),
                })
            }
        }
    }
}

/// Diffs `previous` against `next` (see the module docs). `next_complete` is false when the deployment did
/// not succeed. `policy` detaches what its `retain` patterns name and refuses the whole diff when a removal would
/// delete what its `protect` patterns name.
pub fn diff(
    previous: &ManagedSet,
    next: &ManagedSet,
    next_complete: bool,
    action: &ActionOnUnmanage,
    ownership: &Ownership,
    policy: &ResourcePolicy,
) -> Result<UnmanageDiff, DiffError> {
    let resource_policy = policy;
    let unmanage = UnmanagePolicy::from_action(action)?;
    WithoutDeleteSupport::from_action(action)?;
    let mut protected = Vec::new();
    let mut result = UnmanageDiff {
        kept: Vec::with_capacity(next.len().min(previous.len())),
        added: Vec::new(),
        removed: Vec::new(),
    };
    let mut conflicts = Vec::new();
    for resource in next {
        match previous.get(resource.key()) {
            Some(before) => {
                let mut kept = resource.clone();
                kept.status = ResourceStatusMode::Managed;
                if kept.deny_status.is_none() {
                    kept.deny_status = before.deny_status.clone();
                }
                result.kept.push(kept);
            }
            None => {
                for claim in ownership.claims(resource.key()) {
                    if !claim.shared {
                        conflicts.push(OwnershipConflict {
                            resource: resource.key().to_string(),
                            stack_id: claim.stack_id.clone(),
                        });
                    }
                }
                let mut added = resource.clone();
                added.status = ResourceStatusMode::Managed;
                result.added.push(added);
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(DiffError::ManagedByAnotherStack { conflicts });
    }
    for resource in previous {
        if next.contains(resource.key()) {
            continue;
        }
        if !next_complete {
            result.kept.push(resource.clone());
            continue;
        }
        let bucket = resource.bucket();
        let (action, reason) = match ownership.claims(resource.key()).first() {
            Some(claim) => (
                RemovalAction::Detach,
                RemovalReason::ManagedByOtherStack {
                    stack_id: claim.stack_id.clone(),
                },
            ),
            None => match resource_policy.retaining(resource.key()) {
                Some(pattern) if unmanage.for_bucket(bucket) == RemovalAction::Delete => (
                    RemovalAction::Detach,
                    RemovalReason::Retained {
                        pattern: pattern.as_str().to_owned(),
                    },
                ),
                _ => (
                    unmanage.for_bucket(bucket),
                    RemovalReason::ActionOnUnmanage(bucket),
                ),
            },
        };
        if action == RemovalAction::Delete
            && let Some(pattern) = resource_policy.protecting(resource.key())
        {
            protected.push(ProtectedRemoval {
                resource: resource.key().to_string(),
                pattern: pattern.as_str().to_owned(),
            });
        }
        result.removed.push(Removal {
            resource: resource.clone(),
            action,
            reason,
        });
    }
    if !protected.is_empty() {
        return Err(DiffError::ProtectedResources {
            resources: protected,
        });
    }
    Ok(result)
}

/// [`diff`] against what [`crate::collect::collect_managed_set`] read from the deployment tree.
pub fn diff_collected(
    previous: &ManagedSet,
    collected: &CollectedSet,
    action: &ActionOnUnmanage,
    ownership: &Ownership,
    policy: &ResourcePolicy,
) -> Result<UnmanageDiff, DiffError> {
    diff(
        previous,
        &collected.resources,
        collected.complete,
        action,
        ownership,
        policy,
    )
}

/// The diff of a stack DELETE: every managed resource leaves, with the DELETE's actions.
pub fn unmanage_all(
    previous: &ManagedSet,
    action: &ActionOnUnmanage,
    ownership: &Ownership,
    policy: &ResourcePolicy,
) -> Result<UnmanageDiff, DiffError> {
    diff(
        previous,
        &ManagedSet::new(),
        true,
        action,
        ownership,
        policy,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::managed::ExtensionIdentity;
    use cairn_arm::ResourceId;
    use cairn_arm::models::stack::DenyStatusMode;
    use serde_json::json;

    fn arm(id: &str) -> ManagedResource {
        ManagedResource::arm(ResourceId::parse(id).unwrap())
    }

    #[test]
    fn a_key_without_config_id_matches_claims_in_any_control_plane() {
        let mut ownership = Ownership::new();
        let claim = StackClaim {
            stack_id: "/subscriptions/other/providers/Microsoft.Resources/deploymentStacks/s"
                .into(),
            shared: false,
        };
        ownership.claim(config_map("a").key().clone(), claim.clone());
        let ids = json!({"metadata": {"name": "a", "namespace": "app"}});
        let cases = [
            (
                ResourceKey::extensible("kubernetes", None, "core/ConfigMap", &ids),
                1,
            ),
            (
                ResourceKey::extensible("Kubernetes", Some("C"), "core/ConfigMap", &ids),
                1,
            ),
            (
                ResourceKey::extensible("Kubernetes", Some("D"), "core/ConfigMap", &ids),
                0,
            ),
            (
                ResourceKey::extensible("Kubernetes", None, "core/Secret", &ids),
                0,
            ),
            (
                ResourceKey::extensible(
                    "Kubernetes",
                    None,
                    "core/ConfigMap",
                    &json!({"metadata": {"name": "b"}}),
                ),
                0,
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(ownership.claims_on_any_match(&key).len(), expected, "{key}");
        }
    }

    fn site(name: &str) -> ManagedResource {
        arm(&format!(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/{name}"
        ))
    }

    fn config_map(name: &str) -> ManagedResource {
        ManagedResource::extensible(
            ExtensionIdentity {
                name: "Kubernetes".into(),
                version: "1.0.0".into(),
                config_id: Some("C".into()),
            },
            "core/ConfigMap",
            json!({"metadata": {"namespace": "app", "name": name}}),
        )
    }

    fn action(resources: &str, groups: &str) -> ActionOnUnmanage {
        ActionOnUnmanage {
            resources: UnmanageAction::parse(resources),
            resource_groups: Some(UnmanageAction::parse(groups)),
            management_groups: None,
            resources_without_delete_support: None,
        }
    }

    fn names(resources: &[ManagedResource]) -> Vec<String> {
        resources.iter().map(|r| r.key().to_string()).collect()
    }

    #[test]
    fn kept_added_removed_with_bucketed_actions() {
        let rg = arm("/subscriptions/s/resourceGroups/old");
        let mg = arm("/providers/Microsoft.Management/managementGroups/mg");
        let previous = ManagedSet::from_resources([
            site("a"),
            site("b"),
            rg.clone(),
            mg.clone(),
            config_map("x"),
        ]);
        let next = ManagedSet::from_resources([site("a"), site("c")]);
        let result = diff(
            &previous,
            &next,
            true,
            &action("delete", "detach"),
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        assert_eq!(names(&result.kept), names(&[site("a")]));
        assert_eq!(names(&result.added), names(&[site("c")]));
        let removed: Vec<(String, RemovalAction)> = result
            .removed
            .iter()
            .map(|r| (r.resource.key().to_string(), r.action))
            .collect();
        assert_eq!(
            removed,
            vec![
                (site("b").key().to_string(), RemovalAction::Delete),
                (rg.key().to_string(), RemovalAction::Detach),
                (mg.key().to_string(), RemovalAction::Detach),
                (config_map("x").key().to_string(), RemovalAction::Delete),
            ]
        );
        assert_eq!(
            names(&result.to_delete()),
            names(&[site("b"), config_map("x")])
        );
    }

    fn widget(version: &str, api_version: &str, cluster_config: &str) -> ManagedResource {
        let mut resource = ManagedResource::extensible(
            ExtensionIdentity {
                name: "Widgets".into(),
                version: version.into(),
                config_id: Some("c1".into()),
            },
            "widget",
            json!({"name": "a"}),
        );
        resource.api_version = Some(api_version.into());
        let config = crate::directive::PersistedConfig::from_wire(
            "widgets",
            &json!({"cluster": {"value": cluster_config}}),
        )
        .unwrap();
        resource.set_config(std::sync::Arc::new(config));
        resource
    }

    /// Moving a template to a new extension version and `apiVersion` keeps its resources, recorded as the new
    /// deployment describes them: nothing is removed, so `deleteAll` deletes nothing.
    #[test]
    fn an_extension_upgrade_keeps_resources_with_the_new_record() {
        let previous = ManagedSet::from_resources([widget("1.0.0", "v1", "old")]);
        let next = ManagedSet::from_resources([widget("1.1.0", "v2", "new")]);
        let delete_all = ActionOnUnmanage::from_cli_preset("deleteAll").unwrap();
        for complete in [true, false] {
            let result = diff(
                &previous,
                &next,
                complete,
                &delete_all,
                &Ownership::new(),
                &ResourcePolicy::none(),
            )
            .unwrap();
            assert!(result.removed.is_empty(), "{:?}", result.removed);
            assert!(result.added.is_empty());
            assert!(result.delete_plan().is_empty());
            assert_eq!(result.kept.len(), 1);
            let kept = &result.kept[0];
            assert_eq!(kept.extension().unwrap().version, "1.1.0");
            assert_eq!(kept.api_version.as_deref(), Some("v2"));
            assert_eq!(kept.config, next.iter().next().unwrap().config);
        }
    }

    #[test]
    fn detach_all_deletes_nothing_and_delete_all_deletes_groups() {
        let previous =
            ManagedSet::from_resources([site("a"), arm("/subscriptions/s/resourceGroups/old")]);
        let detached = unmanage_all(
            &previous,
            &ActionOnUnmanage::detach_all(),
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        assert!(detached.to_delete().is_empty());
        assert_eq!(detached.to_detach().len(), 2);
        let all = ActionOnUnmanage::from_cli_preset("deleteAll").unwrap();
        assert_eq!(
            unmanage_all(&previous, &all, &Ownership::new(), &ResourcePolicy::none())
                .unwrap()
                .to_delete()
                .len(),
            2
        );
    }

    #[test]
    fn incomplete_new_set_unmanages_nothing() {
        let mut failed_before = site("b");
        failed_before.status = ResourceStatusMode::DeleteFailed;
        let previous = ManagedSet::from_resources([site("a"), failed_before]);
        let next = ManagedSet::from_resources([site("c")]);
        let result = diff(
            &previous,
            &next,
            false,
            &action("delete", "delete"),
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        assert!(result.removed.is_empty());
        assert_eq!(names(&result.kept), names(&[site("a"), site("b")]));
        assert_eq!(
            result.kept[1].status,
            ResourceStatusMode::DeleteFailed,
            "kept as it was"
        );
    }

    #[test]
    fn delete_failed_resources_are_retried_or_managed_again() {
        let mut failed = site("b");
        failed.status = ResourceStatusMode::DeleteFailed;
        let mut failed_too = site("d");
        failed_too.status = ResourceStatusMode::DeleteFailed;
        failed_too.deny_status = Some(DenyStatusMode::DenyDelete);
        let previous = ManagedSet::from_resources([failed, failed_too]);
        let next = ManagedSet::from_resources([site("d")]);
        let result = diff(
            &previous,
            &next,
            true,
            &action("delete", "detach"),
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap();
        assert_eq!(names(&result.to_delete()), names(&[site("b")]), "retried");
        assert_eq!(
            result.kept[0].status,
            ResourceStatusMode::Managed,
            "declared again"
        );
        assert_eq!(result.kept[0].deny_status, Some(DenyStatusMode::DenyDelete));
    }

    #[test]
    fn other_stacks_resources_are_refused_unless_shared_and_never_deleted() {
        let mut ownership = Ownership::new();
        ownership.claim(
            site("c").key().clone(),
            StackClaim {
                stack_id: "other".into(),
                shared: false,
            },
        );
        let previous = ManagedSet::from_resources([site("b")]);
        let next = ManagedSet::from_resources([site("c")]);
        let error = diff(
            &previous,
            &next,
            true,
            &action("delete", "delete"),
            &ownership,
            &ResourcePolicy::none(),
        )
        .unwrap_err();
        let detail = error.to_error_detail();
        assert_eq!(detail.code(), codes::RESOURCE_MANAGED_BY_ANOTHER_STACK);
        assert_eq!(detail.details.as_ref().map(Vec::len), Some(1));

        let mut shared = Ownership::new();
        shared.claim(
            site("c").key().clone(),
            StackClaim {
                stack_id: "other".into(),
                shared: true,
            },
        );
        shared.claim(
            site("b").key().clone(),
            StackClaim {
                stack_id: "other".into(),
                shared: true,
            },
        );
        let result = diff(
            &previous,
            &next,
            true,
            &action("delete", "delete"),
            &shared,
            &ResourcePolicy::none(),
        )
        .unwrap();
        assert_eq!(result.added.len(), 1);
        assert_eq!(result.removed[0].action, RemovalAction::Detach);
        assert_eq!(
            result.removed[0].reason,
            RemovalReason::ManagedByOtherStack {
                stack_id: "other".into()
            }
        );
    }

    #[test]
    fn unknown_actions_are_refused() {
        let previous = ManagedSet::from_resources([site("a")]);
        let error = unmanage_all(
            &previous,
            &action("purge", "detach"),
            &Ownership::new(),
            &ResourcePolicy::none(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_error_detail().target.as_deref(),
            Some("properties.actionOnUnmanage.resources")
        );
        let mut odd = action("delete", "detach");
        odd.resources_without_delete_support =
            Some(ResourcesWithoutDeleteSupportAction::parse("ignore"));
        assert!(matches!(
            unmanage_all(&previous, &odd, &Ownership::new(), &ResourcePolicy::none()),
            Err(DiffError::UnknownWithoutDeleteSupportAction { .. })
        ));
    }
}
