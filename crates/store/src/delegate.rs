//! The trait side of a backend: [`impl_store_traits!`](crate::impl_store_traits) implements every storage trait for
//! a backend type by boxing the inherent `async fn`s it defines under the same names with an `_impl` suffix
//! (`put_deployment_impl`, ...) plus `readiness_impl` and `close_impl`, so each backend writes plain async functions and the boxing
//! lives here once. The stack writes are the exception: `put_stack_impl` and `delete_stack_impl` take the inventory
//! changes of `put_stack_with_inventory`/`delete_stack_with_inventory` as a last argument (empty for the plain
//! writes).

/// Implements [`Store`](crate::Store) and every trait it gathers for `$ty`, whose inherent `async fn xxx_impl`
/// methods take the trait method's arguments; `$name` is [`Store::backend_name`](crate::Store::backend_name).
#[macro_export]
macro_rules! impl_store_traits {
    ($ty:ty, $name:literal) => {
        impl $crate::ResourceGroupStore for $ty {
            fn put_resource_group<'a>(
                &'a self,
                group: $crate::ResourceGroup,
                precondition: $crate::Precondition,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::ResourceGroupRecord> {
                Box::pin(self.put_resource_group_impl(group, precondition, now))
            }

            fn get_resource_group<'a>(
                &'a self,
                subscription_id: &'a str,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, Option<$crate::ResourceGroupRecord>> {
                Box::pin(self.get_resource_group_impl(subscription_id, name))
            }

            fn list_resource_groups<'a>(
                &'a self,
                subscription_id: &'a str,
                page: $crate::PageRequest,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::ResourceGroupRecord>> {
                Box::pin(self.list_resource_groups_impl(subscription_id, page))
            }

            fn delete_resource_group<'a>(
                &'a self,
                subscription_id: &'a str,
                name: &'a str,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_resource_group_impl(subscription_id, name, precondition))
            }
        }

        impl $crate::DeploymentStore for $ty {
            fn put_deployment<'a>(
                &'a self,
                deployment: $crate::NewDeployment,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, $crate::DeploymentRecord> {
                Box::pin(self.put_deployment_impl(deployment, precondition))
            }

            fn get_deployment<'a>(
                &'a self,
                key: &'a $crate::DeploymentKey,
            ) -> $crate::StoreFuture<'a, Option<$crate::DeploymentRecord>> {
                Box::pin(self.get_deployment_impl(key))
            }

            fn get_deployment_by_id<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
            ) -> $crate::StoreFuture<'a, Option<$crate::DeploymentRecord>> {
                Box::pin(self.get_deployment_by_id_impl(id))
            }

            fn get_deployment_summary<'a>(
                &'a self,
                lookup: $crate::DeploymentLookup<'a>,
            ) -> $crate::StoreFuture<'a, Option<$crate::DeploymentSummary>> {
                Box::pin(self.get_deployment_summary_impl(lookup))
            }

            fn update_deployment<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
                expected_version: u64,
                update: $crate::DeploymentUpdate,
            ) -> $crate::StoreFuture<'a, $crate::DeploymentSummary> {
                Box::pin(self.update_deployment_impl(id, expected_version, update))
            }

            fn list_deployments<'a>(
                &'a self,
                scope: &'a str,
                filter: $crate::DeploymentFilter,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::DeploymentRecord>> {
                Box::pin(self.list_deployments_impl(scope, filter))
            }

            fn delete_deployment<'a>(
                &'a self,
                key: &'a $crate::DeploymentKey,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_deployment_impl(key, precondition))
            }

            fn claim_deployment<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
                owner: &'a str,
                expires_at: $crate::Timestamp,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::DeploymentRecord> {
                Box::pin(self.claim_deployment_impl(id, owner, expires_at, now))
            }

            fn release_deployment<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
                owner: &'a str,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.release_deployment_impl(id, owner))
            }

            fn record_takeover<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
                progress: u64,
            ) -> $crate::StoreFuture<'a, u32> {
                Box::pin(self.record_takeover_impl(id, progress))
            }

            fn list_orphaned_deployments<'a>(
                &'a self,
                now: $crate::Timestamp,
                limit: u32,
            ) -> $crate::StoreFuture<'a, Vec<$crate::DeploymentRecord>> {
                Box::pin(self.list_orphaned_deployments_impl(now, limit))
            }

            fn request_deployment_cancel<'a>(
                &'a self,
                id: &'a $crate::DeploymentId,
            ) -> $crate::StoreFuture<'a, $crate::DeploymentRecord> {
                Box::pin(self.request_deployment_cancel_impl(id))
            }
        }

        impl $crate::OperationJournal for $ty {
            fn append_operation<'a>(
                &'a self,
                step: $crate::OperationStep,
                writer: Option<&'a str>,
            ) -> $crate::StoreFuture<'a, $crate::OperationRecord> {
                Box::pin(self.append_operation_impl(step, writer))
            }

            fn latest_operations<'a>(
                &'a self,
                deployment: &'a $crate::DeploymentId,
            ) -> $crate::StoreFuture<'a, Vec<$crate::OperationRecord>> {
                Box::pin(self.latest_operations_impl(deployment))
            }

            fn get_operation<'a>(
                &'a self,
                deployment: &'a $crate::DeploymentId,
                operation_id: &'a str,
            ) -> $crate::StoreFuture<'a, Option<$crate::OperationRecord>> {
                Box::pin(self.get_operation_impl(deployment, operation_id))
            }

            fn operation_journal<'a>(
                &'a self,
                deployment: &'a $crate::DeploymentId,
                after_sequence: u64,
                limit: u32,
            ) -> $crate::StoreFuture<'a, Vec<$crate::OperationRecord>> {
                Box::pin(self.operation_journal_impl(deployment, after_sequence, limit))
            }

            fn record_step<'a>(
                &'a self,
                step: $crate::OperationStep,
                change: $crate::InventoryChange,
                writer: Option<&'a str>,
            ) -> $crate::StoreFuture<'a, $crate::OperationRecord> {
                Box::pin(self.record_step_impl(step, change, writer))
            }

            fn append_operation_behind<'a>(
                &'a self,
                step: $crate::OperationStep,
                writer: Option<&'a str>,
            ) -> $crate::StoreFuture<'a, $crate::OperationRecord> {
                Box::pin(self.append_operation_behind_impl(step, writer))
            }

            fn record_step_behind<'a>(
                &'a self,
                step: $crate::OperationStep,
                change: $crate::InventoryChange,
                writer: Option<&'a str>,
            ) -> $crate::StoreFuture<'a, $crate::OperationRecord> {
                Box::pin(self.record_step_behind_impl(step, change, writer))
            }
        }

        impl $crate::InventoryStore for $ty {
            fn put_managed_resource<'a>(
                &'a self,
                resource: $crate::ManagedResource,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, $crate::ManagedResourceRecord> {
                Box::pin(self.put_managed_resource_impl(resource, precondition))
            }

            fn get_managed_resource<'a>(
                &'a self,
                key: &'a $crate::ResourceKey,
            ) -> $crate::StoreFuture<'a, Option<$crate::ManagedResourceRecord>> {
                Box::pin(self.get_managed_resource_impl(key))
            }

            fn list_managed_resources<'a>(
                &'a self,
                filter: $crate::ManagedResourceFilter,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::ManagedResourceRecord>> {
                Box::pin(self.list_managed_resources_impl(filter))
            }

            fn delete_managed_resource<'a>(
                &'a self,
                key: &'a $crate::ResourceKey,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_managed_resource_impl(key, precondition))
            }
        }

        impl $crate::KeyVaultStore for $ty {
            fn put_vault<'a>(
                &'a self,
                vault: $crate::Vault,
                precondition: $crate::Precondition,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::VaultRecord> {
                Box::pin(self.put_vault_impl(vault, precondition, now))
            }

            fn get_vault<'a>(
                &'a self,
                id: &'a str,
            ) -> $crate::StoreFuture<'a, Option<$crate::VaultRecord>> {
                Box::pin(self.get_vault_impl(id))
            }

            fn list_vaults<'a>(
                &'a self,
                scope: &'a str,
                page: $crate::PageRequest,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::VaultRecord>> {
                Box::pin(self.list_vaults_impl(scope, page))
            }

            fn delete_vault<'a>(&'a self, id: &'a str) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_vault_impl(id))
            }

            fn set_vault_secret<'a>(
                &'a self,
                secret: $crate::NewSecretVersion,
            ) -> $crate::StoreFuture<'a, $crate::SecretVersionInfo> {
                Box::pin(self.set_vault_secret_impl(secret))
            }

            fn get_vault_secret<'a>(
                &'a self,
                vault_id: &'a str,
                name: &'a str,
                version: Option<&'a str>,
            ) -> $crate::StoreFuture<'a, Option<$crate::VaultSecret>> {
                Box::pin(self.get_vault_secret_impl(vault_id, name, version))
            }

            fn list_vault_secrets<'a>(
                &'a self,
                vault_id: &'a str,
            ) -> $crate::StoreFuture<'a, Vec<$crate::SecretVersionInfo>> {
                Box::pin(self.list_vault_secrets_impl(vault_id))
            }

            fn list_vault_secret_versions<'a>(
                &'a self,
                vault_id: &'a str,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, Vec<$crate::SecretVersionInfo>> {
                Box::pin(self.list_vault_secret_versions_impl(vault_id, name))
            }

            fn set_vault_secret_enabled<'a>(
                &'a self,
                vault_id: &'a str,
                name: &'a str,
                version: &'a str,
                enabled: bool,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::SecretVersionInfo> {
                Box::pin(self.set_vault_secret_enabled_impl(vault_id, name, version, enabled, now))
            }

            fn delete_vault_secret<'a>(
                &'a self,
                vault_id: &'a str,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_vault_secret_impl(vault_id, name))
            }
        }

        impl $crate::StackStore for $ty {
            fn put_stack<'a>(
                &'a self,
                stack: $crate::NewStack,
                precondition: $crate::Precondition,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::StackRecord> {
                Box::pin(self.put_stack_impl(stack, precondition, now, Vec::new()))
            }

            fn put_stack_with_inventory<'a>(
                &'a self,
                stack: $crate::NewStack,
                precondition: $crate::Precondition,
                now: $crate::Timestamp,
                changes: Vec<$crate::InventoryChange>,
            ) -> $crate::StoreFuture<'a, $crate::StackRecord> {
                Box::pin(self.put_stack_impl(stack, precondition, now, changes))
            }

            fn get_stack<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, Option<$crate::StackRecord>> {
                Box::pin(self.get_stack_impl(scope, name))
            }

            fn get_stack_resource<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, Option<String>> {
                Box::pin(self.get_stack_resource_impl(scope, name))
            }

            fn list_stacks<'a>(
                &'a self,
                scope: Option<&'a str>,
                page: $crate::PageRequest,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::StackRecord>> {
                Box::pin(self.list_stacks_impl(scope, page))
            }

            fn delete_stack<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
                precondition: $crate::Precondition,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_stack_impl(scope, name, precondition, Vec::new()))
            }

            fn delete_stack_with_inventory<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
                precondition: $crate::Precondition,
                changes: Vec<$crate::InventoryChange>,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.delete_stack_impl(scope, name, precondition, changes))
            }
        }

        impl $crate::StackWhatIfStore for $ty {
            fn put_stack_what_if<'a>(
                &'a self,
                what_if: $crate::NewStackWhatIf,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, bool> {
                Box::pin(self.put_stack_what_if_impl(what_if, now))
            }

            fn get_stack_what_if<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, Option<$crate::StackWhatIfRecord>> {
                Box::pin(self.get_stack_what_if_impl(scope, name, now))
            }

            fn get_stack_what_if_request<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, Option<$crate::SecretString>> {
                Box::pin(self.get_stack_what_if_request_impl(scope, name, now))
            }

            fn list_stack_what_ifs<'a>(
                &'a self,
                scope: &'a str,
                page: $crate::PageRequest,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::Page<$crate::StackWhatIfRecord>> {
                Box::pin(self.list_stack_what_ifs_impl(scope, page, now))
            }

            fn delete_stack_what_if<'a>(
                &'a self,
                scope: &'a str,
                name: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, bool> {
                Box::pin(self.delete_stack_what_if_impl(scope, name, now))
            }

            fn purge_expired_stack_what_ifs<'a>(
                &'a self,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, u64> {
                Box::pin(self.purge_expired_stack_what_ifs_impl(now))
            }
        }

        impl $crate::HostOperationStore for $ty {
            fn put_host_operation<'a>(
                &'a self,
                operation: $crate::NewHostOperation,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.put_host_operation_impl(operation, now))
            }

            fn get_host_operation<'a>(
                &'a self,
                id: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, Option<$crate::HostOperationRecord>> {
                Box::pin(self.get_host_operation_impl(id, now))
            }

            fn delete_host_operation<'a>(
                &'a self,
                id: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, bool> {
                Box::pin(self.delete_host_operation_impl(id, now))
            }

            fn purge_expired_host_operations<'a>(
                &'a self,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, u64> {
                Box::pin(self.purge_expired_host_operations_impl(now))
            }
        }

        impl $crate::OperationResultStore for $ty {
            fn put_operation_result<'a>(
                &'a self,
                result: $crate::NewOperationResult,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.put_operation_result_impl(result, now))
            }

            fn get_operation_result<'a>(
                &'a self,
                subscription: &'a str,
                id: &'a str,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, Option<$crate::OperationResultRecord>> {
                Box::pin(self.get_operation_result_impl(subscription, id, now))
            }

            fn renew_operation_result<'a>(
                &'a self,
                id: &'a str,
                owner: &'a str,
                owner_expires_at: $crate::Timestamp,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.renew_operation_result_impl(id, owner, owner_expires_at, now))
            }

            fn finish_operation_result<'a>(
                &'a self,
                id: &'a str,
                owner: &'a str,
                status: u16,
                body: Option<::serde_json::Value>,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.finish_operation_result_impl(id, owner, status, body, now))
            }

            fn purge_expired_operation_results<'a>(
                &'a self,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, u64> {
                Box::pin(self.purge_expired_operation_results_impl(now))
            }
        }

        impl $crate::LeaseStore for $ty {
            fn acquire_lease<'a>(
                &'a self,
                name: &'a str,
                owner: &'a str,
                now: $crate::Timestamp,
                expires_at: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::Lease> {
                Box::pin(self.acquire_lease_impl(name, owner, now, expires_at))
            }

            fn renew_lease<'a>(
                &'a self,
                name: &'a str,
                owner: &'a str,
                now: $crate::Timestamp,
                expires_at: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::Lease> {
                Box::pin(self.renew_lease_impl(name, owner, now, expires_at))
            }

            fn release_lease<'a>(
                &'a self,
                name: &'a str,
                owner: &'a str,
            ) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.release_lease_impl(name, owner))
            }

            fn get_lease<'a>(
                &'a self,
                name: &'a str,
            ) -> $crate::StoreFuture<'a, Option<$crate::Lease>> {
                Box::pin(self.get_lease_impl(name))
            }
        }

        impl $crate::SecretStore for $ty {
            fn put_secret<'a>(
                &'a self,
                owner: &'a $crate::SecretOwner,
                name: &'a str,
                value: &'a $crate::SecretString,
                now: $crate::Timestamp,
            ) -> $crate::StoreFuture<'a, $crate::SecretRef> {
                Box::pin(self.put_secret_impl(owner, name, value, now))
            }

            fn get_secret<'a>(
                &'a self,
                reference: &'a $crate::SecretRef,
            ) -> $crate::StoreFuture<'a, $crate::SecretString> {
                Box::pin(self.get_secret_impl(reference))
            }

            fn list_secrets<'a>(
                &'a self,
                owner: &'a $crate::SecretOwner,
            ) -> $crate::StoreFuture<'a, Vec<(String, $crate::SecretRef)>> {
                Box::pin(self.list_secrets_impl(owner))
            }

            fn delete_secrets<'a>(
                &'a self,
                owner: &'a $crate::SecretOwner,
            ) -> $crate::StoreFuture<'a, u64> {
                Box::pin(self.delete_secrets_impl(owner))
            }
        }

        impl $crate::Store for $ty {
            fn backend_name(&self) -> &'static str {
                $name
            }

            fn readiness<'a>(&'a self) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.readiness_impl())
            }

            fn close<'a>(&'a self) -> $crate::StoreFuture<'a, ()> {
                Box::pin(self.close_impl())
            }
        }
    };
}
