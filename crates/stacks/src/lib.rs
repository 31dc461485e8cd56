//! Pure deployment-stack logic: which resources a stack manages, what leaves the stack on an update or
//! delete, in which order deletes go and how their results are read, and how extension config directives are
//! persisted and evaluated.
//!
//! This crate does no I/O (no tokio, HTTP or SQL). The stack service adapts it: it reads deployments and
//! operations, persists managed sets, performs deletes and directive fetches, and feeds the results back.
//!
//! - [`key`]: [`ResourceKey`], the stable identity of a managed resource (ARM ID ignoring case, or extension
//!   name + version + `configId` + type + canonical identifiers).
//! - [`managed`]: [`ManagedResource`] and [`ManagedSet`], with the stack API's `resources[]` /
//!   `deploymentExtensions[]` shapes and a versioned persisted form.
//! - [`collect`]: [`collect_managed_set`], the managed set of a deployment tree (created/updated only; from
//!   operations when the deployment failed).
//! - [`diff`]: [`diff()`](diff::diff), previous vs new set into kept / added / removed with delete or detach per
//!   `actionOnUnmanage`, and the ownership check between stacks.
//! - [`kept`]: [`kept_parameters`], what a stack record keeps of its parameters (no secret values).
//! - [`policy`]: [`ResourcePolicy`], the stack's `protect` (never delete) and `retain` (detach, never delete)
//!   patterns over resource selectors.
//! - [`plan`]: [`DeletePlan`], delete ordering (reverse dependencies, contents before containers, extensible
//!   resources before their credential sources) as a graph and as waves.
//! - [`run`]: [`DeleteRun`], the sans-IO delete driver with bounded brute-force retry rounds.
//! - [`outcome`]: [`StackOperationResult`], the new managed set and `deleted/detached/failedResources`.
//! - [`directive`]: persisted extension configs ([`directive::PersistedConfig`]: what a stack may keep), with
//!   `cairn-config`'s typed values, value-path subset and [`directive::Resolver`] re-exported.
//!
//! Secrets: configs hold literals and directives only (secure literals are refused); literal values,
//! resolved configs and secret values print as `[REDACTED]` in `Debug`; error messages never quote values.

pub mod collect;
pub mod diff;
pub mod directive;
pub mod error;
pub mod kept;
pub mod key;
pub mod managed;
pub mod outcome;
pub mod plan;
pub mod policy;
pub mod run;

pub use collect::{
    CollectIssue, CollectedSet, DeploymentSnapshot, RecordedDependency, collect_managed_set,
};
pub use diff::{
    DiffError, Ownership, RemovalAction, RemovalReason, StackClaim, UnmanageDiff, UnmanagePolicy,
    WithoutDeleteSupport, diff_collected, unmanage_all,
};
pub use kept::kept_parameters;
pub use key::{ArmKey, ExtensibleKey, ResourceKey};
pub use managed::{ExtensionIdentity, ManagedResource, ManagedSet, ManagedTarget, UnmanageBucket};
pub use outcome::StackOperationResult;
pub use plan::{DeletePlan, EdgeKind, PlanEdge};
pub use policy::{Pattern, ResourcePolicy};
pub use run::{
    DeleteOutcome, DeleteReport, DeleteRun, DeleteTask, Deleter, FailedDelete, RunError,
    RunSettings, Step, run_to_completion,
};
