//! How a caller in this process learns that a stack operation it started has ended: the signal a create, update
//! or delete fires once its last write is done and its lease released.

use std::sync::Arc;

use cairn_arm::models::stack::DeploymentStack;

/// Says when a stack operation started in this process has ended: its last write is done and its lease
/// released, so a read of the stack now shows how it ended (or finds it gone). A caller following the operation
/// by reading the record waits on this between reads instead of finding out up to a polling interval late, and
/// for a create or update gets the stack as the operation's last write left it, without reading it back.
#[derive(Clone, Debug)]
pub struct OperationEnded {
    ended: tokio::sync::watch::Receiver<Ending>,
}

/// Where an operation is, as [`OperationEnded`] tells it.
#[derive(Clone, Debug, Default)]
pub(crate) enum Ending {
    #[default]
    Running,
    /// Ended; with the stack as its last write left it, when that is known.
    Ended(Option<Arc<DeploymentStack>>),
}

impl OperationEnded {
    /// A signal and the sender that fires it (also when the sender is dropped, e.g. its task panicked).
    pub(crate) fn channel() -> (tokio::sync::watch::Sender<Ending>, OperationEnded) {
        let (sender, ended) = tokio::sync::watch::channel(Ending::Running);
        (sender, OperationEnded { ended })
    }

    /// Waits until the operation has ended (at once if it has). For a create or update whose outcome was
    /// recorded: the stack as that last write left it; `None` for a delete (see
    /// [`DeleteRun::finished`](crate::DeleteRun::finished)) or when the outcome could not be recorded (then the
    /// record says what is known).
    pub async fn wait(&mut self) -> Option<DeploymentStack> {
        // An error means the sender is gone: the operation's task ended without saying so.
        match &*self
            .ended
            .wait_for(|ending| matches!(ending, Ending::Ended(_)))
            .await
            .ok()?
        {
            Ending::Ended(stack) => stack.as_deref().cloned(),
            Ending::Running => None,
        }
    }
}
