//! Backend-independent contract tests: every `Store` implementation runs these against itself (feature `testing`),
//! so the SQLite and PostgreSQL stores behave alike. Use [`store_conformance_tests!`](crate::store_conformance_tests)
//! to turn them into one `#[tokio::test]` each.
//!
//! Each case takes a fresh, empty store. Cases panic on failure, as tests do.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::InventoryChange;
use crate::{
    DeploymentFilter, DeploymentId, DeploymentKey, DeploymentLookup, DeploymentOwner,
    DeploymentRecord, DeploymentStatus, DeploymentSummary, DeploymentUpdate, ExtensionRef,
    JsonText, ManagedResource, ManagedResourceFilter, NewDeployment, NewHostOperation,
    NewOperationResult, NewSecretVersion, NewStack, NewStackWhatIf, OperationResultState,
    OperationStep, PageRequest, Precondition, ResourceGroup, ResourceKey, SecretOwner, SecretRef,
    Store, StoreError, Tags, Timestamp, Vault,
};

/// Every case, by name, in the order [`store_conformance_tests!`](crate::store_conformance_tests) generates them.
pub const CASES: &[&str] = &[
    "resource_groups_round_trip",
    "resource_group_preconditions",
    "deployments_create_get_and_list",
    "deployment_listing_filters_and_pages",
    "deployment_updates_are_partial_and_versioned",
    "deployment_replacement_starts_a_new_run",
    "deployment_delete_removes_history_only",
    "deployment_claims_and_orphans",
    "deployment_takeover_fences_the_old_holder",
    "deployment_takeovers_count_runs_without_progress",
    "operation_journal_appends_and_reads",
    "record_step_is_atomic_with_inventory",
    "record_step_put_if_absent_keeps_an_existing_row",
    "inventory_round_trip_and_filters",
    "key_vault_secret_versions",
    "key_vault_vaults",
    "leases_exclusive_with_takeover",
    "secrets_round_trip",
    "concurrent_creates_conflict",
    "concurrent_updates_conflict",
    "concurrent_lease_acquires_conflict",
    "canary_secret_round_trips_through_every_path",
    "stacks_round_trip_versions_and_pages",
    "stack_writes_carry_their_inventory_changes",
    "stack_what_ifs_put_replace_get_list_delete",
    "stack_what_ifs_expire_and_purge",
    "host_operations_put_replace_get_delete",
    "host_operations_expire_and_purge",
    "journal_writes_are_fenced_by_the_claim",
    "deployment_cancel_requests",
    "operation_results_run_finish_expire",
    "readiness_until_closed",
];

/// Generates one multi-threaded `#[tokio::test]` per conformance case. `$make` is a closure returning a future
/// of a fresh store (anything that dereferences to a `Store`); the calling crate needs `tokio` with `macros` and
/// `rt-multi-thread`.
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!(@cases $make;
            resource_groups_round_trip,
            resource_group_preconditions,
            deployments_create_get_and_list,
            deployment_listing_filters_and_pages,
            deployment_updates_are_partial_and_versioned,
            deployment_replacement_starts_a_new_run,
            deployment_delete_removes_history_only,
            deployment_claims_and_orphans,
            deployment_takeover_fences_the_old_holder,
            deployment_takeovers_count_runs_without_progress,
            operation_journal_appends_and_reads,
            record_step_is_atomic_with_inventory,
            record_step_put_if_absent_keeps_an_existing_row,
            inventory_round_trip_and_filters,
            key_vault_secret_versions,
            key_vault_vaults,
            leases_exclusive_with_takeover,
            secrets_round_trip,
            concurrent_creates_conflict,
            concurrent_updates_conflict,
            concurrent_lease_acquires_conflict,
            canary_secret_round_trips_through_every_path,
            stacks_round_trip_versions_and_pages,
            stack_writes_carry_their_inventory_changes,
            stack_what_ifs_put_replace_get_list_delete,
            stack_what_ifs_expire_and_purge,
            host_operations_put_replace_get_delete,
            host_operations_expire_and_purge,
            journal_writes_are_fenced_by_the_claim,
            deployment_cancel_requests,
            operation_results_run_finish_expire,
            readiness_until_closed,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store = ($make)().await;
                $crate::conformance::$case(&*store).await;
            }
        )*
    };
}

/// A conformance case as a plain function, for a test harness that runs the cases itself (e.g. to share one
/// database server between them).
pub type CaseFn = for<'a> fn(&'a dyn Store) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

macro_rules! case_table {
    ($($case:ident),* $(,)?) => {
        /// Every case with its name, in [`CASES`] order.
        pub const ALL_CASES: &[(&str, CaseFn)] = &[$((stringify!($case), |store| Box::pin($case(store)))),*];
    };
}

case_table!(
    resource_groups_round_trip,
    resource_group_preconditions,
    deployments_create_get_and_list,
    deployment_listing_filters_and_pages,
    deployment_updates_are_partial_and_versioned,
    deployment_replacement_starts_a_new_run,
    deployment_delete_removes_history_only,
    deployment_claims_and_orphans,
    deployment_takeover_fences_the_old_holder,
    deployment_takeovers_count_runs_without_progress,
    operation_journal_appends_and_reads,
    record_step_is_atomic_with_inventory,
    record_step_put_if_absent_keeps_an_existing_row,
    inventory_round_trip_and_filters,
    key_vault_secret_versions,
    key_vault_vaults,
    leases_exclusive_with_takeover,
    secrets_round_trip,
    concurrent_creates_conflict,
    concurrent_updates_conflict,
    concurrent_lease_acquires_conflict,
    canary_secret_round_trips_through_every_path,
    stacks_round_trip_versions_and_pages,
    stack_writes_carry_their_inventory_changes,
    stack_what_ifs_put_replace_get_list_delete,
    stack_what_ifs_expire_and_purge,
    host_operations_put_replace_get_delete,
    host_operations_expire_and_purge,
    journal_writes_are_fenced_by_the_claim,
    deployment_cancel_requests,
    operation_results_run_finish_expire,
    readiness_until_closed,
);

/// A timestamp `millis` after an arbitrary fixed epoch (2026-01-01), for readable test data.
pub fn at(millis: i64) -> Timestamp {
    Timestamp::from_unix_millis(1_767_225_600_000 + millis)
}

const SCOPE: &str =
    "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-conformance";

/// A deployment request as the engine would persist it, with `secret` standing in for a secure parameter.
pub fn new_deployment(scope: &str, name: &str, secret: Option<&SecretRef>) -> NewDeployment {
    let admin_password = secret.map_or(json!(null), SecretRef::to_marker);
    NewDeployment {
        id: DeploymentId::generate(),
        key: DeploymentKey::new(scope, name),
        parent: None,
        location: Some("westus".into()),
        tags: Tags::from([("env".to_owned(), "test".to_owned())]),
        request: json!({
            "mode": "Incremental",
            "template": {"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                         "contentVersion": "1.0.0.0", "resources": []},
            "parameters": {"prefix": {"value": "app"}, "adminPassword": {"value": admin_password}},
        }),
        status: DeploymentStatus::Accepted,
        correlation_id: "c0ffee00-0000-0000-0000-000000000000".into(),
        stack_initiated: false,
        created_at: at(0),
        owner: None,
    }
}

/// One journal step for `operation_id` on a storage account named after it.
pub fn step(
    deployment: &DeploymentId,
    operation_id: &str,
    state: &str,
    millis: i64,
) -> OperationStep {
    OperationStep {
        deployment_id: deployment.clone(),
        operation_id: operation_id.into(),
        target_resource: Some(json!({
            "id": format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/{operation_id}"),
            "resourceType": "Microsoft.Storage/storageAccounts",
            "resourceName": operation_id,
            "symbolicName": operation_id,
        })),
        provisioning_operation: "Create".into(),
        provisioning_state: state.into(),
        status_code: (state == "Succeeded").then(|| "OK".to_owned()),
        status_message: (state == "Failed")
            .then(|| json!({"error": {"code": "Boom", "message": "it failed"}})),
        service_request_id: None,
        timestamp: at(millis),
        duration_ms: Some(millis),
        extension: None,
        request_content: None,
        response_content: None,
    }
}

fn resource_group(name: &str) -> ResourceGroup {
    ResourceGroup {
        subscription_id: "00000000-0000-0000-0000-000000000001".into(),
        name: name.into(),
        location: "westus".into(),
        tags: Tags::new(),
        managed_by: None,
        provisioning_state: "Succeeded".into(),
    }
}

fn secret(text: &str) -> SecretString {
    SecretString::from(text.to_owned())
}

fn assert_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::Conflict { .. }) => {}
        other => panic!("{what}: expected Conflict, got {other:?}"),
    }
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::NotFound { .. }) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

pub async fn resource_groups_round_trip(store: &dyn Store) {
    let mut group = resource_group("RG-One");
    group.tags.insert("owner".into(), "team".into());
    group.managed_by =
        Some("/subscriptions/x/providers/Microsoft.Resources/deploymentStacks/s".into());
    let created = store
        .put_resource_group(group.clone(), Precondition::MustNotExist, at(1))
        .await
        .expect("create");
    assert_eq!(created.group, group);
    assert_eq!(
        (created.created_at, created.updated_at, created.version),
        (at(1), at(1), 1)
    );

    let fetched = store
        .get_resource_group("00000000-0000-0000-0000-000000000001", "rg-one")
        .await
        .expect("get")
        .expect("present under another case");
    assert_eq!(fetched, created);
    assert!(
        store
            .get_resource_group("00000000-0000-0000-0000-000000000001", "rg-two")
            .await
            .expect("get")
            .is_none()
    );

    store
        .put_resource_group(resource_group("rg-two"), Precondition::Any, at(2))
        .await
        .expect("second");
    store
        .put_resource_group(resource_group("other-sub"), Precondition::Any, at(2))
        .await
        .expect("third");
    let mut other = resource_group("rg-elsewhere");
    other.subscription_id = "00000000-0000-0000-0000-000000000002".into();
    store
        .put_resource_group(other, Precondition::Any, at(2))
        .await
        .expect("other subscription");
    let names: Vec<_> = store
        .list_resource_groups(
            "00000000-0000-0000-0000-000000000001",
            PageRequest::default(),
        )
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|r| r.group.name)
        .collect();
    assert_eq!(names, ["other-sub", "RG-One", "rg-two"]);

    let mut changed = group.clone();
    changed.provisioning_state = "Deleting".into();
    let updated = store
        .put_resource_group(changed, Precondition::Version(1), at(3))
        .await
        .expect("update");
    assert_eq!(
        (updated.version, updated.created_at, updated.updated_at),
        (2, at(1), at(3))
    );
    assert_eq!(updated.group.provisioning_state, "Deleting");

    store
        .delete_resource_group(
            "00000000-0000-0000-0000-000000000001",
            "RG-ONE",
            Precondition::Any,
        )
        .await
        .expect("delete");
    assert!(
        store
            .get_resource_group("00000000-0000-0000-0000-000000000001", "rg-one")
            .await
            .expect("get")
            .is_none()
    );
    assert_not_found(
        store
            .delete_resource_group(
                "00000000-0000-0000-0000-000000000001",
                "rg-one",
                Precondition::Any,
            )
            .await,
        "second delete",
    );
}

pub async fn resource_group_preconditions(store: &dyn Store) {
    store
        .put_resource_group(resource_group("rg"), Precondition::MustNotExist, at(1))
        .await
        .expect("create");
    assert_conflict(
        store
            .put_resource_group(resource_group("RG"), Precondition::MustNotExist, at(2))
            .await,
        "create twice",
    );
    assert_conflict(
        store
            .put_resource_group(resource_group("rg"), Precondition::Version(7), at(2))
            .await,
        "stale",
    );
    assert_not_found(
        store
            .put_resource_group(resource_group("absent"), Precondition::Version(1), at(2))
            .await,
        "update of a missing group",
    );
    let again = store
        .put_resource_group(resource_group("rg"), Precondition::Any, at(3))
        .await
        .expect("overwrite");
    assert_eq!(again.version, 2);
    assert_conflict(
        store
            .delete_resource_group(
                "00000000-0000-0000-0000-000000000001",
                "rg",
                Precondition::Version(1),
            )
            .await,
        "stale delete",
    );
    store
        .delete_resource_group(
            "00000000-0000-0000-0000-000000000001",
            "rg",
            Precondition::Version(2),
        )
        .await
        .expect("delete at version");
}

pub async fn deployments_create_get_and_list(store: &dyn Store) {
    let new = new_deployment(SCOPE, "Main", None);
    let created = store
        .put_deployment(new.clone(), Precondition::MustNotExist)
        .await
        .expect("create");
    assert_eq!(created.key, new.key);
    assert_eq!(created.request, new.request);
    assert_eq!(created.status, DeploymentStatus::Accepted);
    assert_eq!(created.tags, new.tags);
    assert_eq!(created.location.as_deref(), Some("westus"));
    assert_eq!(created.correlation_id, new.correlation_id);
    assert_eq!(
        (created.created_at, created.updated_at, created.version),
        (at(0), at(0), 1)
    );
    assert_eq!(
        (
            created.started_at,
            created.finished_at,
            created.owner.clone()
        ),
        (None, None, None)
    );
    assert_eq!(
        (created.outputs.clone(), created.error.clone()),
        (None, None)
    );
    assert!(!created.stack_initiated);

    let other_case = DeploymentKey::new(SCOPE.to_uppercase(), "MAIN");
    let by_key = store
        .get_deployment(&other_case)
        .await
        .expect("get")
        .expect("case-insensitive key");
    assert_eq!(by_key, created);
    let by_id = store
        .get_deployment_by_id(&created.id)
        .await
        .expect("get")
        .expect("by id");
    assert_eq!(by_id, created);
    let summary = DeploymentSummary::from(&created);
    for lookup in [
        DeploymentLookup::Key(&other_case),
        DeploymentLookup::Id(&created.id),
    ] {
        let read = store.get_deployment_summary(lookup).await.expect("summary");
        assert_eq!(read.as_ref(), Some(&summary), "{lookup:?}");
    }
    for missing in [
        DeploymentLookup::Key(&DeploymentKey::new(SCOPE, "missing")),
        DeploymentLookup::Id(&DeploymentId::generate()),
    ] {
        let read = store
            .get_deployment_summary(missing)
            .await
            .expect("summary");
        assert_eq!(read, None, "{missing:?}");
    }
    assert!(
        store
            .get_deployment(&DeploymentKey::new(SCOPE, "missing"))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get_deployment_by_id(&DeploymentId::generate())
            .await
            .expect("get")
            .is_none()
    );

    let mut nested = new_deployment(SCOPE, "main-nested", None);
    nested.parent = Some(created.id.clone());
    nested.stack_initiated = true;
    nested.location = None;
    let nested = store
        .put_deployment(nested, Precondition::MustNotExist)
        .await
        .expect("nested");
    assert_eq!(nested.parent.as_ref(), Some(&created.id));
    assert!(nested.stack_initiated);
    assert_eq!(nested.location, None);
    assert_ne!(nested.id, created.id);

    let listed = store
        .list_deployments(&format!("{SCOPE}/"), DeploymentFilter::default())
        .await
        .expect("list");
    let names: Vec<_> = listed.items.iter().map(|d| d.key.name.as_str()).collect();
    assert_eq!(names, ["Main", "main-nested"]);
    assert_eq!(listed.continuation, None);
    let elsewhere = store
        .list_deployments("/subscriptions/other", DeploymentFilter::default())
        .await
        .expect("list");
    assert!(elsewhere.items.is_empty());
}

pub async fn deployment_listing_filters_and_pages(store: &dyn Store) {
    let mut ids = Vec::new();
    for index in 0..7 {
        let created = store
            .put_deployment(
                new_deployment(SCOPE, &format!("d{index}"), None),
                Precondition::MustNotExist,
            )
            .await
            .expect("create");
        ids.push(created);
    }
    for record in &ids[..3] {
        let update = DeploymentUpdate {
            status: Some(DeploymentStatus::Succeeded),
            ..DeploymentUpdate::at(at(5))
        };
        store
            .update_deployment(&record.id, record.version, update)
            .await
            .expect("finish");
    }
    let mut child = new_deployment(SCOPE, "child", None);
    child.parent = Some(ids[6].id.clone());
    store
        .put_deployment(child, Precondition::MustNotExist)
        .await
        .expect("child");

    let succeeded = store
        .list_deployments(
            SCOPE,
            DeploymentFilter {
                status: Some(DeploymentStatus::Succeeded),
                ..Default::default()
            },
        )
        .await
        .expect("filter");
    let names: Vec<_> = succeeded.items.iter().map(|d| d.key.name.clone()).collect();
    assert_eq!(names, ["d0", "d1", "d2"]);

    let children = store
        .list_deployments(
            SCOPE,
            DeploymentFilter {
                parent: Some(ids[6].id.clone()),
                ..Default::default()
            },
        )
        .await
        .expect("children");
    assert_eq!(children.items.len(), 1);
    assert_eq!(children.items[0].key.name, "child");

    let mut seen = Vec::new();
    let mut page = PageRequest::first(3);
    let mut pages = 0;
    loop {
        let result = store
            .list_deployments(
                SCOPE,
                DeploymentFilter {
                    page: page.clone(),
                    ..Default::default()
                },
            )
            .await
            .expect("page");
        pages += 1;
        assert!(result.items.len() <= 3);
        seen.extend(result.items.into_iter().map(|d| d.key.name));
        match result.continuation {
            Some(token) => {
                page = PageRequest {
                    limit: Some(3),
                    continuation: Some(token),
                }
            }
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(seen, ["child", "d0", "d1", "d2", "d3", "d4", "d5", "d6"]);
    assert_eq!(pages, 3);
}

pub async fn deployment_updates_are_partial_and_versioned(store: &dyn Store) {
    let created = store
        .put_deployment(
            new_deployment(SCOPE, "upd", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let running = store
        .update_deployment(
            &created.id,
            1,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Running),
                started_at: Some(at(10)),
                ..DeploymentUpdate::at(at(10))
            },
        )
        .await
        .expect("running");
    assert_eq!(
        (
            running.status,
            running.version,
            running.started_at,
            running.updated_at
        ),
        (DeploymentStatus::Running, 2, Some(at(10)), at(10))
    );
    let reread = stored_deployment(store, &created.id).await;
    assert_eq!(
        reread.request, created.request,
        "the request is never rewritten"
    );
    assert_eq!(DeploymentSummary::from(&reread), running);

    assert_conflict(
        store
            .update_deployment(
                &created.id,
                1,
                DeploymentUpdate {
                    status: Some(DeploymentStatus::Failed),
                    ..DeploymentUpdate::at(at(11))
                },
            )
            .await,
        "stale version",
    );

    let finished = store
        .update_deployment(
            &created.id,
            2,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Succeeded),
                finished_at: Some(at(20)),
                outputs: Some(json!({"endpoint": {"type": "String", "value": "https://x"}})),
                output_resources: Some(JsonText::from(&json!([{"id": format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/a")}]))),
                extensions: Some(json!([{"alias": "k8s", "name": "Kubernetes", "version": "1.0.0", "configId": "3A7F"}])),
                ..DeploymentUpdate::at(at(20))
            },
        )
        .await
        .expect("finish");
    assert_eq!(finished.version, 3);
    assert_eq!(
        finished.started_at,
        Some(at(10)),
        "unset fields keep their value"
    );
    assert_eq!(finished.finished_at, Some(at(20)));
    assert_eq!(finished.error, None);
    let reread = stored_deployment(store, &created.id).await;
    assert_eq!(DeploymentSummary::from(&reread), finished);
    assert_eq!(
        reread.outputs,
        Some(json!({"endpoint": {"type": "String", "value": "https://x"}}))
    );
    assert!(reread.output_resources.is_some() && reread.extensions.is_some());

    let failed = store
        .update_deployment(
            &created.id,
            3,
            DeploymentUpdate {
                error: Some(json!({"code": "DeploymentFailed", "message": "m"})),
                ..DeploymentUpdate::at(at(30))
            },
        )
        .await
        .expect("error");
    assert_eq!(
        failed.error,
        Some(json!({"code": "DeploymentFailed", "message": "m"}))
    );
    let summary = store
        .get_deployment_summary(DeploymentLookup::Id(&created.id))
        .await
        .expect("summary");
    assert_eq!(
        summary,
        Some(failed),
        "a summary carries the status, the error and the times of the latest update"
    );

    assert_not_found(
        store
            .update_deployment(&DeploymentId::generate(), 1, DeploymentUpdate::at(at(1)))
            .await,
        "unknown run",
    );
}

pub async fn deployment_replacement_starts_a_new_run(store: &dyn Store) {
    let first = store
        .put_deployment(
            new_deployment(SCOPE, "again", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let owner = SecretOwner::Deployment(first.id.clone());
    store
        .put_secret(
            &owner,
            "parameters.adminPassword",
            &secret("first-run-secret"),
            at(1),
        )
        .await
        .expect("secret");
    store
        .append_operation(step(&first.id, "op1", "Succeeded", 1), None)
        .await
        .expect("append");

    assert_conflict(
        store
            .put_deployment(
                new_deployment(SCOPE, "AGAIN", None),
                Precondition::MustNotExist,
            )
            .await,
        "exists",
    );
    assert_conflict(
        store
            .put_deployment(
                new_deployment(SCOPE, "again", None),
                Precondition::Version(9),
            )
            .await,
        "stale replace",
    );
    assert_not_found(
        store
            .put_deployment(
                new_deployment(SCOPE, "never", None),
                Precondition::Version(1),
            )
            .await,
        "replace missing",
    );

    let mut second_request = new_deployment(SCOPE, "again", None);
    second_request.created_at = at(100);
    second_request.request = json!({"mode": "Complete"});
    let second = store
        .put_deployment(second_request, Precondition::Version(first.version))
        .await
        .expect("replace");
    assert_ne!(second.id, first.id);
    assert_eq!(second.version, 1);
    assert_eq!(second.request, json!({"mode": "Complete"}));
    assert!(
        store
            .get_deployment_by_id(&first.id)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .latest_operations(&first.id)
            .await
            .expect("ops")
            .is_empty(),
        "old journal deleted"
    );
    assert!(
        store.list_secrets(&owner).await.expect("list").is_empty(),
        "old secrets deleted"
    );
    assert!(
        store
            .latest_operations(&second.id)
            .await
            .expect("ops")
            .is_empty()
    );

    let third = store
        .put_deployment(new_deployment(SCOPE, "again", None), Precondition::Any)
        .await
        .expect("replace any");
    assert_ne!(third.id, second.id);
}

pub async fn deployment_delete_removes_history_only(store: &dyn Store) {
    let parent = store
        .put_deployment(
            new_deployment(SCOPE, "parent", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let mut child = new_deployment(SCOPE, "child", None);
    child.parent = Some(parent.id.clone());
    let child = store
        .put_deployment(child, Precondition::MustNotExist)
        .await
        .expect("child");
    let owner = SecretOwner::Deployment(parent.id.clone());
    let reference = store
        .put_secret(&owner, "p", &secret("s"), at(1))
        .await
        .expect("secret");
    store
        .append_operation(step(&parent.id, "op1", "Succeeded", 1), None)
        .await
        .expect("append");
    let resource = ManagedResource {
        key: ResourceKey::arm(&format!(
            "{SCOPE}/providers/Microsoft.Storage/storageAccounts/op1"
        )),
        resource_id: Some(format!(
            "{SCOPE}/providers/Microsoft.Storage/storageAccounts/op1"
        )),
        resource_type: "Microsoft.Storage/storageAccounts".into(),
        api_version: Some("2023-01-01".into()),
        properties: json!({}),
        applied: None,
        deployment: Some(parent.key.clone()),
        extension: None,
        updated_at: at(1),
    };
    store
        .put_managed_resource(resource.clone(), Precondition::Any)
        .await
        .expect("inventory");

    assert_conflict(
        store
            .delete_deployment(&parent.key, Precondition::Version(5))
            .await,
        "stale delete",
    );
    store
        .delete_deployment(&DeploymentKey::new(SCOPE, "PARENT"), Precondition::Any)
        .await
        .expect("delete");
    assert!(
        store
            .get_deployment(&parent.key)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .latest_operations(&parent.id)
            .await
            .expect("ops")
            .is_empty()
    );
    assert_not_found(
        store.get_secret(&reference).await,
        "secret of a deleted run",
    );
    let orphan = store
        .get_deployment_by_id(&child.id)
        .await
        .expect("get")
        .expect("nested deployment survives");
    assert_eq!(orphan.parent, None);
    assert!(
        store
            .get_managed_resource(&resource.key)
            .await
            .expect("get")
            .is_some(),
        "resources stay"
    );
    assert_not_found(
        store
            .delete_deployment(&parent.key, Precondition::Any)
            .await,
        "second delete",
    );
}

pub async fn deployment_takeovers_count_runs_without_progress(store: &dyn Store) {
    let record = store
        .put_deployment(
            new_deployment(SCOPE, "poison", None),
            Precondition::MustNotExist,
        )
        .await
        .unwrap();
    // Three takeovers with an unchanged journal count up; progress starts the count again.
    assert_eq!(store.record_takeover(&record.id, 0).await.unwrap(), 1);
    assert_eq!(store.record_takeover(&record.id, 0).await.unwrap(), 2);
    assert_eq!(store.record_takeover(&record.id, 0).await.unwrap(), 3);
    assert_eq!(store.record_takeover(&record.id, 4).await.unwrap(), 1);
    assert_eq!(store.record_takeover(&record.id, 4).await.unwrap(), 2);
    // A resumed run that re-applies what it had done (its steps running again) has not progressed.
    assert_eq!(store.record_takeover(&record.id, 2).await.unwrap(), 3);
    assert_eq!(store.record_takeover(&record.id, 4).await.unwrap(), 4);
    assert_eq!(store.record_takeover(&record.id, 5).await.unwrap(), 1);
    // Another deployment has its own count.
    let other = store
        .put_deployment(
            new_deployment(SCOPE, "other", None),
            Precondition::MustNotExist,
        )
        .await
        .unwrap();
    assert_eq!(store.record_takeover(&other.id, 0).await.unwrap(), 1);
    let missing = DeploymentId::from_string("missing".to_string());
    assert!(matches!(
        store.record_takeover(&missing, 0).await,
        Err(StoreError::NotFound { .. })
    ));
}

pub async fn deployment_claims_and_orphans(store: &dyn Store) {
    let mut claimed = new_deployment(SCOPE, "claimed", None);
    claimed.owner = Some(DeploymentOwner {
        owner: "replica-a".into(),
        expires_at: at(1_000),
    });
    let claimed = store
        .put_deployment(claimed, Precondition::MustNotExist)
        .await
        .expect("create claimed");
    assert_eq!(
        claimed.owner.as_ref().map(|o| o.owner.as_str()),
        Some("replica-a")
    );
    let unclaimed = store
        .put_deployment(
            new_deployment(SCOPE, "unclaimed", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let done = store
        .put_deployment(
            new_deployment(SCOPE, "done", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    store
        .update_deployment(
            &done.id,
            1,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Failed),
                ..DeploymentUpdate::at(at(1))
            },
        )
        .await
        .expect("finish");

    let orphans: Vec<_> = store
        .list_orphaned_deployments(at(500), 10)
        .await
        .expect("orphans")
        .into_iter()
        .map(|d| d.key.name)
        .collect();
    assert_eq!(
        orphans,
        ["unclaimed"],
        "live claims and terminal runs are not orphans"
    );

    assert_conflict(
        store
            .claim_deployment(&claimed.id, "replica-b", at(2_000), at(500))
            .await,
        "claim held by another",
    );
    let renewed = store
        .claim_deployment(&claimed.id, "replica-a", at(1_500), at(500))
        .await
        .expect("renew own claim");
    assert_eq!(
        renewed.owner,
        Some(DeploymentOwner {
            owner: "replica-a".into(),
            expires_at: at(1_500)
        })
    );
    assert_eq!(
        renewed.version, claimed.version,
        "claims leave the row version alone"
    );

    let orphans: BTreeSet<_> = store
        .list_orphaned_deployments(at(1_600), 10)
        .await
        .expect("orphans")
        .into_iter()
        .map(|d| d.key.name)
        .collect();
    assert_eq!(
        orphans,
        BTreeSet::from(["claimed".to_owned(), "unclaimed".to_owned()]),
        "expired claims are orphans"
    );
    assert_eq!(
        store
            .list_orphaned_deployments(at(1_600), 1)
            .await
            .expect("limit")
            .len(),
        1
    );

    let taken = store
        .claim_deployment(&claimed.id, "replica-b", at(3_000), at(1_600))
        .await
        .expect("take over expired claim");
    assert_eq!(
        taken.owner.as_ref().map(|o| o.owner.as_str()),
        Some("replica-b")
    );
    assert_conflict(
        store.release_deployment(&claimed.id, "replica-a").await,
        "release of another's claim",
    );
    store
        .release_deployment(&claimed.id, "replica-b")
        .await
        .expect("release");
    store
        .release_deployment(&claimed.id, "replica-b")
        .await
        .expect("release when unclaimed");
    let released = stored_deployment(store, &claimed.id).await;
    assert_eq!(released.owner, None);
    store
        .claim_deployment(&unclaimed.id, "replica-c", at(9_000), at(1))
        .await
        .expect("claim unclaimed");
    assert_not_found(
        store
            .claim_deployment(&DeploymentId::generate(), "x", at(1), at(0))
            .await,
        "claim unknown run",
    );
}

/// Taking over an expired claim from another owner moves the row version on, so the old holder — a replica that
/// stalled past its claim and does not know it lost it — can no longer write through its claim: its updates at the
/// version it knew, its renewals and its release are all `Conflict`, while the new holder's writes go through.
pub async fn deployment_takeover_fences_the_old_holder(store: &dyn Store) {
    let mut new = new_deployment(SCOPE, "fenced", None);
    new.owner = Some(DeploymentOwner {
        owner: "replica-a".into(),
        expires_at: at(1_000),
    });
    let created = store
        .put_deployment(new, Precondition::MustNotExist)
        .await
        .expect("create claimed");
    let running = |millis| DeploymentUpdate {
        status: Some(DeploymentStatus::Running),
        ..DeploymentUpdate::at(at(millis))
    };
    let seen_by_a = store
        .update_deployment(&created.id, created.version, running(10))
        .await
        .expect("the holder updates");
    let renewed = store
        .claim_deployment(&created.id, "replica-a", at(1_000), at(20))
        .await
        .expect("the holder renews");
    assert_eq!(
        renewed.version, seen_by_a.version,
        "a renewal fences no one"
    );
    assert_conflict(
        store
            .claim_deployment(&created.id, "replica-b", at(3_000), at(999))
            .await,
        "a live claim",
    );

    let taken = store
        .claim_deployment(&created.id, "replica-b", at(3_000), at(1_000))
        .await
        .expect("take over at expiry");
    assert!(
        taken.version > seen_by_a.version,
        "a takeover moves the version on: {} after {}",
        taken.version,
        seen_by_a.version
    );
    assert_eq!(
        (taken.status, taken.updated_at),
        (DeploymentStatus::Running, at(10)),
        "a takeover changes nothing else"
    );

    let finished = DeploymentUpdate {
        status: Some(DeploymentStatus::Succeeded),
        finished_at: Some(at(1_100)),
        ..DeploymentUpdate::at(at(1_100))
    };
    assert_conflict(
        store
            .update_deployment(&created.id, seen_by_a.version, finished.clone())
            .await,
        "the old holder's update",
    );
    assert_conflict(
        store
            .claim_deployment(&created.id, "replica-a", at(2_000), at(1_100))
            .await,
        "the old holder's renewal",
    );
    assert_conflict(
        store.release_deployment(&created.id, "replica-a").await,
        "the old holder's release",
    );

    // An update that names another owner's claim to release leaves the holder's claim as it is.
    let progressed = store
        .update_deployment(
            &created.id,
            taken.version,
            DeploymentUpdate {
                release_claim_of: Some("replica-a".into()),
                ..running(1_050)
            },
        )
        .await
        .expect("the new holder updates");
    let stored = stored_deployment(store, &created.id).await;
    assert_eq!(
        (stored.owner.map(|o| o.owner), stored.version),
        (Some("replica-b".to_owned()), progressed.version)
    );
    // The holder's last update drops its claim in the same write.
    let done = store
        .update_deployment(
            &created.id,
            progressed.version,
            DeploymentUpdate {
                release_claim_of: Some("replica-b".into()),
                ..finished
            },
        )
        .await
        .expect("the new holder finishes");
    let stored = stored_deployment(store, &created.id).await;
    assert_eq!(
        (stored.status, stored.owner, stored.version),
        (DeploymentStatus::Succeeded, None, done.version)
    );
    store
        .release_deployment(&created.id, "replica-b")
        .await
        .expect("a release after the last update's is fine");
    // A finished run cannot be claimed: the old holder's late heartbeat would otherwise take the released run and
    // pass the journal's fence again.
    assert_conflict(
        store
            .claim_deployment(&created.id, "replica-a", at(9_000), at(2_000))
            .await,
        "the old holder's renewal of a finished run",
    );
    assert_conflict(
        store
            .claim_deployment(&created.id, "replica-c", at(9_000), at(2_000))
            .await,
        "a claim of a finished run",
    );
}

pub async fn operation_journal_appends_and_reads(store: &dyn Store) {
    let run = store
        .put_deployment(
            new_deployment(SCOPE, "journal", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let other = store
        .put_deployment(
            new_deployment(SCOPE, "other", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let mut sequences = Vec::new();
    for (op, state, millis) in [
        ("b-op", "Accepted", 1),
        ("a-op", "Accepted", 2),
        ("b-op", "Running", 3),
        ("a-op", "Failed", 4),
        ("b-op", "Succeeded", 5),
    ] {
        sequences.push(
            store
                .append_operation(step(&run.id, op, state, millis), None)
                .await
                .expect("append")
                .sequence,
        );
    }
    assert_eq!(sequences, [1, 2, 3, 4, 5]);
    assert_eq!(
        store
            .append_operation(step(&other.id, "b-op", "Accepted", 1), None)
            .await
            .expect("append")
            .sequence,
        1,
        "per-run sequences"
    );

    let mut extension_step = step(&run.id, "k8s-op", "Succeeded", 6);
    extension_step.extension = Some(ExtensionRef {
        alias: Some("k8s".into()),
        name: Some("Kubernetes".into()),
        version: Some("1.0.0".into()),
        config_id: Some("3A7F".into()),
        reference_id: Some("ref-1".into()),
        identifiers: Some(json!({"metadata": {"namespace": "app", "name": "settings"}})),
    });
    extension_step.request_content = Some(json!({"properties": {"data": {"k": "v"}}}));
    extension_step.response_content = Some(json!({"status": "ok"}));
    extension_step.service_request_id = Some("req-1".into());
    let appended = store
        .append_operation(extension_step.clone(), None)
        .await
        .expect("append extension step");
    assert_eq!(appended.step, extension_step);

    let latest = store.latest_operations(&run.id).await.expect("latest");
    let summary: Vec<_> = latest
        .iter()
        .map(|r| {
            (
                r.step.operation_id.as_str(),
                r.step.provisioning_state.as_str(),
                r.sequence,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("b-op", "Succeeded", 5),
            ("a-op", "Failed", 4),
            ("k8s-op", "Succeeded", 6)
        ]
    );
    assert_eq!(
        latest[1].step,
        step(&run.id, "a-op", "Failed", 4),
        "every field round-trips"
    );

    let one = store
        .get_operation(&run.id, "a-op")
        .await
        .expect("get")
        .expect("present");
    assert_eq!(one.sequence, 4);
    assert!(
        store
            .get_operation(&run.id, "nope")
            .await
            .expect("get")
            .is_none()
    );

    let journal = store
        .operation_journal(&run.id, 2, 2)
        .await
        .expect("journal");
    assert_eq!(
        journal.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        [3, 4]
    );
    assert_eq!(
        store
            .operation_journal(&run.id, 0, 100)
            .await
            .expect("journal")
            .len(),
        6
    );

    assert_not_found(
        store
            .append_operation(step(&DeploymentId::generate(), "x", "Accepted", 1), None)
            .await,
        "append to unknown run",
    );
}

pub async fn record_step_is_atomic_with_inventory(store: &dyn Store) {
    let run = store
        .put_deployment(
            new_deployment(SCOPE, "atomic", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let id = format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/atomic");
    let resource = ManagedResource {
        key: ResourceKey::arm(&id),
        resource_id: Some(id.clone()),
        resource_type: "Microsoft.Storage/storageAccounts".into(),
        api_version: Some("2023-01-01".into()),
        properties: json!({"sku": {"name": "Standard_LRS"}}),
        applied: None,
        deployment: Some(run.key.clone()),
        extension: None,
        updated_at: at(3),
    };
    store
        .append_operation(step(&run.id, "atomic", "Running", 1), None)
        .await
        .expect("running");
    let recorded = store
        .record_step(
            step(&run.id, "atomic", "Succeeded", 2),
            InventoryChange::Put(Box::new(resource.clone())),
            None,
        )
        .await
        .expect("record");
    assert_eq!(recorded.sequence, 2);
    let stored = store
        .get_managed_resource(&resource.key)
        .await
        .expect("get")
        .expect("inventoried");
    assert_eq!((stored.resource, stored.version), (resource.clone(), 1));
    let again = store
        .record_step(
            step(&run.id, "atomic", "Succeeded", 3),
            InventoryChange::Put(Box::new(resource.clone())),
            None,
        )
        .await
        .expect("record again");
    assert_eq!(again.sequence, 3);
    assert_eq!(
        store
            .get_managed_resource(&resource.key)
            .await
            .expect("get")
            .expect("present")
            .version,
        2
    );

    let mut orphan = resource.clone();
    orphan.key = ResourceKey::arm(&format!("{id}-orphan"));
    assert_not_found(
        store
            .record_step(
                step(&DeploymentId::generate(), "x", "Succeeded", 4),
                InventoryChange::Put(Box::new(orphan.clone())),
                None,
            )
            .await,
        "record for an unknown run",
    );
    assert!(
        store
            .get_managed_resource(&orphan.key)
            .await
            .expect("get")
            .is_none(),
        "rolled back with the step"
    );

    let mut delete = step(&run.id, "atomic-delete", "Succeeded", 5);
    delete.provisioning_operation = "Delete".into();
    store
        .record_step(
            delete.clone(),
            InventoryChange::Delete(resource.key.clone()),
            None,
        )
        .await
        .expect("delete");
    assert!(
        store
            .get_managed_resource(&resource.key)
            .await
            .expect("get")
            .is_none()
    );
    store
        .record_step(delete, InventoryChange::Delete(resource.key.clone()), None)
        .await
        .expect("delete when gone");
    assert_eq!(
        store
            .operation_journal(&run.id, 0, 100)
            .await
            .expect("journal")
            .len(),
        5
    );
}

/// A create's `Running` step inventories its target only when nobody did yet: a new resource gets a row in the
/// step's transaction, an inventoried one keeps its row as it was.
pub async fn record_step_put_if_absent_keeps_an_existing_row(store: &dyn Store) {
    let run = store
        .put_deployment(
            new_deployment(SCOPE, "pending", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let extension = ExtensionRef {
        name: Some("Kubernetes".into()),
        config_id: Some("c1".into()),
        identifiers: Some(json!({"name": "web"})),
        ..ExtensionRef::default()
    };
    let placeholder = ManagedResource {
        key: ResourceKey::extension(
            "Kubernetes",
            Some("c1"),
            "apps/Deployment",
            &json!({"name": "web"}),
        ),
        resource_id: None,
        resource_type: "apps/Deployment".into(),
        api_version: Some("apps/v1".into()),
        properties: json!({}),
        applied: None,
        deployment: Some(run.key.clone()),
        extension: Some(extension.clone()),
        updated_at: at(1),
    };
    store
        .record_step(
            step(&run.id, "web", "Running", 1),
            InventoryChange::PutIfAbsent(Box::new(placeholder.clone())),
            None,
        )
        .await
        .expect("running");
    let stored = store
        .get_managed_resource(&placeholder.key)
        .await
        .expect("get")
        .expect("inventoried before the call");
    assert_eq!((stored.resource, stored.version), (placeholder.clone(), 1));

    let created = ManagedResource {
        properties: json!({"replicas": 2}),
        updated_at: at(2),
        ..placeholder.clone()
    };
    store
        .record_step(
            step(&run.id, "web", "Succeeded", 2),
            InventoryChange::Put(Box::new(created.clone())),
            None,
        )
        .await
        .expect("succeeded");
    // A later run's create of the same resource leaves what the extension last returned.
    store
        .record_step(
            step(&run.id, "web", "Running", 3),
            InventoryChange::PutIfAbsent(Box::new(placeholder.clone())),
            None,
        )
        .await
        .expect("running again");
    let stored = store
        .get_managed_resource(&placeholder.key)
        .await
        .expect("get")
        .expect("still inventoried");
    assert_eq!((stored.resource, stored.version), (created, 2));

    let mut orphan = placeholder.clone();
    orphan.key = ResourceKey::extension(
        "Kubernetes",
        Some("c1"),
        "apps/Deployment",
        &json!({"name": "x"}),
    );
    assert_not_found(
        store
            .record_step(
                step(&DeploymentId::generate(), "x", "Running", 1),
                InventoryChange::PutIfAbsent(Box::new(orphan.clone())),
                None,
            )
            .await,
        "record for an unknown run",
    );
    assert!(
        store
            .get_managed_resource(&orphan.key)
            .await
            .expect("get")
            .is_none(),
        "rolled back with the step"
    );
}

pub async fn inventory_round_trip_and_filters(store: &dyn Store) {
    let owner = DeploymentKey::new(SCOPE, "main");
    let arm_id = format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/Data");
    let arm = ManagedResource {
        key: ResourceKey::arm(&arm_id),
        resource_id: Some(arm_id.clone()),
        resource_type: "Microsoft.Storage/storageAccounts".into(),
        api_version: Some("2023-01-01".into()),
        properties: json!({"location": "westus", "sku": {"name": "Standard_LRS"}}),
        applied: Some(json!({"sku": {"name": "Standard_LRS"}})),
        deployment: Some(owner.clone()),
        extension: None,
        updated_at: at(1),
    };
    let identifiers = json!({"metadata": {"namespace": "app", "name": "settings"}});
    let extension = ManagedResource {
        key: ResourceKey::extension("Kubernetes", Some("3A7F"), "core/ConfigMap", &identifiers),
        resource_id: None,
        resource_type: "core/ConfigMap".into(),
        api_version: Some("v1".into()),
        properties: json!({"data": {"k": "v"}, "metadata": {"uid": "1"}}),
        applied: Some(json!({"data": {"k": "v"}})),
        deployment: Some(DeploymentKey::new(SCOPE, "other")),
        extension: Some(ExtensionRef {
            alias: Some("k8s".into()),
            name: Some("Kubernetes".into()),
            version: Some("1.0.0".into()),
            config_id: Some("3A7F".into()),
            reference_id: None,
            identifiers: Some(identifiers.clone()),
        }),
        updated_at: at(2),
    };
    let created = store
        .put_managed_resource(arm.clone(), Precondition::MustNotExist)
        .await
        .expect("arm");
    assert_eq!(
        (
            created.resource.clone(),
            created.version,
            created.created_at
        ),
        (arm.clone(), 1, at(1))
    );
    store
        .put_managed_resource(extension.clone(), Precondition::MustNotExist)
        .await
        .expect("extension");

    let by_other_case = store
        .get_managed_resource(&ResourceKey::arm(&arm_id.to_uppercase()))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(by_other_case.resource, arm);
    let ext = store
        .get_managed_resource(&extension.key)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(ext.resource, extension);

    let mut updated = arm.clone();
    updated.properties = json!({"location": "westus", "sku": {"name": "Premium_LRS"}});
    // A write outside a deployment records no applied properties: the old ones must not survive it.
    updated.applied = None;
    updated.updated_at = at(5);
    assert_conflict(
        store
            .put_managed_resource(updated.clone(), Precondition::MustNotExist)
            .await,
        "exists",
    );
    assert_conflict(
        store
            .put_managed_resource(updated.clone(), Precondition::Version(3))
            .await,
        "stale",
    );
    let record = store
        .put_managed_resource(updated.clone(), Precondition::Version(1))
        .await
        .expect("update");
    assert_eq!(
        (
            record.version,
            record.created_at,
            record.resource.updated_at
        ),
        (2, at(1), at(5))
    );
    assert_eq!(
        store
            .get_managed_resource(&arm.key)
            .await
            .expect("get")
            .expect("present")
            .resource,
        updated
    );

    let mine = store
        .list_managed_resources(ManagedResourceFilter {
            deployment: Some(DeploymentKey::new(SCOPE.to_uppercase(), "MAIN")),
            ..Default::default()
        })
        .await
        .expect("by deployment");
    assert_eq!(
        mine.items
            .iter()
            .map(|r| &r.resource.key)
            .collect::<Vec<_>>(),
        [&arm.key]
    );
    let maps = store
        .list_managed_resources(ManagedResourceFilter {
            resource_type: Some("CORE/configmap".into()),
            ..Default::default()
        })
        .await
        .expect("by type");
    assert_eq!(maps.items.len(), 1);
    let in_scope = store
        .list_managed_resources(ManagedResourceFilter {
            scope: Some(SCOPE.to_uppercase()),
            ..Default::default()
        })
        .await
        .expect("by scope");
    assert_eq!(in_scope.items.len(), 1);
    let all = store
        .list_managed_resources(ManagedResourceFilter::default())
        .await
        .expect("all");
    assert_eq!(all.items.len(), 2);
    let first_page = store
        .list_managed_resources(ManagedResourceFilter {
            page: PageRequest::first(1),
            ..Default::default()
        })
        .await
        .expect("page");
    assert_eq!(first_page.items.len(), 1);
    let second_page = store
        .list_managed_resources(ManagedResourceFilter {
            page: PageRequest {
                limit: Some(1),
                continuation: first_page.continuation.clone(),
            },
            ..Default::default()
        })
        .await
        .expect("page 2");
    assert_eq!(second_page.items.len(), 1);
    assert_ne!(
        first_page.items[0].resource.key,
        second_page.items[0].resource.key
    );
    assert!(first_page.continuation.is_some());

    store
        .delete_managed_resource(&extension.key, Precondition::Version(1))
        .await
        .expect("delete");
    assert!(
        store
            .get_managed_resource(&extension.key)
            .await
            .expect("get")
            .is_none()
    );
    assert_not_found(
        store
            .delete_managed_resource(&extension.key, Precondition::Any)
            .await,
        "second delete",
    );
}

fn vault(name: &str) -> Vault {
    Vault {
        id: format!("{SCOPE}/providers/Microsoft.KeyVault/vaults/{name}"),
        name: name.into(),
        location: "westus".into(),
        tags: Tags::new(),
        properties: json!({"tenantId": "t", "sku": {"family": "A", "name": "standard"}}),
    }
}

fn secret_version(vault_id: &str, name: &str, value: &str, millis: i64) -> NewSecretVersion {
    NewSecretVersion {
        vault_id: vault_id.into(),
        name: name.into(),
        value: secret(value),
        content_type: Some("text/plain".into()),
        enabled: true,
        not_before: None,
        expires: Some(at(1_000_000)),
        tags: Tags::from([("purpose".to_owned(), "test".to_owned())]),
        created_at: at(millis),
    }
}

pub async fn key_vault_vaults(store: &dyn Store) {
    let kv = vault("Kv1");
    let created = store
        .put_vault(kv.clone(), Precondition::MustNotExist, at(1))
        .await
        .expect("create");
    assert_eq!((created.vault.clone(), created.version), (kv.clone(), 1));
    assert_eq!(
        store
            .get_vault(&kv.id.to_lowercase())
            .await
            .expect("get")
            .expect("present"),
        created
    );
    assert_conflict(
        store
            .put_vault(kv.clone(), Precondition::MustNotExist, at(2))
            .await,
        "exists",
    );
    let mut changed = kv.clone();
    changed.properties = json!({"enableSoftDelete": false});
    let updated = store
        .put_vault(changed, Precondition::Version(1), at(3))
        .await
        .expect("update");
    assert_eq!(
        (updated.version, updated.created_at, updated.updated_at),
        (2, at(1), at(3))
    );
    store
        .put_vault(vault("kv2"), Precondition::Any, at(1))
        .await
        .expect("second");
    let mut elsewhere = vault("kv3");
    elsewhere.id =
        "/subscriptions/other/resourceGroups/x/providers/Microsoft.KeyVault/vaults/kv3".into();
    store
        .put_vault(elsewhere, Precondition::Any, at(1))
        .await
        .expect("third");
    let listed = store
        .list_vaults(SCOPE, PageRequest::default())
        .await
        .expect("list");
    assert_eq!(
        listed
            .items
            .iter()
            .map(|v| v.vault.name.as_str())
            .collect::<Vec<_>>(),
        ["Kv1", "kv2"]
    );

    store
        .set_vault_secret(secret_version(&kv.id, "s", "v", 1))
        .await
        .expect("secret");
    store.delete_vault(&kv.id).await.expect("delete");
    assert!(store.get_vault(&kv.id).await.expect("get").is_none());
    assert!(
        store
            .get_vault_secret(&kv.id, "s", None)
            .await
            .expect("get")
            .is_none(),
        "secrets go with the vault"
    );
    assert_not_found(store.delete_vault(&kv.id).await, "second delete");
}

pub async fn key_vault_secret_versions(store: &dyn Store) {
    let kv = vault("kv");
    store
        .put_vault(kv.clone(), Precondition::MustNotExist, at(1))
        .await
        .expect("vault");
    let v1 = store
        .set_vault_secret(secret_version(&kv.id, "DbPassword", "first value", 10))
        .await
        .expect("v1");
    let v2 = store
        .set_vault_secret(secret_version(&kv.id, "dbpassword", "second value", 20))
        .await
        .expect("v2");
    store
        .set_vault_secret(secret_version(&kv.id, "api-key", "key value", 15))
        .await
        .expect("other secret");
    assert_eq!(v1.version.len(), 32);
    assert!(
        v1.version
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_ne!(v1.version, v2.version);
    assert_eq!(v1.name, "DbPassword");
    assert_eq!(
        (
            v1.content_type.as_deref(),
            v1.enabled,
            v1.expires,
            v1.created_at
        ),
        (Some("text/plain"), true, Some(at(1_000_000)), at(10))
    );
    assert_eq!(v1.tags.get("purpose").map(String::as_str), Some("test"));

    let latest = store
        .get_vault_secret(&kv.id, "DBPASSWORD", None)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(latest.value.expose_secret(), "second value");
    assert_eq!(latest.info, v2);
    let first = store
        .get_vault_secret(&kv.id, "dbpassword", Some(&v1.version))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(first.value.expose_secret(), "first value");
    assert_eq!(first.info, v1);
    assert!(
        store
            .get_vault_secret(&kv.id, "dbpassword", Some(&"f".repeat(32)))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get_vault_secret(&kv.id, "missing", None)
            .await
            .expect("get")
            .is_none()
    );

    let names: Vec<_> = store
        .list_vault_secrets(&kv.id)
        .await
        .expect("list")
        .into_iter()
        .map(|i| (i.name, i.version))
        .collect();
    assert_eq!(
        names,
        [
            ("api-key".to_owned(), names[0].1.clone()),
            ("dbpassword".to_owned(), v2.version.clone())
        ]
    );
    let versions: Vec<_> = store
        .list_vault_secret_versions(&kv.id, "DbPassword")
        .await
        .expect("versions")
        .into_iter()
        .map(|i| i.version)
        .collect();
    assert_eq!(versions, [v1.version.clone(), v2.version.clone()]);

    let disabled = store
        .set_vault_secret_enabled(&kv.id, "dbpassword", &v1.version, false, at(30))
        .await
        .expect("disable");
    assert!(!disabled.enabled);
    assert_eq!(disabled.updated_at, at(30));
    let reread = store
        .get_vault_secret(&kv.id, "dbpassword", Some(&v1.version))
        .await
        .expect("get")
        .expect("present");
    assert!(!reread.info.enabled);
    assert_eq!(reread.value.expose_secret(), "first value");
    assert_not_found(
        store
            .set_vault_secret_enabled(&kv.id, "dbpassword", &"0".repeat(32), true, at(31))
            .await,
        "unknown version",
    );

    store
        .delete_vault_secret(&kv.id, "DBPASSWORD")
        .await
        .expect("delete");
    assert!(
        store
            .get_vault_secret(&kv.id, "dbpassword", None)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .list_vault_secret_versions(&kv.id, "dbpassword")
            .await
            .expect("versions")
            .is_empty()
    );
    assert_not_found(
        store.delete_vault_secret(&kv.id, "dbpassword").await,
        "second delete",
    );
    assert_not_found(
        store
            .set_vault_secret(secret_version(&vault("absent").id, "s", "v", 1))
            .await,
        "missing vault",
    );
}

pub async fn leases_exclusive_with_takeover(store: &dyn Store) {
    let lease = store
        .acquire_lease(
            "stack:/subscriptions/s/stacks/a",
            "replica-a",
            at(0),
            at(100),
        )
        .await
        .expect("acquire");
    assert_eq!(
        (
            lease.owner.as_str(),
            lease.generation,
            lease.acquired_at,
            lease.heartbeat_at,
            lease.expires_at
        ),
        ("replica-a", 1, at(0), at(0), at(100))
    );
    assert_eq!(
        store
            .get_lease("stack:/subscriptions/s/stacks/a")
            .await
            .expect("get"),
        Some(lease.clone())
    );
    assert!(store.get_lease("other").await.expect("get").is_none());

    assert_conflict(
        store
            .acquire_lease(
                "stack:/subscriptions/s/stacks/a",
                "replica-b",
                at(50),
                at(150),
            )
            .await,
        "held lease",
    );
    let renewed = store
        .renew_lease(
            "stack:/subscriptions/s/stacks/a",
            "replica-a",
            at(60),
            at(160),
        )
        .await
        .expect("heartbeat");
    assert_eq!(
        (
            renewed.generation,
            renewed.acquired_at,
            renewed.heartbeat_at,
            renewed.expires_at
        ),
        (1, at(0), at(60), at(160))
    );
    let reacquired = store
        .acquire_lease(
            "stack:/subscriptions/s/stacks/a",
            "replica-a",
            at(70),
            at(170),
        )
        .await
        .expect("re-acquire own");
    assert_eq!(reacquired.generation, 1, "same owner keeps the generation");
    assert_conflict(
        store
            .renew_lease(
                "stack:/subscriptions/s/stacks/a",
                "replica-b",
                at(80),
                at(180),
            )
            .await,
        "renew another's lease",
    );

    let taken = store
        .acquire_lease(
            "stack:/subscriptions/s/stacks/a",
            "replica-b",
            at(200),
            at(300),
        )
        .await
        .expect("take over expired lease");
    assert_eq!(
        (taken.owner.as_str(), taken.generation, taken.acquired_at),
        ("replica-b", 2, at(200))
    );
    assert_conflict(
        store
            .renew_lease(
                "stack:/subscriptions/s/stacks/a",
                "replica-a",
                at(210),
                at(310),
            )
            .await,
        "old owner lost it",
    );
    assert_conflict(
        store
            .release_lease("stack:/subscriptions/s/stacks/a", "replica-a")
            .await,
        "release another's lease",
    );
    store
        .release_lease("stack:/subscriptions/s/stacks/a", "replica-b")
        .await
        .expect("release");
    store
        .release_lease("stack:/subscriptions/s/stacks/a", "replica-b")
        .await
        .expect("release when free");
    assert!(
        store
            .get_lease("stack:/subscriptions/s/stacks/a")
            .await
            .expect("get")
            .is_none()
    );
    assert_not_found(
        store
            .renew_lease(
                "stack:/subscriptions/s/stacks/a",
                "replica-b",
                at(220),
                at(320),
            )
            .await,
        "renew a free lease",
    );
    let again = store
        .acquire_lease(
            "stack:/subscriptions/s/stacks/a",
            "replica-a",
            at(230),
            at(330),
        )
        .await
        .expect("acquire after release");
    assert!(
        again.generation > taken.generation,
        "generations never repeat: {} after {}",
        again.generation,
        taken.generation
    );
}

pub async fn secrets_round_trip(store: &dyn Store) {
    let run = store
        .put_deployment(
            new_deployment(SCOPE, "with-secrets", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let owner = SecretOwner::Deployment(run.id.clone());
    let stack = SecretOwner::Other {
        kind: "stack".into(),
        id: "/subscriptions/s/stacks/a".into(),
    };
    let password = store
        .put_secret(&owner, "parameters.adminPassword", &secret("p@ss"), at(1))
        .await
        .expect("put");
    let token = store
        .put_secret(
            &owner,
            "extensionConfigs.k8s.kubeConfig",
            &secret("kube-token"),
            at(1),
        )
        .await
        .expect("put");
    let credential = store
        .put_secret(&stack, "k8s.kubeConfig", &secret("stack-token"), at(1))
        .await
        .expect("put");
    assert_ne!(password, token);
    assert_eq!(
        store
            .get_secret(&password)
            .await
            .expect("get")
            .expose_secret(),
        "p@ss"
    );
    assert_eq!(
        store.get_secret(&token).await.expect("get").expose_secret(),
        "kube-token"
    );
    assert_eq!(
        store
            .get_secret(&credential)
            .await
            .expect("get")
            .expose_secret(),
        "stack-token"
    );

    let replaced = store
        .put_secret(&owner, "parameters.adminPassword", &secret("n3w"), at(2))
        .await
        .expect("replace");
    assert_eq!(replaced, password, "same name keeps its reference");
    assert_eq!(
        store
            .get_secret(&password)
            .await
            .expect("get")
            .expose_secret(),
        "n3w"
    );

    let listed = store.list_secrets(&owner).await.expect("list");
    assert_eq!(
        listed,
        [
            ("extensionConfigs.k8s.kubeConfig".to_owned(), token.clone()),
            ("parameters.adminPassword".to_owned(), password.clone())
        ]
    );
    assert_eq!(store.delete_secrets(&owner).await.expect("delete"), 2);
    assert_not_found(store.get_secret(&password).await, "deleted secret");
    assert_eq!(store.delete_secrets(&owner).await.expect("delete again"), 0);
    assert_eq!(
        store
            .get_secret(&credential)
            .await
            .expect("other owner untouched")
            .expose_secret(),
        "stack-token"
    );
    assert_not_found(
        store.get_secret(&SecretRef::generate()).await,
        "unknown reference",
    );
}

pub async fn concurrent_creates_conflict(store: &dyn Store) {
    let (a, b) = tokio::join!(
        store.put_deployment(
            new_deployment(SCOPE, "race", None),
            Precondition::MustNotExist
        ),
        store.put_deployment(
            new_deployment(&SCOPE.to_uppercase(), "RACE", None),
            Precondition::MustNotExist
        ),
    );
    let outcomes = [a.is_ok(), b.is_ok()];
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "exactly one create wins: {a:?} / {b:?}"
    );
    let loser = if a.is_ok() { b } else { a };
    assert_conflict(loser, "losing create");
    let (a, b) = tokio::join!(
        store.put_resource_group(resource_group("race"), Precondition::MustNotExist, at(1)),
        store.put_resource_group(resource_group("RACE"), Precondition::MustNotExist, at(1)),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "exactly one group create wins"
    );
}

pub async fn concurrent_updates_conflict(store: &dyn Store) {
    let run = store
        .put_deployment(
            new_deployment(SCOPE, "contended", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let (a, b) = tokio::join!(
        store.update_deployment(
            &run.id,
            run.version,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Running),
                ..DeploymentUpdate::at(at(1))
            }
        ),
        store.update_deployment(
            &run.id,
            run.version,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Canceled),
                ..DeploymentUpdate::at(at(1))
            }
        ),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "exactly one update wins: {a:?} / {b:?}"
    );
    let winner = match (&a, &b) {
        (Ok(record), _) | (_, Ok(record)) => record.clone(),
        _ => unreachable!("one succeeded"),
    };
    let loser = if a.is_ok() { b } else { a };
    assert_conflict(loser, "losing update");
    let stored = stored_deployment(store, &run.id).await;
    assert_eq!((stored.status, stored.version), (winner.status, 2));
}

pub async fn concurrent_lease_acquires_conflict(store: &dyn Store) {
    let (a, b) = tokio::join!(
        store.acquire_lease("singleton", "replica-a", at(0), at(100)),
        store.acquire_lease("singleton", "replica-b", at(0), at(100)),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "exactly one owner: {a:?} / {b:?}"
    );
}

/// What [`write_canary_everywhere`] stored, to read back or to look for.
#[derive(Debug)]
pub struct CanaryRefs {
    pub deployment: DeploymentId,
    pub secure_parameter: SecretRef,
    pub config_secret: SecretRef,
    pub vault_id: String,
    pub vault_secret_name: String,
}

/// Writes `canary` through every path a secret can take: a secure parameter of a deployment (its request holds
/// only the reference), a secret extension-config value, a Key Vault secret, and the request of a stack what-if
/// result. Backends' own tests then scan
/// their files for the canary.
pub async fn write_canary_everywhere(store: &dyn Store, canary: &str) -> CanaryRefs {
    // The engine's order: choose the run ID, store the secrets under it, then the request holding references.
    let id = DeploymentId::generate();
    let owner = SecretOwner::Deployment(id.clone());
    let secure_parameter = store
        .put_secret(&owner, "parameters.adminPassword", &secret(canary), at(1))
        .await
        .expect("secure parameter");
    let config_secret = store
        .put_secret(
            &owner,
            "extensionConfigs.k8s.kubeConfig",
            &secret(canary),
            at(1),
        )
        .await
        .expect("config secret");
    let mut request = new_deployment(SCOPE, "canary", Some(&secure_parameter));
    request.id = id;
    request.request["extensionConfigs"] = json!({"k8s": {"kubeConfig": {"value": config_secret.to_marker()}, "namespace": {"value": "app"}}});
    let run = store
        .put_deployment(request, Precondition::MustNotExist)
        .await
        .expect("create with references");
    let mut step = step(&run.id, "kv-secret", "Succeeded", 4);
    step.target_resource = Some(
        json!({"resourceType": "Microsoft.KeyVault/vaults/secrets", "resourceName": "kv/canary"}),
    );
    store.append_operation(step, None).await.expect("journal");

    let kv = vault("canary-kv");
    store
        .put_vault(kv.clone(), Precondition::Any, at(1))
        .await
        .expect("vault");
    store
        .set_vault_secret(secret_version(&kv.id, "canary", canary, 5))
        .await
        .expect("vault secret");
    store
        .set_vault_secret(secret_version(&kv.id, "canary", canary, 6))
        .await
        .expect("vault secret v2");
    store
        .put_stack_what_if(
            stack_what_if(
                SCOPE,
                CANARY_WHAT_IF,
                &json!({"properties": {"parameters": {"adminPassword": {"value": canary}}}})
                    .to_string(),
                1,
                Timestamp::from_unix_millis(i64::MAX),
            ),
            at(1),
        )
        .await
        .expect("stack what-if with a secure parameter in its request");
    store
        .put_host_operation(
            host_operation(
                CANARY_HOST_OPERATION,
                &json!({"config": {"token": canary}}).to_string(),
                Timestamp::from_unix_millis(i64::MAX),
            ),
            at(1),
        )
        .await
        .expect("host operation with a secret config in its state");
    CanaryRefs {
        deployment: run.id,
        secure_parameter,
        config_secret,
        vault_id: kv.id,
        vault_secret_name: "canary".into(),
    }
}

/// Reads every canary copy back through the store.
pub async fn read_canary_everywhere(store: &dyn Store, refs: &CanaryRefs, canary: &str) {
    assert_eq!(
        store
            .get_secret(&refs.secure_parameter)
            .await
            .expect("secure parameter")
            .expose_secret(),
        canary
    );
    assert_eq!(
        store
            .get_secret(&refs.config_secret)
            .await
            .expect("config secret")
            .expose_secret(),
        canary
    );
    let stored = store
        .get_vault_secret(&refs.vault_id, &refs.vault_secret_name, None)
        .await
        .expect("vault")
        .expect("present");
    assert_eq!(stored.value.expose_secret(), canary);
    assert!(
        !format!("{stored:?}").contains(canary),
        "Debug output leaks the vault secret"
    );
    let run = stored_deployment(store, &refs.deployment).await;
    assert!(
        !run.request.to_string().contains(canary),
        "the request holds references only"
    );
    let request = store
        .get_stack_what_if_request(SCOPE, CANARY_WHAT_IF, at(2))
        .await
        .expect("what-if request")
        .expect("present");
    assert!(request.expose_secret().contains(canary));
    let what_if = store
        .get_stack_what_if(SCOPE, CANARY_WHAT_IF, at(2))
        .await
        .expect("what-if")
        .expect("present");
    assert!(
        !format!("{what_if:?}").contains(canary),
        "the what-if result holds no secret"
    );
    let operation = store
        .get_host_operation(CANARY_HOST_OPERATION, at(2))
        .await
        .expect("host operation")
        .expect("present");
    assert!(operation.state.expose_secret().contains(canary));
    assert!(
        !format!("{operation:?}").contains(canary),
        "Debug output leaks the host operation state"
    );
}

pub async fn canary_secret_round_trips_through_every_path(store: &dyn Store) {
    let canary = "canary-7c1f0e29-secret";
    let refs = write_canary_everywhere(store, canary).await;
    read_canary_everywhere(store, &refs, canary).await;
}

fn stack(scope: &str, name: &str, marker: u32) -> NewStack {
    NewStack {
        scope: scope.to_owned(),
        name: name.to_owned(),
        stack: JsonText::from(
            &json!({"name": name, "properties": {"provisioningState": "succeeded", "marker": marker}}),
        ),
        managed_set: JsonText::from(
            &json!({"formatVersion": 1, "resources": [{"id": format!("{scope}/providers/A.B/c/{marker}")}]}),
        ),
    }
}

/// Stacks: create, case-insensitive get, versioned replace and delete, listing by scope and across scopes in
/// pages.
/// A stack operation's record write removes the inventory rows of what it records as deleted and marks those it
/// records as detached, in its own transaction: a refused write changes neither. A deployment's finished create of a
/// detached resource clears the mark.
pub async fn stack_writes_carry_their_inventory_changes(store: &dyn Store) {
    let rg = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";
    let row = |name: &str| {
        let identifiers = json!({"name": name});
        ManagedResource {
            key: ResourceKey::extension("Local", Some("root"), "File", &identifiers),
            resource_id: None,
            resource_type: "File".into(),
            api_version: None,
            properties: json!({"path": name}),
            applied: Some(json!({"path": name})),
            deployment: Some(DeploymentKey::new(rg, "stack")),
            extension: Some(ExtensionRef {
                name: Some("Local".into()),
                config_id: Some("root".into()),
                identifiers: Some(identifiers),
                ..ExtensionRef::default()
            }),
            updated_at: at(1),
        }
    };
    let (a, b, c) = (row("a"), row("b"), row("c"));
    for resource in [&a, &b, &c] {
        store
            .put_managed_resource(resource.clone(), Precondition::Any)
            .await
            .expect("inventory");
    }
    let detached = |key: &ResourceKey| {
        let key = key.clone();
        async move {
            store
                .get_managed_resource(&key)
                .await
                .expect("get")
                .map(|r| r.detached)
        }
    };
    assert_eq!(detached(&b.key).await, Some(false));

    let written = store
        .put_stack_with_inventory(
            stack(rg, "inv", 1),
            Precondition::MustNotExist,
            at(2),
            vec![
                InventoryChange::Delete(a.key.clone()),
                InventoryChange::Detach(b.key.clone()),
                InventoryChange::Detach(ResourceKey::arm(&format!("{rg}/providers/X.Y/z/never"))),
            ],
        )
        .await
        .expect("record the deletes and detaches");
    assert_eq!(written.version, 1);
    assert_eq!(detached(&a.key).await, None, "deleted with the write");
    assert_eq!(detached(&b.key).await, Some(true));
    assert_eq!(detached(&c.key).await, Some(false));

    assert_conflict(
        store
            .put_stack_with_inventory(
                stack(rg, "inv", 2),
                Precondition::Version(7),
                at(3),
                vec![InventoryChange::Delete(c.key.clone())],
            )
            .await,
        "a superseded write",
    );
    assert_eq!(
        detached(&c.key).await,
        Some(false),
        "rolled back with the write"
    );

    let run = store
        .put_deployment(
            new_deployment(rg, "again", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("a deployment");
    store
        .record_step(
            step(&run.id, "b", "Succeeded", 1),
            InventoryChange::Put(Box::new(b.clone())),
            None,
        )
        .await
        .expect("deployed again");
    assert_eq!(detached(&b.key).await, Some(false), "managed again");

    assert_conflict(
        store
            .delete_stack_with_inventory(
                rg,
                "inv",
                Precondition::Version(7),
                vec![InventoryChange::Delete(c.key.clone())],
            )
            .await,
        "a superseded delete",
    );
    assert_eq!(detached(&c.key).await, Some(false));
    store
        .delete_stack_with_inventory(
            rg,
            "INV",
            Precondition::Version(1),
            vec![InventoryChange::Delete(c.key.clone())],
        )
        .await
        .expect("the stack goes with the rows of what it deleted");
    assert!(store.get_stack(rg, "inv").await.expect("get").is_none());
    assert_eq!(detached(&c.key).await, None);
    assert_eq!(detached(&b.key).await, Some(false));
}

pub async fn stacks_round_trip_versions_and_pages(store: &dyn Store) {
    let rg = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";
    let sub = "/subscriptions/00000000-0000-0000-0000-000000000001";
    let created = store
        .put_stack(stack(rg, "Alpha", 1), Precondition::MustNotExist, at(1))
        .await
        .expect("create");
    assert_eq!(created.version, 1);
    assert_eq!(created.created_at, at(1));
    assert_conflict(
        store
            .put_stack(stack(rg, "ALPHA", 2), Precondition::MustNotExist, at(2))
            .await,
        "create twice",
    );
    assert_not_found(
        store
            .put_stack(stack(rg, "absent", 2), Precondition::Version(1), at(2))
            .await,
        "update of a missing stack",
    );
    let updated = store
        .put_stack(stack(rg, "alpha", 2), Precondition::Version(1), at(3))
        .await
        .expect("update at version");
    assert_eq!(updated.version, 2);
    assert_eq!(updated.created_at, at(1));
    assert_eq!(updated.updated_at, at(3));
    assert_conflict(
        store
            .put_stack(stack(rg, "alpha", 3), Precondition::Version(1), at(4))
            .await,
        "stale update",
    );
    let read = store
        .get_stack(&rg.to_uppercase(), "ALPHA")
        .await
        .expect("get")
        .expect("present");
    assert_eq!(read, updated);
    let (read_stack, read_set): (serde_json::Value, serde_json::Value) = (
        read.stack.parse().expect("the stack is JSON"),
        read.managed_set.parse().expect("the managed set is JSON"),
    );
    assert_eq!(read_stack["properties"]["marker"], json!(2));
    assert_eq!(read_set["formatVersion"], json!(1));
    assert!(store.get_stack(rg, "beta").await.expect("get").is_none());
    let resource = store
        .get_stack_resource(&rg.to_uppercase(), "ALPHA")
        .await
        .expect("get the resource")
        .expect("present");
    assert_eq!(
        resource,
        updated.stack.as_str(),
        "the resource reads back as written"
    );
    assert!(
        store
            .get_stack_resource(rg, "beta")
            .await
            .expect("get the resource")
            .is_none()
    );

    for (index, name) in ["beta", "gamma", "delta"].into_iter().enumerate() {
        let marker = u32::try_from(index).unwrap_or(0) + 10;
        store
            .put_stack(stack(rg, name, marker), Precondition::Any, at(5))
            .await
            .expect("more");
    }
    store
        .put_stack(stack(sub, "at-sub", 20), Precondition::Any, at(5))
        .await
        .expect("sub stack");

    let mut names = Vec::new();
    let mut page = PageRequest::first(2);
    loop {
        let listed = store
            .list_stacks(Some(rg), page.clone())
            .await
            .expect("list");
        assert!(listed.items.len() <= 2);
        names.extend(listed.items.iter().map(|s| s.name.clone()));
        match listed.continuation {
            Some(token) => page.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(names, ["alpha", "beta", "delta", "gamma"]);
    let everywhere = store
        .list_stacks(None, PageRequest::default())
        .await
        .expect("list all");
    assert_eq!(everywhere.items.len(), 5);
    let at_sub = store
        .list_stacks(Some(sub), PageRequest::default())
        .await
        .expect("list sub");
    assert_eq!(
        at_sub
            .items
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["at-sub"]
    );

    assert_conflict(
        store
            .delete_stack(rg, "alpha", Precondition::Version(1))
            .await,
        "stale delete",
    );
    store
        .delete_stack(rg, "Alpha", Precondition::Version(2))
        .await
        .expect("delete");
    assert!(store.get_stack(rg, "alpha").await.expect("get").is_none());
    assert_not_found(
        store.delete_stack(rg, "alpha", Precondition::Any).await,
        "delete twice",
    );
}

/// The stack what-if result [`write_canary_everywhere`] writes, under [`SCOPE`].
const CANARY_WHAT_IF: &str = "canary-what-if";

fn stack_what_if(
    scope: &str,
    name: &str,
    request: &str,
    marker: u32,
    expires_at: Timestamp,
) -> NewStackWhatIf {
    NewStackWhatIf {
        scope: scope.to_owned(),
        name: name.to_owned(),
        result: json!({"name": name, "properties": {"provisioningState": "succeeded", "marker": marker}}),
        request: secret(request),
        expires_at,
    }
}

/// Stack what-if results: create, replace (which tells it replaced), case-insensitive get with the request beside
/// it, listing by scope in pages, delete (which tells whether there was one) taking the request with it.
pub async fn stack_what_ifs_put_replace_get_list_delete(store: &dyn Store) {
    let rg = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";
    let sub = "/subscriptions/00000000-0000-0000-0000-000000000001";
    let forever = Timestamp::from_unix_millis(i64::MAX);
    let replaced = store
        .put_stack_what_if(stack_what_if(rg, "Alpha", "request-1", 1, forever), at(1))
        .await
        .expect("create");
    assert!(!replaced, "a new result replaces nothing");
    let first = store
        .get_stack_what_if(&rg.to_uppercase(), "ALPHA", at(2))
        .await
        .expect("get")
        .expect("present");
    assert_eq!((first.scope.as_str(), first.name.as_str()), (rg, "Alpha"));
    assert_eq!(first.result["properties"]["marker"], json!(1));
    assert_eq!((first.created_at, first.updated_at), (at(1), at(1)));
    let replaced = store
        .put_stack_what_if(
            stack_what_if(
                &format!("{}/", rg.to_uppercase()),
                "alpha",
                "request-2",
                2,
                forever,
            ),
            at(3),
        )
        .await
        .expect("replace");
    assert!(replaced, "the same folded key replaces");
    let second = store
        .get_stack_what_if(rg, "alpha", at(4))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(second.result["properties"]["marker"], json!(2));
    assert_eq!(second.name, "alpha", "the latest spelling is kept");
    assert_eq!((second.created_at, second.updated_at), (at(1), at(3)));
    assert_eq!(
        store
            .get_stack_what_if_request(rg, "ALPHA", at(4))
            .await
            .expect("request")
            .map(|r| r.expose_secret().to_owned())
            .as_deref(),
        Some("request-2")
    );
    assert!(
        store
            .get_stack_what_if(rg, "beta", at(4))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get_stack_what_if(sub, "alpha", at(4))
            .await
            .expect("get")
            .is_none(),
        "another scope"
    );

    for (index, name) in ["gamma", "Beta", "delta"].into_iter().enumerate() {
        let marker = u32::try_from(index).unwrap_or(0) + 10;
        store
            .put_stack_what_if(stack_what_if(rg, name, "r", marker, forever), at(5))
            .await
            .expect("more");
    }
    store
        .put_stack_what_if(stack_what_if(sub, "at-sub", "r", 20, forever), at(5))
        .await
        .expect("sub result");
    let mut names = Vec::new();
    let mut page = PageRequest::first(3);
    let mut pages = 0;
    loop {
        let listed = store
            .list_stack_what_ifs(&rg.to_uppercase(), page.clone(), at(6))
            .await
            .expect("list");
        assert!(listed.items.len() <= 3);
        pages += 1;
        names.extend(listed.items.iter().map(|r| r.name.clone()));
        match listed.continuation {
            Some(token) => page.continuation = Some(token),
            None => break,
        }
    }
    assert_eq!(names, ["alpha", "Beta", "delta", "gamma"]);
    assert_eq!(pages, 2);
    let at_sub = store
        .list_stack_what_ifs(sub, PageRequest::default(), at(6))
        .await
        .expect("list sub");
    assert_eq!(
        at_sub
            .items
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["at-sub"]
    );
    assert!(at_sub.continuation.is_none());

    assert!(
        store
            .delete_stack_what_if(rg, "ALPHA", at(7))
            .await
            .expect("delete")
    );
    assert!(
        !store
            .delete_stack_what_if(rg, "alpha", at(7))
            .await
            .expect("delete twice"),
        "nothing left to delete"
    );
    assert!(
        store
            .get_stack_what_if(rg, "alpha", at(7))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get_stack_what_if_request(rg, "alpha", at(7))
            .await
            .expect("request")
            .is_none(),
        "the request goes with the result"
    );
    let left = store
        .list_stack_what_ifs(rg, PageRequest::default(), at(7))
        .await
        .expect("list");
    assert_eq!(left.items.len(), 3);
}

/// Stack what-if results expire: from `expires_at` on they are absent to get, list, the request and delete, a
/// put over one creates anew, and a purge removes exactly the expired ones.
pub async fn stack_what_ifs_expire_and_purge(store: &dyn Store) {
    let rg = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg";
    for (name, expires_at) in [("short", 10), ("long", 1_000), ("other", 10)] {
        store
            .put_stack_what_if(stack_what_if(rg, name, "request", 1, at(expires_at)), at(1))
            .await
            .expect("create");
    }
    let live = store
        .get_stack_what_if(rg, "short", at(9))
        .await
        .expect("get")
        .expect("before expiry");
    assert_eq!(live.expires_at, at(10));
    assert!(!live.is_expired(at(9)) && live.is_expired(at(10)));
    assert!(
        store
            .get_stack_what_if(rg, "short", at(10))
            .await
            .expect("get")
            .is_none(),
        "gone at its expiry"
    );
    assert!(
        store
            .get_stack_what_if_request(rg, "short", at(10))
            .await
            .expect("request")
            .is_none()
    );
    let listed = store
        .list_stack_what_ifs(rg, PageRequest::default(), at(10))
        .await
        .expect("list");
    assert_eq!(
        listed
            .items
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["long"]
    );
    // Paging skips expired rows without ending early.
    let first = store
        .list_stack_what_ifs(rg, PageRequest::first(1), at(10))
        .await
        .expect("page");
    assert_eq!(first.items.len(), 1);
    assert!(first.continuation.is_none(), "{:?}", first.continuation);

    // A put over an expired result creates a new one.
    let replaced = store
        .put_stack_what_if(stack_what_if(rg, "short", "again", 2, at(1_000)), at(20))
        .await
        .expect("put over expired");
    assert!(!replaced, "an expired result is not replaced, it is gone");
    let renewed = store
        .get_stack_what_if(rg, "short", at(21))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (renewed.created_at, renewed.expires_at),
        (at(20), at(1_000))
    );
    assert!(
        !store
            .delete_stack_what_if(rg, "other", at(20))
            .await
            .expect("delete expired"),
        "an expired result does not count as deleted"
    );

    store
        .put_stack_what_if(stack_what_if(rg, "doomed", "request", 1, at(30)), at(1))
        .await
        .expect("create");
    assert_eq!(
        store
            .purge_expired_stack_what_ifs(at(29))
            .await
            .expect("purge before expiry"),
        0
    );
    assert_eq!(
        store
            .purge_expired_stack_what_ifs(at(30))
            .await
            .expect("purge"),
        1
    );
    assert_eq!(
        store
            .purge_expired_stack_what_ifs(at(30))
            .await
            .expect("purge again"),
        0
    );
    // Purged means gone, even to a reader whose clock is behind.
    assert!(
        store
            .get_stack_what_if(rg, "doomed", at(2))
            .await
            .expect("get")
            .is_none()
    );
    let listed = store
        .list_stack_what_ifs(rg, PageRequest::default(), at(2))
        .await
        .expect("list");
    assert_eq!(
        listed
            .items
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["long", "short"]
    );
}

const CANARY_HOST_OPERATION: &str = "canary-host-operation";

fn host_operation(id: &str, state: &str, expires_at: Timestamp) -> NewHostOperation {
    NewHostOperation {
        id: id.to_owned(),
        extension_name: "Acme".into(),
        extension_version: "1.2.0".into(),
        state: SecretString::from(state.to_owned()),
        expires_at,
    }
}

/// Host operations: put, get (state decrypted), replace (keeps `created_at`), ids compared exactly, delete.
pub async fn host_operations_put_replace_get_delete(store: &dyn Store) {
    let forever = Timestamp::from_unix_millis(i64::MAX);
    assert!(
        store
            .get_host_operation("op-1", at(1))
            .await
            .expect("get")
            .is_none()
    );
    store
        .put_host_operation(host_operation("op-1", "state-1", forever), at(1))
        .await
        .expect("create");
    let stored = store
        .get_host_operation("op-1", at(2))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (
            stored.id.as_str(),
            stored.extension_name.as_str(),
            stored.extension_version.as_str(),
            stored.state.expose_secret(),
            stored.created_at,
            stored.updated_at,
            stored.expires_at,
        ),
        ("op-1", "Acme", "1.2.0", "state-1", at(1), at(1), forever)
    );
    assert!(
        store
            .get_host_operation("OP-1", at(2))
            .await
            .expect("get")
            .is_none(),
        "operation ids are exact"
    );
    store
        .put_host_operation(host_operation("op-1", "state-2", forever), at(3))
        .await
        .expect("replace");
    let replaced = store
        .get_host_operation("op-1", at(4))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (
            replaced.state.expose_secret(),
            replaced.created_at,
            replaced.updated_at
        ),
        ("state-2", at(1), at(3))
    );
    store
        .put_host_operation(host_operation("op-2", "other", forever), at(3))
        .await
        .expect("second");
    assert!(
        store
            .delete_host_operation("op-1", at(5))
            .await
            .expect("delete")
    );
    assert!(
        !store
            .delete_host_operation("op-1", at(5))
            .await
            .expect("delete again"),
        "already gone"
    );
    assert!(
        store
            .get_host_operation("op-1", at(5))
            .await
            .expect("get")
            .is_none()
    );
    assert_eq!(
        store
            .get_host_operation("op-2", at(5))
            .await
            .expect("get")
            .expect("untouched")
            .state
            .expose_secret(),
        "other"
    );
}

/// Host operations expire: absent from `expires_at` on, a put over one starts afresh, and a purge removes exactly
/// the expired ones.
pub async fn host_operations_expire_and_purge(store: &dyn Store) {
    for (id, expires_at) in [("short", 10), ("long", 1_000), ("other", 10)] {
        store
            .put_host_operation(host_operation(id, "s", at(expires_at)), at(1))
            .await
            .expect("create");
    }
    assert!(
        store
            .get_host_operation("short", at(9))
            .await
            .expect("get")
            .is_some()
    );
    assert!(
        store
            .get_host_operation("short", at(10))
            .await
            .expect("get")
            .is_none(),
        "gone at its expiry"
    );
    store
        .put_host_operation(host_operation("short", "again", at(1_000)), at(20))
        .await
        .expect("put over expired");
    let renewed = store
        .get_host_operation("short", at(21))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        (renewed.created_at, renewed.expires_at),
        (at(20), at(1_000))
    );
    assert!(
        !store
            .delete_host_operation("other", at(20))
            .await
            .expect("delete expired"),
        "an expired operation does not count as deleted"
    );
    store
        .put_host_operation(host_operation("doomed", "s", at(30)), at(1))
        .await
        .expect("create");
    assert_eq!(
        store
            .purge_expired_host_operations(at(29))
            .await
            .expect("purge before expiry"),
        0
    );
    assert_eq!(
        store
            .purge_expired_host_operations(at(30))
            .await
            .expect("purge"),
        1
    );
    assert!(
        store
            .get_host_operation("doomed", at(2))
            .await
            .expect("get")
            .is_none(),
        "purged means gone, even to a reader whose clock is behind"
    );
    assert!(
        store
            .get_host_operation("long", at(30))
            .await
            .expect("get")
            .is_some()
    );
}

/// Journal writes under a claim: the holder's steps and inventory changes land; once another owner took the run
/// over (or nobody holds it), the old holder's `append_operation` and `record_step` are `Conflict` and change
/// nothing — not the journal, not the inventory. An unclaimed writer (`None`) is not fenced.
pub async fn journal_writes_are_fenced_by_the_claim(store: &dyn Store) {
    let mut new = new_deployment(SCOPE, "journal-fence", None);
    new.owner = Some(DeploymentOwner {
        owner: "replica-a".into(),
        expires_at: at(1_000),
    });
    let run = store
        .put_deployment(new, Precondition::MustNotExist)
        .await
        .expect("create claimed");
    let id = format!("{SCOPE}/providers/Microsoft.Storage/storageAccounts/fenced");
    let resource = |marker: &str| ManagedResource {
        key: ResourceKey::arm(&id),
        resource_id: Some(id.clone()),
        resource_type: "Microsoft.Storage/storageAccounts".into(),
        api_version: Some("2023-01-01".into()),
        properties: json!({"written_by": marker}),
        applied: None,
        deployment: Some(run.key.clone()),
        extension: None,
        updated_at: at(3),
    };
    store
        .append_operation(step(&run.id, "fenced", "Running", 1), Some("replica-a"))
        .await
        .expect("the holder journals");
    store
        .record_step(
            step(&run.id, "fenced", "Succeeded", 2),
            InventoryChange::Put(Box::new(resource("replica-a"))),
            Some("replica-a"),
        )
        .await
        .expect("the holder records a step with its resource");
    assert_conflict(
        store
            .append_operation(step(&run.id, "fenced", "Running", 3), Some("replica-b"))
            .await,
        "a writer that never held the claim",
    );

    store
        .claim_deployment(&run.id, "replica-b", at(3_000), at(1_000))
        .await
        .expect("take over at expiry");
    assert_eq!(journal_length(store, &run.id).await, 2);
    assert_conflict(
        store
            .append_operation(step(&run.id, "late", "Running", 4), Some("replica-a"))
            .await,
        "the old holder's append",
    );
    assert_conflict(
        store
            .record_step(
                step(&run.id, "fenced", "Succeeded", 5),
                InventoryChange::Put(Box::new(resource("stale"))),
                Some("replica-a"),
            )
            .await,
        "the old holder's step with an inventory write",
    );
    assert_conflict(
        store
            .record_step(
                step(&run.id, "fenced", "Succeeded", 5),
                InventoryChange::Delete(ResourceKey::arm(&id)),
                Some("replica-a"),
            )
            .await,
        "the old holder's step with an inventory delete",
    );
    assert_conflict(
        store
            .append_operation_behind(step(&run.id, "late", "Succeeded", 5), Some("replica-a"))
            .await,
        "the old holder's step written behind",
    );
    assert_conflict(
        store
            .record_step_behind(
                step(&run.id, "fenced", "Succeeded", 5),
                InventoryChange::Put(Box::new(resource("stale"))),
                Some("replica-a"),
            )
            .await,
        "the old holder's step with an inventory write, written behind",
    );
    assert_eq!(
        journal_length(store, &run.id).await,
        2,
        "nothing of the old holder landed"
    );
    let kept = store
        .get_managed_resource(&ResourceKey::arm(&id))
        .await
        .expect("get")
        .expect("the resource stays");
    assert_eq!(kept.resource.properties, json!({"written_by": "replica-a"}));

    store
        .record_step_behind(
            step(&run.id, "fenced", "Succeeded", 6),
            InventoryChange::Put(Box::new(resource("replica-b"))),
            Some("replica-b"),
        )
        .await
        .expect("the new holder writes (behind)");
    let replaced = store
        .get_managed_resource(&ResourceKey::arm(&id))
        .await
        .expect("get")
        .expect("the resource stays");
    assert_eq!(
        replaced.resource.properties,
        json!({"written_by": "replica-b"})
    );
    store
        .append_operation_behind(
            step(&run.id, "fenced-too", "Succeeded", 6),
            Some("replica-b"),
        )
        .await
        .expect("the new holder appends (behind)");
    assert_eq!(journal_length(store, &run.id).await, 4);
    store
        .release_deployment(&run.id, "replica-b")
        .await
        .expect("release");
    assert_conflict(
        store
            .append_operation(step(&run.id, "after", "Running", 7), Some("replica-b"))
            .await,
        "a write after the release",
    );
    store
        .append_operation(step(&run.id, "after", "Running", 7), None)
        .await
        .expect("an unclaimed writer is not fenced");
    assert_eq!(journal_length(store, &run.id).await, 5);
    assert_not_found(
        store
            .append_operation(
                step(&DeploymentId::generate(), "x", "Running", 1),
                Some("replica-a"),
            )
            .await,
        "a claimed write to an unknown run",
    );
}

/// The stored record of a deployment the case knows exists.
async fn stored_deployment(store: &dyn Store, id: &DeploymentId) -> DeploymentRecord {
    store
        .get_deployment_by_id(id)
        .await
        .expect("get")
        .expect("present")
}

async fn journal_length(store: &dyn Store, run: &DeploymentId) -> usize {
    store
        .operation_journal(run, 0, 100)
        .await
        .expect("journal")
        .len()
}

/// A cancel request marks an active run without moving its version (the holder's updates go on) and shows on the
/// holder's next renewal; a finished run is left alone; an unknown run is `NotFound`.
pub async fn deployment_cancel_requests(store: &dyn Store) {
    let mut new = new_deployment(SCOPE, "to-cancel", None);
    new.owner = Some(DeploymentOwner {
        owner: "replica-a".into(),
        expires_at: at(1_000),
    });
    let run = store
        .put_deployment(new, Precondition::MustNotExist)
        .await
        .expect("create claimed");
    assert!(!run.cancel_requested);
    let requested = store
        .request_deployment_cancel(&run.id)
        .await
        .expect("request a cancel");
    assert!(requested.cancel_requested);
    assert_eq!(requested.version, run.version, "the version stays");
    let renewed = store
        .claim_deployment(&run.id, "replica-a", at(2_000), at(10))
        .await
        .expect("renew");
    assert!(
        renewed.cancel_requested,
        "the holder sees it when it renews"
    );
    let ended = store
        .update_deployment(
            &run.id,
            run.version,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Canceled),
                ..DeploymentUpdate::at(at(20))
            },
        )
        .await
        .expect("the holder's update at the version it knew");
    assert!(ended.cancel_requested);

    let finished = store
        .put_deployment(
            new_deployment(SCOPE, "finished", None),
            Precondition::MustNotExist,
        )
        .await
        .expect("create");
    let finished = store
        .update_deployment(
            &finished.id,
            finished.version,
            DeploymentUpdate {
                status: Some(DeploymentStatus::Succeeded),
                ..DeploymentUpdate::at(at(5))
            },
        )
        .await
        .expect("finish");
    let unchanged = store
        .request_deployment_cancel(&finished.id)
        .await
        .expect("a finished run");
    assert!(!unchanged.cancel_requested);
    assert_eq!(unchanged.version, finished.version);
    assert_not_found(
        store
            .request_deployment_cancel(&DeploymentId::generate())
            .await,
        "an unknown run",
    );
}

/// Operation results: a running one is renewed and finished by its owner only, then reads as done; results are
/// found by id under their subscription (any case) until they expire; the purge removes expired ones.
pub async fn operation_results_run_finish_expire(store: &dyn Store) {
    let running = NewOperationResult {
        id: "bulk-1".into(),
        subscription: "SUB-A".into(),
        state: OperationResultState::Running {
            owner: "replica-a".into(),
            owner_expires_at: at(100),
        },
        expires_at: at(10_000),
    };
    store
        .put_operation_result(running, at(1))
        .await
        .expect("put running");
    let read = store
        .get_operation_result("sub-a", "bulk-1", at(2))
        .await
        .expect("get")
        .expect("found in any case");
    assert_eq!(
        (read.subscription.as_str(), &read.state, read.created_at),
        (
            "sub-a",
            &OperationResultState::Running {
                owner: "replica-a".into(),
                owner_expires_at: at(100)
            },
            at(1)
        )
    );
    assert!(
        store
            .get_operation_result("sub-b", "bulk-1", at(2))
            .await
            .expect("get")
            .is_none(),
        "another subscription's"
    );
    store
        .renew_operation_result("bulk-1", "replica-a", at(200), at(50))
        .await
        .expect("the owner renews");
    assert_conflict(
        store
            .renew_operation_result("bulk-1", "replica-b", at(300), at(60))
            .await,
        "another server's renewal",
    );
    assert_conflict(
        store
            .finish_operation_result("bulk-1", "replica-b", 200, None, at(60))
            .await,
        "another server's finish",
    );
    store
        .finish_operation_result(
            "bulk-1",
            "replica-a",
            200,
            Some(json!({"value": [{"status": "deleted"}]})),
            at(70),
        )
        .await
        .expect("the owner finishes");
    let done = store
        .get_operation_result("SUB-A", "bulk-1", at(80))
        .await
        .expect("get")
        .expect("found");
    assert_eq!(
        (done.state, done.created_at, done.updated_at),
        (
            OperationResultState::Done {
                status: 200,
                body: Some(json!({"value": [{"status": "deleted"}]}))
            },
            at(1),
            at(70)
        )
    );
    assert_conflict(
        store
            .finish_operation_result("bulk-1", "replica-a", 500, None, at(90))
            .await,
        "finishing twice",
    );

    store
        .put_operation_result(
            NewOperationResult {
                id: "delete-1".into(),
                subscription: "sub-a".into(),
                state: OperationResultState::Done {
                    status: 204,
                    body: None,
                },
                expires_at: at(500),
            },
            at(5),
        )
        .await
        .expect("put done");
    assert!(
        store
            .get_operation_result("sub-a", "delete-1", at(500))
            .await
            .expect("get")
            .is_none(),
        "gone at its expiry"
    );
    assert_not_found(
        store
            .renew_operation_result("delete-1", "replica-a", at(900), at(600))
            .await,
        "renewing an expired result",
    );
    assert_not_found(
        store
            .renew_operation_result("never", "replica-a", at(900), at(600))
            .await,
        "renewing an unknown result",
    );
    assert_eq!(
        store
            .purge_expired_operation_results(at(600))
            .await
            .expect("purge"),
        1
    );
    assert!(
        store
            .get_operation_result("sub-a", "bulk-1", at(600))
            .await
            .expect("get")
            .is_some(),
        "an unexpired result stays"
    );
}

/// An open store is ready (reachable, schema current) and stays so while it serves; once closed it is not, and the
/// error says the store cannot be reached rather than naming a record.
pub async fn readiness_until_closed(store: &dyn Store) {
    store
        .readiness()
        .await
        .expect("a freshly opened store is ready");
    store
        .put_resource_group(resource_group("ready"), Precondition::Any, at(1))
        .await
        .expect("a write");
    store.readiness().await.expect("still ready after a write");
    store.close().await.expect("close");
    let error = store
        .readiness()
        .await
        .expect_err("a closed store is not ready");
    assert!(
        matches!(error, StoreError::Backend(_)),
        "a closed store is unreachable, not {error:?}"
    );
}
