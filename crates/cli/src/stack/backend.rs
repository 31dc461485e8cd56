//! Where `cairn stack` sends its requests: the stack service in this process on `$CAIRN_HOME` (engine, store and
//! extension host, as the other in-process commands run them) or a cairn server (`--server`) over the
//! deploymentStacks REST API. Both answer in the API's JSON shapes with ARM errors (a missing stack is 404
//! `DeploymentStackNotFound` either way), so the verbs do not care which one they talk to.

use std::time::Duration;

use cairn_arm::models::stack::{DeploymentStack, StackDeleteOptions};
use cairn_arm::models::stack_what_if::DeploymentStacksWhatIfResult;
use cairn_assembly::Assembly;
use cairn_client::Client;
use cairn_stack_service::{DeleteRun, OperationEnded, StackService};
use cairn_store::PageRequest;
use serde::Serialize;
use serde_json::Value;

use crate::backend::{ParallelismArgs, TargetArgs};
use crate::output::Failure;

/// How often the in-process service's record is read while an operation runs (it is a local database read).
const LOCAL_POLL: Duration = Duration::from_millis(200);

/// The stack service in this process, or a server.
pub(crate) enum StackBackend {
    Local(Box<LocalStacks>),
    Remote(Client),
}

/// The stack service over `$CAIRN_HOME`, with the store to close when the command ends.
pub(crate) struct LocalStacks {
    cairn: Assembly,
}

/// A create/update or delete the backend took: the stack as accepted (`Null` for a delete), how long to wait
/// between reads of the stack while it runs, in this process the signal that it ended (so the last read comes at
/// once, not up to `poll` later), and for a delete in this process its outcome (the record of a successful delete
/// is gone before a read can show its last resources; the outcome still lists them).
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) stack: Value,
    pub(crate) poll: Duration,
    pub(crate) ended: Option<OperationEnded>,
    pub(crate) outcome: Option<DeleteRun>,
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::Other(e.into()))
}

impl StackBackend {
    /// The server `--server` names, else the service on `$CAIRN_HOME` with the extension registry of
    /// `--registry`, `$CAIRN_EXTENSIONS` or `$CAIRN_HOME/extensions.json`.
    pub(crate) async fn connect(
        target: &TargetArgs,
        parallelism: ParallelismArgs,
    ) -> Result<Self, Failure> {
        let parallelism = parallelism.for_target(target)?;
        match target.server_client()? {
            Some(client) => Ok(StackBackend::Remote(client)),
            None => Ok(StackBackend::Local(Box::new(
                LocalStacks::open(target, parallelism).await?,
            ))),
        }
    }

    /// Starts a create or update; it runs in the background (in this process, or on the server).
    pub(crate) async fn create_or_update(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStack,
    ) -> Result<Started, Failure> {
        match self {
            StackBackend::Local(l) => {
                let accepted = l
                    .service()
                    .create_or_update(scope, name, request.clone(), None)
                    .await?;
                Ok(Started {
                    stack: to_json(&accepted.stack)?,
                    poll: LOCAL_POLL,
                    ended: Some(accepted.ended),
                    outcome: None,
                })
            }
            StackBackend::Remote(r) => {
                let accepted = r.put_stack(scope, name, request).await?;
                Ok(Started {
                    stack: accepted.body,
                    poll: accepted.poll,
                    ended: None,
                    outcome: None,
                })
            }
        }
    }

    /// The stack, or 404 `DeploymentStackNotFound`.
    pub(crate) async fn get(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        match self {
            StackBackend::Local(l) => to_json(&l.service().get(scope, name).await?),
            StackBackend::Remote(r) => Ok(r.get_stack(scope, name).await?),
        }
    }

    /// The stack, or `None` when it reads the same as the last read `last` recorded (which this keeps up to date).
    /// In this process `last` is the fingerprint of the previous read's text: a follower polls a big stack every
    /// 200 ms while an operation leaves its record alone for seconds, and a fingerprint spares it holding a copy
    /// of a text of megabytes to compare with. From a server it is the stack's entity tag, and the server holds the
    /// read until the stack changes or `wait` passes (`last.held` says it did, so the caller need not pause).
    pub(crate) async fn get_changed(
        &self,
        scope: &str,
        name: &str,
        last: &mut LastRead,
        wait: Duration,
    ) -> Result<Option<Value>, Failure> {
        match self {
            StackBackend::Local(l) => {
                let text = l.service().get_text(scope, name).await?;
                let fingerprint = TextFingerprint::of(&text);
                if last.fingerprint.as_ref() == Some(&fingerprint) {
                    return Ok(None);
                }
                let stack = serde_json::from_str(&text).map_err(|e| Failure::Other(e.into()))?;
                last.fingerprint = Some(fingerprint);
                Ok(Some(stack))
            }
            StackBackend::Remote(r) => {
                let read = r
                    .get_stack_if_changed(scope, name, last.etag.as_deref(), wait)
                    .await?;
                last.held = read.held;
                // A server without tags answers every read in full: compare the text as in this process.
                match (read.etag, read.stack) {
                    (etag @ Some(_), stack) => {
                        last.etag = etag;
                        Ok(stack)
                    }
                    (None, Some(stack)) => {
                        let fingerprint = TextFingerprint::of(&stack.to_string());
                        if last.fingerprint.as_ref() == Some(&fingerprint) {
                            return Ok(None);
                        }
                        last.fingerprint = Some(fingerprint);
                        Ok(Some(stack))
                    }
                    (None, None) => Ok(None),
                }
            }
        }
    }

    /// Every stack of the scope.
    pub(crate) async fn list(&self, scope: &str) -> Result<Vec<Value>, Failure> {
        match self {
            StackBackend::Local(l) => {
                let mut all = Vec::new();
                let mut page = PageRequest::default();
                loop {
                    let listed = l.service().list(scope, page.clone()).await?;
                    for stack in listed.value {
                        all.push(to_json(&stack)?);
                    }
                    match listed.continuation {
                        Some(token) => page.continuation = Some(token),
                        None => return Ok(all),
                    }
                }
            }
            StackBackend::Remote(r) => Ok(r.list_stacks(scope).await?),
        }
    }

    /// Starts deleting the stack; `None` when there is no such stack.
    pub(crate) async fn delete(
        &self,
        scope: &str,
        name: &str,
        options: &StackDeleteOptions,
    ) -> Result<Option<Started>, Failure> {
        match self {
            StackBackend::Local(l) => {
                let run = l
                    .service()
                    .delete_and_report(scope, name, options.clone(), None)
                    .await?;
                Ok(run.map(|run| Started {
                    stack: Value::Null,
                    poll: LOCAL_POLL,
                    ended: Some(run.ended()),
                    outcome: Some(run),
                }))
            }
            StackBackend::Remote(r) => {
                Ok(r.delete_stack(scope, name, options)
                    .await?
                    .map(|accepted| Started {
                        stack: accepted.body,
                        poll: accepted.poll,
                        ended: None,
                        outcome: None,
                    }))
            }
        }
    }

    /// The validate result; an invalid stack is the 400 ARM error.
    pub(crate) async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStack,
    ) -> Result<Value, Failure> {
        match self {
            StackBackend::Local(l) => {
                to_json(&l.service().validate(scope, name, request.clone()).await?)
            }
            StackBackend::Remote(r) => Ok(r.validate_stack(scope, name, request).await?),
        }
    }

    /// `{template?, templateLink?}` of the stack's deployment.
    pub(crate) async fn export_template(&self, scope: &str, name: &str) -> Result<Value, Failure> {
        match self {
            StackBackend::Local(l) => to_json(&l.service().export_template(scope, name).await?),
            StackBackend::Remote(r) => Ok(r.export_stack_template(scope, name).await?),
        }
    }

    /// Asks the stack's running operation to stop at its next safe point.
    pub(crate) async fn cancel(&self, scope: &str, name: &str) -> Result<(), Failure> {
        match self {
            StackBackend::Local(l) => Ok(l.service().cancel(scope, name).await?),
            StackBackend::Remote(r) => Ok(r.cancel_stack(scope, name).await?),
        }
    }

    /// Computes the what-if result `name` (a `deploymentStacksWhatIfResults` resource) and returns it finished.
    pub(crate) async fn what_if(
        &self,
        scope: &str,
        name: &str,
        request: &DeploymentStacksWhatIfResult,
    ) -> Result<Value, Failure> {
        match self {
            StackBackend::Local(l) => {
                let accepted = l.service().what_if(scope, name, request.clone()).await?;
                to_json(&accepted.result)
            }
            StackBackend::Remote(r) => Ok(r.stack_what_if(scope, name, request).await?),
        }
    }

    /// Closes the in-process store. Operations still running in this process are abandoned with it: commands
    /// wait for their operation to end before they close.
    pub(crate) async fn close(self) {
        if let StackBackend::Local(l) = self {
            let _ = l.cairn.close().await;
        }
    }
}

impl LocalStacks {
    async fn open(target: &TargetArgs, parallelism: Option<usize>) -> Result<Self, Failure> {
        let cairn = crate::local::assemble(target.registry.as_deref(), parallelism).await?;
        cairn.engine().recover().await?;
        let local = LocalStacks { cairn };
        local.finish_interrupted().await?;
        Ok(local)
    }

    pub(super) fn service(&self) -> &StackService {
        self.cairn.stacks()
    }

    /// An earlier command killed mid-operation left its stack `deploying`/`deleting`: once its lease has run out,
    /// finish that operation here (before this command's own work) and wait for it, so nothing stays stuck.
    async fn finish_interrupted(&self) -> Result<(), Failure> {
        let report = self.service().recover().await?;
        for id in &report.failed {
            eprintln!(
                "stack {id}: its interrupted operation could not be resumed; the stack is now failed"
            );
        }
        let resumed = report.resumed_deletes.iter().chain(&report.resumed_updates);
        for id in resumed {
            let Some((scope, name)) =
                id.split_once("/providers/Microsoft.Resources/deploymentStacks/")
            else {
                continue;
            };
            eprintln!("stack {name}: finishing the operation an earlier command left interrupted");
            loop {
                match self.service().get(scope, name).await {
                    Ok(stack)
                        if stack
                            .properties
                            .provisioning_state
                            .as_ref()
                            .is_some_and(|s| s.is_terminal()) =>
                    {
                        let state = stack
                            .properties
                            .provisioning_state
                            .map(|s| s.as_str().to_owned());
                        eprintln!("stack {name}: {}", state.unwrap_or_default());
                        break;
                    }
                    Ok(_) => tokio::time::sleep(LOCAL_POLL).await,
                    Err(error) if error.status() == 404 => {
                        eprintln!("stack {name}: deleted");
                        break;
                    }
                    Err(error) => return Err(Failure::Arm(error)),
                }
            }
        }
        Ok(())
    }
}

/// What the last read of a stack was, so the next one can say whether it changed.
#[derive(Clone, Debug, Default)]
pub(crate) struct LastRead {
    fingerprint: Option<TextFingerprint>,
    etag: Option<String>,
    /// The server held the last read until the stack changed or its wait passed.
    pub(crate) held: bool,
}

/// A text's length and 64-bit hash: two reads of a stack with the same fingerprint read the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TextFingerprint {
    len: usize,
    hash: u64,
}

impl TextFingerprint {
    pub(crate) fn of(text: &str) -> Self {
        use std::hash::{Hash as _, Hasher as _};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        TextFingerprint {
            len: text.len(),
            hash: hasher.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_have_the_same_fingerprint_only_when_they_read_the_same() {
        let stack = r#"{"properties":{"provisioningState":"deploying"}}"#;
        let same = String::from(stack);
        assert_eq!(TextFingerprint::of(stack), TextFingerprint::of(&same));
        assert_ne!(
            TextFingerprint::of(stack),
            TextFingerprint::of(&stack.replace("deploying", "succeeded"))
        );
    }
}
