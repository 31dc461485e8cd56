//! The pure deployment core: a sans-IO state machine that runs one deployment's plan. It knows nothing of
//! templates, HTTP, stores or async runtimes; a driver (the engine's `run` module) performs what it asks and
//! tells it what happened.
//!
//! ```text
//! let mut core = Core::new(plan);
//! let mut effects = core.start();
//! loop {
//!     for effect in effects.drain(..) {
//!         match effect {
//!             Effect::Admit(n)        => wait for a parallelism slot, then feed Event::Admitted(n),
//!             Effect::Evaluate(n)     => evaluate the body, feed Event::Evaluated(n, Skip | Perform(call) | Fail(e)
//!                                        | Withdrawn),
//!             Effect::Started(n)      => journal "Running" (before the call),
//!             Effect::Perform(n, c)   => call the provider / extension / child deployment, feed Event::Performed,
//!             Effect::Succeeded(n, a) => journal "Succeeded", record the resource,
//!             Effect::Failed(n, e)    => journal "Failed",
//!             Effect::Canceled(n)     => journal "Canceled",
//!             Effect::Skipped(n, _)   => report the skip,
//!             Effect::NotStarted(n)   => release what was held for n,
//!             Effect::Finish(verdict) => evaluate outputs (on success), write the final record, stop.
//!         }
//!     }
//!     effects = core.step(next event)?;
//! }
//! ```
//!
//! Semantics (ARM's): a node starts once everything it depends on succeeded or was skipped; the first failure
//! or a cancel stops new starts while the calls in flight finish; a node whose dependency failed never starts;
//! the verdict is `Failed` with every failure in the order they happened, `Canceled` when canceled without a
//! failure, otherwise `Succeeded`. Recovery replays a crashed run's journal ([`Core::resume`]): the resumed run
//! performs every node again (ARM PUTs are idempotent and a resumed run needs fresh runtime values) and names
//! the nodes whose call was in flight when the process died.

mod core;
mod plan;

pub use crate::core::{
    Core, CoreError, Effect, Evaluation, Event, Failure, Recorded, SkipReason, Status, Verdict,
};
pub use crate::plan::{Node, NodeKind, Plan, PlanError};
