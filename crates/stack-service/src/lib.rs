//! Deployment stacks as a service: create/update, get, list, delete (with unmanage), validate and
//! exportTemplate over the engine, the store and the extension host.
//!
//! One stack operation at a time: a PUT or DELETE takes the stack's lease in the store (`stack:{scope}/{name}`)
//! and renews it with a heartbeat while it runs in the background; a second operation gets 409
//! `DeploymentStackInNonTerminalState`. The record says which operation is under way; every write of a running
//! operation is fenced by the record version it last wrote. A crashed operation stops renewing, so its lease
//! expires after the TTL; then [`StackService::recover`] (run at start and periodically by the server) finishes
//! it: an interrupted delete runs again from what is left, an interrupted update waits for its deployment (which
//! the engine resumes or fails) and then diffs and unmanages as usual. A PUT or DELETE that finds an interrupted
//! operation starts that recovery and answers 409, unless `bypassStackOutOfSyncError` says to take the stack over
//! as it is.
//!
//! A PUT runs the stack's deployment through the engine (stack-initiated, so its record keeps extension configs as
//! directives), collects the managed set of the deployment tree, diffs it against the stored set, unmanages what
//! left (detach, or delete: ARM resources through the providers, extensible resources through the host with the
//! persisted config resolved again at delete time) and records the outcome. The pure decisions are
//! `cairn-stacks`'.
//!
//! Sharing: a stack whose tag `cairn.shareResources` is `true` lets other stacks manage its resources too;
//! otherwise adding a resource another stack manages is refused.
//!
//! Modules, bottom-up: `request` (checks of a stack body and the deployment it runs; pure), `state` (what a
//! record keeps beside the stack), `ending` (the end-of-operation signal), `service` (the handle and the record
//! reads and writes every operation shares), `lease` (one operation at a time), `record` (fenced writes while an
//! operation runs), `snapshot` (the stack's deployment tree), `unmanage` (performing the deletes),
//! `validation`, `adoption` (what a stack's deployment does with extension resources that exist unmanaged),
//! `put` (create/update), `delete`, `recovery` (finishing interrupted operations), `what_if` (over
//! the pure `what_if_retention` and `what_if_changes`), `drift` (drift detection, whose results are kept like
//! what-if results) and `bulk_delete`.

mod adoption;
mod bulk_delete;
mod cancel;
mod delete;
mod drift;
mod ending;
mod lease;
mod put;
mod record;
mod recovery;
mod request;
mod service;
mod snapshot;
mod state;
mod unmanage;
mod validation;
mod what_if;
mod what_if_changes;
mod what_if_retention;

pub use crate::bulk_delete::{
    BULK_DELETE_SYNC_MAX_ENTRIES, BulkDeleteEntry, BulkDeleteRequest, BulkDeleteResponse,
    BulkDeleteResult, BulkDeleteStatus, GistImport, MAX_BULK_DELETE_ENTRIES, bulk_delete_runs_long,
    check_bulk_delete,
};
pub use crate::delete::DeleteRun;
pub use crate::drift::{DRIFT_DETECTION_INTERRUPTED, DRIFT_OPERATION_PREFIX};
pub use crate::ending::OperationEnded;
pub use crate::put::Accepted;
pub use crate::recovery::StackRecoveryReport;
pub use crate::service::{StackPage, StackService, StackServiceSettings};
pub use crate::state::SHARE_TAG;
pub use crate::what_if::WhatIfAccepted;
