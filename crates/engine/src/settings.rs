//! Engine settings: parallelism, claim and heartbeat timing, recovery policy, the local tenant's identity,
//! linked-template download limits and template evaluation budgets.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What `recover()` does with a deployment whose engine died.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Re-run it from its stored request: every resource is applied again (idempotently) and the run continues.
    #[default]
    Resume,
    /// End it `Failed`, listing every resource its operations created or were creating.
    Fail,
}

/// The default of [`EngineSettings::parallelism`].
pub const DEFAULT_PARALLELISM: usize = 16;

/// Slots for resource operations shared by every deployment that holds a clone: one semaphore, so concurrent
/// deployments together never have more than `limit` operations in flight.
#[derive(Clone, Debug)]
pub struct OperationSlots {
    permits: Arc<Semaphore>,
    limit: usize,
}

impl OperationSlots {
    /// `limit` operations at once (at least 1).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        OperationSlots {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// How many operations may be in flight at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How many slots are free now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Waits for a free slot; it is given back when the permit drops.
    pub async fn acquire(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed: acquiring cannot fail.
        loop {
            if let Ok(permit) = self.permits.clone().acquire_owned().await {
                return permit;
            }
        }
    }
}

/// The default of [`EngineSettings::max_recovery_takeovers`].
pub const DEFAULT_MAX_RECOVERY_TAKEOVERS: u32 = 3;

/// How the engine runs deployments.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// Resource operations (provider and extension calls) in flight at once per root deployment, nested
    /// deployments included.
    pub parallelism: usize,
    /// A cap on resource operations in flight across every deployment of this engine (and of whatever else holds
    /// a clone of the same slots, such as a stack service's deletes): a server-wide bound on top of each
    /// deployment's `parallelism`. `None`: no cap beyond the per-deployment one.
    pub operation_slots: Option<OperationSlots>,
    /// This engine replica's name in deployment claims (unique per process).
    pub owner_id: String,
    /// How long a claim on a running deployment lasts without a heartbeat; after that another replica (or a
    /// restarted engine) treats the deployment as orphaned.
    pub claim_ttl: Duration,
    /// How often running deployments renew their claims (well below `claim_ttl`).
    pub heartbeat_interval: Duration,
    pub recovery: RecoveryPolicy,
    /// A deployment recovery takes over this many times in a row without progress (no new succeeded operation
    /// in its journal since the takeover before) ends `Failed` with `DeploymentRecoveryAbandoned` instead of being
    /// resumed again: a deployment that kills its server cannot do so forever. At least 1.
    pub max_recovery_takeovers: u32,
    /// The tenant ID scope functions report.
    pub tenant_id: String,
    /// Refuse resource-group deployments whose group does not exist (ARM's `ResourceGroupNotFound`).
    pub require_resource_groups: bool,
    /// How many times a resource body is re-evaluated after fetching runtime values (`list*`, Key Vault, reads of
    /// resources outside the template) before giving up.
    pub max_runtime_rounds: usize,
    /// The largest linked template or parameters file downloaded for `templateLink.uri` / `parametersLink` (ARM's
    /// 4 MiB).
    pub max_linked_template_bytes: usize,
    /// How long one linked-template download may take.
    pub linked_template_timeout: Duration,
    /// Budgets of each deployment's template evaluation (nested deployments included): exceeding one fails the
    /// deployment with `EvaluationLimitExceeded` (`docs/limits.md`).
    pub eval_limits: cairn_eval::EvalLimits,
    /// The budget all of this engine's evaluations draw on together (a server's `--max-eval-server-bytes`): past
    /// it, the evaluation that asks for more fails with `EvaluationLimitExceeded`, so concurrent deployments each
    /// within their own budget cannot exhaust the server's memory. `None`: no shared budget (one user's CLI).
    pub eval_server_budget: Option<std::sync::Arc<cairn_eval::SharedBudget>>,
    /// Where root deployments' durations, the deployments in flight and recovery's takeovers are counted (the
    /// server's `/metrics`); by default a set of its own that nothing reads.
    pub metrics: cairn_metrics::Metrics,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            parallelism: DEFAULT_PARALLELISM,
            operation_slots: None,
            owner_id: format!("cairn-engine-{}", uuid::Uuid::new_v4()),
            claim_ttl: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(15),
            recovery: RecoveryPolicy::Resume,
            max_recovery_takeovers: DEFAULT_MAX_RECOVERY_TAKEOVERS,
            tenant_id: "00000000-0000-0000-0000-000000000000".into(),
            require_resource_groups: true,
            max_runtime_rounds: 8,
            max_linked_template_bytes: crate::fetch::DEFAULT_MAX_LINKED_BYTES,
            linked_template_timeout: crate::fetch::DEFAULT_LINK_TIMEOUT,
            eval_limits: cairn_eval::EvalLimits::default(),
            eval_server_budget: None,
            metrics: cairn_metrics::Metrics::default(),
        }
    }
}
