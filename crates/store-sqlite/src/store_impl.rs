//! The `cairn_store` traits for [`SqliteStore`]: each method boxes the matching inherent async function.

use cairn_store::{
    DeploymentFilter, DeploymentId, DeploymentKey, DeploymentRecord, DeploymentStore,
    DeploymentUpdate, InventoryStore, KeyVaultStore, Lease, LeaseStore, ManagedResource,
    ManagedResourceFilter, ManagedResourceRecord, NewDeployment, NewSecretVersion,
    OperationJournal, OperationRecord, OperationStep, Page, PageRequest, Precondition,
    ResourceGroup, ResourceGroupRecord, ResourceGroupStore, ResourceKey, SecretOwner, SecretRef,
    SecretStore, SecretString, SecretVersionInfo, Store, StoreFuture, Timestamp, Vault,
    VaultRecord, VaultSecret,
};

use cairn_store::{
    HostOperationRecord, HostOperationStore, InventoryChange, NewHostOperation, NewStack,
    NewStackWhatIf, StackRecord, StackStore, StackWhatIfRecord, StackWhatIfStore,
};

use crate::SqliteStore;

impl ResourceGroupStore for SqliteStore {
    fn put_resource_group<'a>(
        &'a self,
        group: ResourceGroup,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, ResourceGroupRecord> {
        Box::pin(self.put_resource_group_impl(group, precondition, now))
    }

    fn get_resource_group<'a>(
        &'a self,
        subscription_id: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<ResourceGroupRecord>> {
        Box::pin(self.get_resource_group_impl(subscription_id, name))
    }

    fn list_resource_groups<'a>(
        &'a self,
        subscription_id: &'a str,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<ResourceGroupRecord>> {
        Box::pin(self.list_resource_groups_impl(subscription_id, page))
    }

    fn delete_resource_group<'a>(
        &'a self,
        subscription_id: &'a str,
        name: &'a str,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_resource_group_impl(subscription_id, name, precondition))
    }
}

impl DeploymentStore for SqliteStore {
    fn put_deployment<'a>(
        &'a self,
        deployment: NewDeployment,
        precondition: Precondition,
    ) -> StoreFuture<'a, DeploymentRecord> {
        Box::pin(self.put_deployment_impl(deployment, precondition))
    }

    fn get_deployment<'a>(
        &'a self,
        key: &'a DeploymentKey,
    ) -> StoreFuture<'a, Option<DeploymentRecord>> {
        Box::pin(self.get_deployment_impl(key))
    }

    fn get_deployment_by_id<'a>(
        &'a self,
        id: &'a DeploymentId,
    ) -> StoreFuture<'a, Option<DeploymentRecord>> {
        Box::pin(self.get_deployment_by_id_impl(id))
    }

    fn update_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        expected_version: u64,
        update: DeploymentUpdate,
    ) -> StoreFuture<'a, DeploymentRecord> {
        Box::pin(self.update_deployment_impl(id, expected_version, update))
    }

    fn list_deployments<'a>(
        &'a self,
        scope: &'a str,
        filter: DeploymentFilter,
    ) -> StoreFuture<'a, Page<DeploymentRecord>> {
        Box::pin(self.list_deployments_impl(scope, filter))
    }

    fn delete_deployment<'a>(
        &'a self,
        key: &'a DeploymentKey,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_deployment_impl(key, precondition))
    }

    fn claim_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        owner: &'a str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> StoreFuture<'a, DeploymentRecord> {
        Box::pin(self.claim_deployment_impl(id, owner, expires_at, now))
    }

    fn release_deployment<'a>(
        &'a self,
        id: &'a DeploymentId,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.release_deployment_impl(id, owner))
    }

    fn record_takeover<'a>(&'a self, id: &'a DeploymentId, progress: u64) -> StoreFuture<'a, u32> {
        Box::pin(self.record_takeover_impl(id, progress))
    }

    fn list_orphaned_deployments<'a>(
        &'a self,
        now: Timestamp,
        limit: u32,
    ) -> StoreFuture<'a, Vec<DeploymentRecord>> {
        Box::pin(self.list_orphaned_deployments_impl(now, limit))
    }
}

impl OperationJournal for SqliteStore {
    fn append_operation<'a>(&'a self, step: OperationStep) -> StoreFuture<'a, OperationRecord> {
        Box::pin(self.append_operation_impl(step))
    }

    fn latest_operations<'a>(
        &'a self,
        deployment: &'a DeploymentId,
    ) -> StoreFuture<'a, Vec<OperationRecord>> {
        Box::pin(self.latest_operations_impl(deployment))
    }

    fn get_operation<'a>(
        &'a self,
        deployment: &'a DeploymentId,
        operation_id: &'a str,
    ) -> StoreFuture<'a, Option<OperationRecord>> {
        Box::pin(self.get_operation_impl(deployment, operation_id))
    }

    fn operation_journal<'a>(
        &'a self,
        deployment: &'a DeploymentId,
        after_sequence: u64,
        limit: u32,
    ) -> StoreFuture<'a, Vec<OperationRecord>> {
        Box::pin(self.operation_journal_impl(deployment, after_sequence, limit))
    }

    fn record_step<'a>(
        &'a self,
        step: OperationStep,
        change: InventoryChange,
    ) -> StoreFuture<'a, OperationRecord> {
        Box::pin(self.record_step_impl(step, change))
    }
}

impl InventoryStore for SqliteStore {
    fn put_managed_resource<'a>(
        &'a self,
        resource: ManagedResource,
        precondition: Precondition,
    ) -> StoreFuture<'a, ManagedResourceRecord> {
        Box::pin(self.put_managed_resource_impl(resource, precondition))
    }

    fn get_managed_resource<'a>(
        &'a self,
        key: &'a ResourceKey,
    ) -> StoreFuture<'a, Option<ManagedResourceRecord>> {
        Box::pin(self.get_managed_resource_impl(key))
    }

    fn list_managed_resources<'a>(
        &'a self,
        filter: ManagedResourceFilter,
    ) -> StoreFuture<'a, Page<ManagedResourceRecord>> {
        Box::pin(self.list_managed_resources_impl(filter))
    }

    fn delete_managed_resource<'a>(
        &'a self,
        key: &'a ResourceKey,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_managed_resource_impl(key, precondition))
    }
}

impl KeyVaultStore for SqliteStore {
    fn put_vault<'a>(
        &'a self,
        vault: Vault,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, VaultRecord> {
        Box::pin(self.put_vault_impl(vault, precondition, now))
    }

    fn get_vault<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<VaultRecord>> {
        Box::pin(self.get_vault_impl(id))
    }

    fn list_vaults<'a>(
        &'a self,
        scope: &'a str,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<VaultRecord>> {
        Box::pin(self.list_vaults_impl(scope, page))
    }

    fn delete_vault<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_vault_impl(id))
    }

    fn set_vault_secret<'a>(
        &'a self,
        secret: NewSecretVersion,
    ) -> StoreFuture<'a, SecretVersionInfo> {
        Box::pin(self.set_vault_secret_impl(secret))
    }

    fn get_vault_secret<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
        version: Option<&'a str>,
    ) -> StoreFuture<'a, Option<VaultSecret>> {
        Box::pin(self.get_vault_secret_impl(vault_id, name, version))
    }

    fn list_vault_secrets<'a>(
        &'a self,
        vault_id: &'a str,
    ) -> StoreFuture<'a, Vec<SecretVersionInfo>> {
        Box::pin(self.list_vault_secrets_impl(vault_id))
    }

    fn list_vault_secret_versions<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Vec<SecretVersionInfo>> {
        Box::pin(self.list_vault_secret_versions_impl(vault_id, name))
    }

    fn set_vault_secret_enabled<'a>(
        &'a self,
        vault_id: &'a str,
        name: &'a str,
        version: &'a str,
        enabled: bool,
        now: Timestamp,
    ) -> StoreFuture<'a, SecretVersionInfo> {
        Box::pin(self.set_vault_secret_enabled_impl(vault_id, name, version, enabled, now))
    }

    fn delete_vault_secret<'a>(&'a self, vault_id: &'a str, name: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_vault_secret_impl(vault_id, name))
    }
}

impl StackStore for SqliteStore {
    fn put_stack<'a>(
        &'a self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
    ) -> StoreFuture<'a, StackRecord> {
        Box::pin(self.put_stack_impl(stack, precondition, now, &[]))
    }

    fn get_stack<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<StackRecord>> {
        Box::pin(self.get_stack_impl(scope, name))
    }

    fn list_stacks<'a>(
        &'a self,
        scope: Option<&'a str>,
        page: PageRequest,
    ) -> StoreFuture<'a, Page<StackRecord>> {
        Box::pin(self.list_stacks_impl(scope, page))
    }

    fn delete_stack<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        precondition: Precondition,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.delete_stack_impl(scope, name, precondition, &[]))
    }

    fn put_stack_with_inventory<'a>(
        &'a self,
        stack: NewStack,
        precondition: Precondition,
        now: Timestamp,
        changes: Vec<InventoryChange>,
    ) -> StoreFuture<'a, StackRecord> {
        Box::pin(async move {
            self.put_stack_impl(stack, precondition, now, &changes)
                .await
        })
    }

    fn delete_stack_with_inventory<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        precondition: Precondition,
        changes: Vec<InventoryChange>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.delete_stack_impl(scope, name, precondition, &changes)
                .await
        })
    }
}

impl StackWhatIfStore for SqliteStore {
    fn put_stack_what_if<'a>(
        &'a self,
        what_if: NewStackWhatIf,
        now: Timestamp,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.put_stack_what_if_impl(what_if, now))
    }

    fn get_stack_what_if<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<StackWhatIfRecord>> {
        Box::pin(self.get_stack_what_if_impl(scope, name, now))
    }

    fn get_stack_what_if_request<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<SecretString>> {
        Box::pin(self.get_stack_what_if_request_impl(scope, name, now))
    }

    fn list_stack_what_ifs<'a>(
        &'a self,
        scope: &'a str,
        page: PageRequest,
        now: Timestamp,
    ) -> StoreFuture<'a, Page<StackWhatIfRecord>> {
        Box::pin(self.list_stack_what_ifs_impl(scope, page, now))
    }

    fn delete_stack_what_if<'a>(
        &'a self,
        scope: &'a str,
        name: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_stack_what_if_impl(scope, name, now))
    }

    fn purge_expired_stack_what_ifs<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64> {
        Box::pin(self.purge_expired_stack_what_ifs_impl(now))
    }
}

impl HostOperationStore for SqliteStore {
    fn put_host_operation<'a>(
        &'a self,
        operation: NewHostOperation,
        now: Timestamp,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.put_host_operation_impl(operation, now))
    }

    fn get_host_operation<'a>(
        &'a self,
        id: &'a str,
        now: Timestamp,
    ) -> StoreFuture<'a, Option<HostOperationRecord>> {
        Box::pin(self.get_host_operation_impl(id, now))
    }

    fn delete_host_operation<'a>(&'a self, id: &'a str, now: Timestamp) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_host_operation_impl(id, now))
    }

    fn purge_expired_host_operations<'a>(&'a self, now: Timestamp) -> StoreFuture<'a, u64> {
        Box::pin(self.purge_expired_host_operations_impl(now))
    }
}

impl LeaseStore for SqliteStore {
    fn acquire_lease<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreFuture<'a, Lease> {
        Box::pin(self.acquire_lease_impl(name, owner, now, expires_at))
    }

    fn renew_lease<'a>(
        &'a self,
        name: &'a str,
        owner: &'a str,
        now: Timestamp,
        expires_at: Timestamp,
    ) -> StoreFuture<'a, Lease> {
        Box::pin(self.renew_lease_impl(name, owner, now, expires_at))
    }

    fn release_lease<'a>(&'a self, name: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.release_lease_impl(name, owner))
    }

    fn get_lease<'a>(&'a self, name: &'a str) -> StoreFuture<'a, Option<Lease>> {
        Box::pin(self.get_lease_impl(name))
    }
}

impl SecretStore for SqliteStore {
    fn put_secret<'a>(
        &'a self,
        owner: &'a SecretOwner,
        name: &'a str,
        value: &'a SecretString,
        now: Timestamp,
    ) -> StoreFuture<'a, SecretRef> {
        Box::pin(self.put_secret_impl(owner, name, value, now))
    }

    fn get_secret<'a>(&'a self, reference: &'a SecretRef) -> StoreFuture<'a, SecretString> {
        Box::pin(self.get_secret_impl(reference))
    }

    fn list_secrets<'a>(
        &'a self,
        owner: &'a SecretOwner,
    ) -> StoreFuture<'a, Vec<(String, SecretRef)>> {
        Box::pin(self.list_secrets_impl(owner))
    }

    fn delete_secrets<'a>(&'a self, owner: &'a SecretOwner) -> StoreFuture<'a, u64> {
        Box::pin(self.delete_secrets_impl(owner))
    }
}

impl Store for SqliteStore {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    fn readiness<'a>(&'a self) -> StoreFuture<'a, ()> {
        Box::pin(self.check_readiness())
    }

    fn close<'a>(&'a self) -> StoreFuture<'a, ()> {
        Box::pin(self.close_pools())
    }
}
