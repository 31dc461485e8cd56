//! Progress events of a running deployment, for live views (the CLI) and logs. Events never carry secrets: only
//! names, types, states, durations and ARM error details.

use std::time::Duration;

use cairn_arm::ErrorDetail;

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// A deployment (root or nested) started.
    DeploymentStarted,
    /// A deployment ended; `status` is its terminal state.
    DeploymentFinished,
    /// A resource operation started (`Create`, `Read`, ...).
    ResourceStarted,
    /// A resource operation ended.
    ResourceFinished,
    /// A resource was skipped: its condition is false.
    ResourceSkipped,
}

/// One progress event.
#[derive(Clone, Debug, PartialEq)]
pub struct DeploymentEvent {
    pub kind: EventKind,
    /// The deployment the event belongs to (its name) and how deeply it is nested (0 = root).
    pub deployment: String,
    pub depth: usize,
    /// The resource: ARM ID, or `alias:symbolicName` for extension resources; empty for deployment events.
    pub resource: String,
    pub resource_type: String,
    /// `Running`, `Succeeded`, `Failed`, `Canceled`, `Skipped`.
    pub status: String,
    pub duration: Option<Duration>,
    pub error: Option<ErrorDetail>,
}
