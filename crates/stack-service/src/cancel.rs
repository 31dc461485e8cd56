//! Canceling a running stack operation at its next safe point: a create or update still deploying cancels its
//! deployment (the engine records the request, so it holds whichever replica runs it), and the deletes of an
//! update or a stack DELETE running in this process stop handing out new deletes; the calls in flight finish and
//! are recorded. The stack ends `canceled`, managing everything its deployment created and everything it did not
//! get to delete.

use cairn_arm::ArmError;
use cairn_arm::ErrorDetail;
use cairn_arm::models::stack::{DeploymentStack, DeploymentStackProvisioningState};

use crate::service::{StackService, lease_name};

/// The code of a canceled stack operation's error.
pub const DEPLOYMENT_STACK_CANCELED: &str = "DeploymentStackCanceled";

impl StackService {
    /// `POST .../deploymentStacks/{name}/cancel`: asks the stack's running operation to stop. 404 when there is no
    /// such stack; 409 `DeploymentStackCannotBeCanceled` when nothing runs, or when only deletes run and they run
    /// in another process.
    pub async fn cancel(&self, scope: &str, name: &str) -> Result<(), ArmError> {
        let Some((_, stack)) = self.load_stack(scope, name).await? else {
            return Err(ArmError::deployment_stack_not_found(name));
        };
        let state = stack.properties.provisioning_state.clone();
        if state.as_ref().is_none_or(|s| s.is_terminal()) {
            return Err(cannot_be_canceled(
                name,
                &format!(
                    "it is in state '{}'",
                    state.as_ref().map_or("unknown", |s| s.as_str())
                ),
            ));
        }
        let local = self
            .inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&lease_name(scope, name))
            .cloned();
        if let Some(token) = &local {
            token.cancel();
        }
        if state == Some(DeploymentStackProvisioningState::Deploying) {
            let deployment_scope = stack
                .properties
                .deployment_scope
                .clone()
                .unwrap_or_else(|| scope.to_owned());
            // The deployment may have ended a moment ago (the deletes are next, and the token stops them).
            match self.inner.engine.cancel(&deployment_scope, name).await {
                Ok(()) => return Ok(()),
                Err(_) if local.is_some() => return Ok(()),
                Err(error) => return Err(error.to_arm()),
            }
        }
        match local {
            Some(_) => Ok(()),
            None => Err(cannot_be_canceled(
                name,
                "its deletes run in another process: cancel it there",
            )),
        }
    }

    /// Whether the operation running here on the stack was asked to stop.
    pub(crate) fn cancel_requested(&self, scope: &str, name: &str) -> bool {
        self.cancel_token(scope, name)
            .is_some_and(|token| token.is_cancelled())
    }

    /// The cancel token of the operation running here on the stack.
    pub(crate) fn cancel_token(
        &self,
        scope: &str,
        name: &str,
    ) -> Option<tokio_util::sync::CancellationToken> {
        self.inner
            .cancels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&lease_name(scope, name))
            .cloned()
    }
}

fn cannot_be_canceled(name: &str, why: &str) -> ArmError {
    ArmError::new(
        409,
        "DeploymentStackCannotBeCanceled",
        format!("The deployment stack '{name}' cannot be canceled: {why}."),
    )
}

/// The stack as a canceled operation leaves it: `canceled`, with what went wrong before the cancel (if anything)
/// under a `DeploymentStackCanceled` error.
pub(crate) fn mark_canceled(stack: &mut DeploymentStack) {
    let p = &mut stack.properties;
    p.provisioning_state = Some(DeploymentStackProvisioningState::Canceled);
    let mut error = ErrorDetail::new(
        DEPLOYMENT_STACK_CANCELED,
        "The operation was canceled. Every resource it created and every resource it did not delete is still \
         managed; the next update or delete carries on.",
    );
    if let Some(earlier) = p.error.take() {
        error = error.with_details([earlier]);
    }
    p.error = Some(error);
}
