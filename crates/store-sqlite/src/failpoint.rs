//! A process-level failpoint for crash tests: the process dies after a journal step's group is committed and
//! before the step is acknowledged to the engine.
//!
//! `CAIRN_FAILPOINT_ABORT_AFTER_COMMIT="<provisioningState> <name>"` (e.g. `Running w1`) makes the process abort
//! once the step of that state, for the target of that name (its identifiers' `name` or its resource name), is
//! durable: the store has it and the run that wrote it never hears so. Nothing else reads the variable; unset (the
//! normal case) the check is one load of a value read once.

use std::sync::OnceLock;

use cairn_store::OperationStep;

const VARIABLE: &str = "CAIRN_FAILPOINT_ABORT_AFTER_COMMIT";

struct AbortAfter {
    state: String,
    name: String,
}

fn configured() -> Option<&'static AbortAfter> {
    static CONFIGURED: OnceLock<Option<AbortAfter>> = OnceLock::new();
    CONFIGURED
        .get_or_init(|| {
            let text = std::env::var(VARIABLE).ok()?;
            let (state, name) = text.trim().split_once(' ')?;
            Some(AbortAfter {
                state: state.to_owned(),
                name: name.trim().to_owned(),
            })
        })
        .as_ref()
}

/// Called with a step whose group is committed, before it is returned to its writer.
pub(crate) fn step_committed(step: &OperationStep) {
    let Some(abort) = configured() else {
        return;
    };
    let named = |pointer: &str| {
        step.target_resource
            .as_ref()
            .and_then(|t| t.pointer(pointer))
            .and_then(|v| v.as_str())
            == Some(abort.name.as_str())
    };
    if step.provisioning_state == abort.state
        && (named("/identifiers/name") || named("/resourceName"))
    {
        eprintln!(
            "{VARIABLE}: aborting after the commit of {} {}",
            abort.state, abort.name
        );
        std::process::abort();
    }
}
