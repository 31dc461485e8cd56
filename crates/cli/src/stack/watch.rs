//! Following a stack create/update or delete to its end: the stack record is read (GET) until its
//! `provisioningState` is terminal or the stack is gone, and each change is reported on stderr with the elapsed
//! time — a line per state change (`deploying` → `deletingResources` → `succeeded`), a line per resource as it
//! newly appears in `deletedResources`, `detachedResources` or `failedResources` (with the error for failed ones),
//! then the tally.
//!
//! The service publishes these lists while the operation runs, so they grow between reads: an entry is reported
//! once, keyed by list and by resource identity (the ARM id ignoring case; for extensible resources extension,
//! type and identifiers, as stacks diff them). Entries the record held before the operation (a delete does not
//! clear the previous operation's lists) are not news: they are skipped until they leave their list. A successful
//! delete removes the record, usually before a read shows its last resources: an in-process delete hands over the
//! stack as it ended, and its lists are reported from that. When nothing says more (a server's delete), the
//! resources not reported are listed as unmanaged with the action the delete asked for.
//!
//! Only identities, states and error messages are printed: never parameters, configs or outputs.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cairn_arm::models::stack::{
    ActionOnUnmanage, DeploymentStackProvisioningState, ResourceKey, ResourceReference,
    UnmanageAction,
};
use cairn_stack_service::{DeleteRun, OperationEnded};
use serde_json::Value;

use super::backend::{LastRead, StackBackend};
use crate::output::Failure;

/// Consecutive failed reads (server unreachable) a wait survives before it gives up.
const MAX_READ_FAILURES: u32 = 3;

/// The lists a stack operation reports its unmanaged resources in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Outcome {
    Deleted,
    Detached,
    Failed,
}

impl Outcome {
    const ALL: [Outcome; 3] = [Outcome::Deleted, Outcome::Detached, Outcome::Failed];

    fn field(self) -> &'static str {
        match self {
            Outcome::Deleted => "deletedResources",
            Outcome::Detached => "detachedResources",
            Outcome::Failed => "failedResources",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Outcome::Deleted => "deleted",
            Outcome::Detached => "detached",
            Outcome::Failed => "failed",
        }
    }
}

/// Who a list entry is: the stacks diff key, or (for an entry that has neither a parsable id nor an extension)
/// its text without the per-operation fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Identity {
    Resource(ResourceKey),
    Other(String),
}

/// Fields that change with the operation, not with the resource.
const VOLATILE_FIELDS: [&str; 3] = ["error", "status", "denyStatus"];

fn identity(entry: &Value) -> Identity {
    let mut stable = entry.clone();
    if let Some(map) = stable.as_object_mut() {
        for field in VOLATILE_FIELDS {
            map.remove(field);
        }
    }
    let key = serde_json::from_value::<ResourceReference>(stable.clone())
        .ok()
        .and_then(|reference| reference.key());
    match key {
        Some(key) => Identity::Resource(key),
        None => Identity::Other(match stable.get("id").and_then(Value::as_str) {
            Some(id) => id.to_ascii_lowercase(),
            None => stable.to_string(),
        }),
    }
}

/// How a resource is named on a progress line: its ARM id, or extension, type and identifiers.
fn label(entry: &Value) -> String {
    if let Some(id) = entry.get("id").and_then(Value::as_str) {
        return id.to_string();
    }
    let extension = entry
        .pointer("/extension/name")
        .and_then(Value::as_str)
        .unwrap_or("extension");
    let resource_type = entry
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("resource");
    match entry.get("identifiers") {
        Some(identifiers) => format!("{extension} {resource_type} {identifiers}"),
        None => format!("{extension} {resource_type}"),
    }
}

/// `: code: message` of a failed entry's error, or nothing: its innermost error (the first of its `details`, down
/// to one with none), which names the cause (`DirectoryNotEmpty: ... 2 entries`) where the outer ones only say
/// that the delete failed; the whole chain is in the stack's JSON.
fn error_text(entry: &Value) -> String {
    let Some(mut error) = entry.get("error").filter(|e| !e.is_null()) else {
        return String::new();
    };
    while let Some(inner) = error
        .get("details")
        .and_then(Value::as_array)
        .and_then(|details| details.first())
        .filter(|inner| inner.get("code").is_some() || inner.get("message").is_some())
    {
        error = inner;
    }
    let code = error.get("code").and_then(Value::as_str);
    let message = error.get("message").and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => format!(": {code}: {message}"),
        (Some(text), None) | (None, Some(text)) => format!(": {text}"),
        (None, None) => String::new(),
    }
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.1}s", elapsed.as_secs_f64())
}

/// The action a delete asked for a managed resource: its bucket's (resource groups, management groups, the
/// rest).
fn requested_action<'a>(entry: &Value, action: &'a ActionOnUnmanage) -> &'a UnmanageAction {
    let id = entry
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let segments: Vec<&str> = id.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["subscriptions", _, "resourcegroups", _] => action.for_resource_groups(),
        ["providers", "microsoft.management", "managementgroups", _] => {
            action.for_management_groups()
        }
        _ => &action.resources,
    }
}

/// What one stack operation has reported so far (pure: the caller reads the stack and prints the lines).
#[derive(Debug)]
pub(crate) struct StackWatch {
    name: String,
    state: Option<String>,
    /// Entries the record held before this operation, until they leave their list.
    stale: HashSet<(Outcome, Identity)>,
    reported: HashSet<(Outcome, Identity)>,
    /// The managed set as last read, for the account of a stack that disappears.
    managed: Vec<Value>,
    /// Whether `managed` is kept: only a delete's stack disappears, and a big stack's set is thousands of entries
    /// (a copy on every read).
    keeps_managed: bool,
}

impl StackWatch {
    /// A watch of stack `name`; `before` is the record as it was before the operation started (its lists are the
    /// previous operation's).
    pub(crate) fn new(name: &str, before: Option<&Value>) -> Self {
        let mut watch = StackWatch {
            name: name.to_string(),
            state: None,
            stale: HashSet::new(),
            reported: HashSet::new(),
            managed: Vec::new(),
            keeps_managed: true,
        };
        if let Some(stack) = before {
            watch.forget_stale(stack);
            watch.remember_managed(stack);
        }
        watch
    }

    /// Marks the entries of `stack`'s lists as an earlier operation's.
    fn forget_stale(&mut self, stack: &Value) {
        for outcome in Outcome::ALL {
            for entry in entries(stack, outcome) {
                self.stale.insert((outcome, identity(entry)));
            }
        }
    }

    /// A watch of a create or update of stack `name` (see [`StackWatch::new`]): the stack stays, so the managed set
    /// is not kept for [`StackWatch::gone`].
    pub(crate) fn of_put(name: &str, before: Option<&Value>) -> Self {
        let mut watch = Self::new(name, None);
        watch.keeps_managed = false;
        if let Some(stack) = before {
            watch.forget_stale(stack);
        }
        watch
    }

    fn remember_managed(&mut self, stack: &Value) {
        if !self.keeps_managed {
            return;
        }
        if let Some(resources) = stack
            .pointer("/properties/resources")
            .and_then(Value::as_array)
        {
            self.managed = resources.clone();
        }
    }

    /// The lines for what `stack` shows that was not reported yet, `elapsed` into the operation.
    pub(crate) fn observe(&mut self, stack: &Value, elapsed: Duration) -> Vec<String> {
        let at = seconds(elapsed);
        let mut resource_lines = self.resource_lines(stack, &at);
        self.remember_managed(stack);
        let name = &self.name;
        let state = stack
            .pointer("/properties/provisioningState")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        if self.state.as_deref() == Some(state) {
            return resource_lines;
        }
        self.state = Some(state.to_string());
        let state_line = format!("stack {name}: {state} ({at})");
        // A terminal state comes after the resources that led to it; any other before the ones it brings.
        if is_terminal(stack) {
            resource_lines.push(state_line);
            resource_lines
        } else {
            let mut lines = vec![state_line];
            lines.extend(resource_lines);
            lines
        }
    }

    /// The lines for the resources of a deleted stack's outcome (the stack as its delete ended; the record is gone)
    /// that were not reported yet, `elapsed` into the operation.
    pub(crate) fn deleted_outcome(&mut self, stack: &Value, elapsed: Duration) -> Vec<String> {
        self.resource_lines(stack, &seconds(elapsed))
    }

    /// A line per entry of `stack`'s lists not reported yet (and not left from an earlier operation).
    fn resource_lines(&mut self, stack: &Value, at: &str) -> Vec<String> {
        let name = self.name.clone();
        let mut resource_lines = Vec::new();
        for outcome in Outcome::ALL {
            let listed = entries(stack, outcome);
            let present: HashSet<Identity> = listed.iter().map(identity).collect();
            self.stale
                .retain(|(list, who)| *list != outcome || present.contains(who));
            for entry in listed {
                let key = (outcome, identity(entry));
                if self.stale.contains(&key) || !self.reported.insert(key) {
                    continue;
                }
                resource_lines.push(format!(
                    "stack {name}: {} {}{} ({at})",
                    outcome.verb(),
                    label(entry),
                    error_text(entry)
                ));
            }
        }
        resource_lines
    }

    /// The counts of a stack whose operation ended.
    pub(crate) fn tally(&self, stack: &Value) -> String {
        let count = |field: &str| {
            stack
                .pointer(&format!("/properties/{field}"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        };
        format!(
            "stack {}: {} managed, {} deleted, {} detached, {} failed",
            self.name,
            count("resources"),
            count("deletedResources"),
            count("detachedResources"),
            count("failedResources")
        )
    }

    /// The lines for a stack that is gone `elapsed` into its delete: the managed resources last seen that were
    /// not reported deleted or detached, with the action the delete asked for, then the end.
    pub(crate) fn gone(&self, elapsed: Duration, action: &ActionOnUnmanage) -> Vec<String> {
        let name = &self.name;
        let at = seconds(elapsed);
        let mut lines = Vec::new();
        let mut unreported = 0;
        for entry in &self.managed {
            let who = identity(entry);
            let settled = [Outcome::Deleted, Outcome::Detached]
                .into_iter()
                .any(|outcome| self.reported.contains(&(outcome, who.clone())));
            if settled {
                continue;
            }
            unreported += 1;
            lines.push(format!(
                "stack {name}: unmanaged {} ({} requested; the stack was removed before it reported the \
                 resource) ({at})",
                label(entry),
                requested_action(entry, action)
            ));
        }
        let reported = |outcome: Outcome| {
            self.reported
                .iter()
                .filter(|(list, _)| *list == outcome)
                .count()
        };
        lines.push(format!(
            "stack {name}: deleted ({at}): {} deleted, {} detached, {unreported} unmanaged without a report",
            reported(Outcome::Deleted),
            reported(Outcome::Detached)
        ));
        lines
    }
}

fn entries(stack: &Value, outcome: Outcome) -> &[Value] {
    stack
        .pointer(&format!("/properties/{}", outcome.field()))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Whether the stack's operation has ended (`succeeded`, `failed`, `canceled`, in any case).
pub(crate) fn is_terminal(stack: &Value) -> bool {
    stack
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .is_some_and(|s| DeploymentStackProvisioningState::parse(s).is_terminal())
}

/// What a followed delete asked for, and its outcome when it runs in this process.
pub(crate) struct FollowedDelete<'a> {
    pub(crate) action: &'a ActionOnUnmanage,
    pub(crate) outcome: Option<DeleteRun>,
}

/// Reads the stack every `poll` until its operation ends, printing `watch`'s lines on stderr; the final record,
/// or `None` once the stack is gone (a delete's success). With `ended` (an operation in this process), the
/// operation's end is noticed as soon as it comes: a create or update hands over the stack as it ended (not read
/// back), a delete is read at once.
pub(crate) async fn follow(
    backend: &StackBackend,
    scope: &str,
    name: &str,
    watch: &mut StackWatch,
    poll: Duration,
    mut ended: Option<OperationEnded>,
    mut delete: Option<FollowedDelete<'_>>,
) -> Result<Option<Value>, Failure> {
    let started = Instant::now();
    let mut failures = 0;
    let mut handed_over: Option<Value> = None;
    let mut last_read = LastRead::default();
    // A create or update in this process was shown as accepted a moment ago: reading it back at once would only
    // repeat it (an update's lists a whole managed set) while its deployment is being accepted beside it.
    let mut skip_read = ended.is_some() && delete.is_none();
    loop {
        let read = match handed_over.take() {
            Some(stack) => Ok(Some(stack)),
            None if std::mem::take(&mut skip_read) => Ok(None),
            None => backend.get_changed(scope, name, &mut last_read, poll).await,
        };
        match read {
            // The same as the last read: nothing to report, and not terminal (that read would have ended the loop).
            Ok(None) => failures = 0,
            Ok(Some(stack)) => {
                failures = 0;
                for line in watch.observe(&stack, started.elapsed()) {
                    eprintln!("{line}");
                }
                if is_terminal(&stack) {
                    eprintln!("{}", watch.tally(&stack));
                    return Ok(Some(stack));
                }
            }
            Err(Failure::Arm(error)) if error.status() == 404 => {
                match delete.as_mut() {
                    Some(followed) => {
                        if let Some(run) = followed.outcome.take()
                            && let Some(last) = run.finished().await
                        {
                            let last = serde_json::to_value(&last)
                                .map_err(|e| Failure::Other(e.into()))?;
                            for line in watch.deleted_outcome(&last, started.elapsed()) {
                                eprintln!("{line}");
                            }
                        }
                        for line in watch.gone(started.elapsed(), followed.action) {
                            eprintln!("{line}");
                        }
                    }
                    None => eprintln!("stack {name}: gone ({})", seconds(started.elapsed())),
                }
                return Ok(None);
            }
            // The operation goes on without us: a server that does not answer for a moment is waited for.
            Err(Failure::Other(error)) if failures < MAX_READ_FAILURES => {
                failures += 1;
                eprintln!("stack {name}: cannot read the stack ({error:#}); retrying");
            }
            Err(error) => return Err(error),
        }
        match ended.as_mut() {
            Some(signal) => {
                tokio::select! {
                    () = tokio::time::sleep(poll) => {}
                    last = signal.wait() => {
                        // Once: should the record not be terminal yet (its last write failed), reads go on at
                        // `poll` rather than at once.
                        ended = None;
                        handed_over = last
                            .map(|stack| serde_json::to_value(&stack))
                            .transpose()
                            .map_err(|e| Failure::Other(e.into()))?;
                    }
                }
            }
            // A server that held the read has already waited for the next change.
            None if std::mem::take(&mut last_read.held) => {}
            None => tokio::time::sleep(poll).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RG: &str = "/subscriptions/s/resourceGroups/rg";

    fn site(name: &str) -> Value {
        json!({ "id": format!("{RG}/providers/Microsoft.Web/sites/{name}") })
    }

    fn file(path: &str) -> Value {
        json!({ "extension": { "name": "Local", "version": "1.0.0" }, "type": "File",
                "identifiers": { "path": path } })
    }

    fn stack(state: &str, lists: Value) -> Value {
        let mut properties = lists;
        properties["provisioningState"] = json!(state);
        json!({ "properties": properties })
    }

    fn at(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    /// A failed delete's line names the cause, the innermost error, not the wrapper that says the delete failed.
    #[test]
    fn a_failed_resource_shows_its_innermost_error() {
        let failed = json!({ "extension": { "name": "Local", "version": "1.0.0" }, "type": "Directory",
            "identifiers": { "path": "site" },
            "error": { "code": "DeletionFailed", "message": "Resource could not be deleted.",
                "details": [{ "code": "ExtensionError", "message": "The extension failed.",
                    "details": [{ "code": "DirectoryNotEmpty",
                                  "message": "The directory 'site' still holds 2 entries: a, b." }] }] } });
        let mut watch = StackWatch::new("st", None);
        let lines = watch.observe(
            &stack("failed", json!({ "failedResources": [failed] })),
            at(1),
        );
        assert_eq!(
            lines[0],
            r#"stack st: failed Local Directory {"path":"site"}: DirectoryNotEmpty: The directory 'site' still holds 2 entries: a, b. (1.0s)"#
        );
    }

    #[test]
    fn growing_lists_are_reported_once_per_entry() {
        let mut watch = StackWatch::new("st", None);
        assert_eq!(
            watch.observe(&stack("deploying", json!({})), at(0)),
            ["stack st: deploying (0.0s)"]
        );
        let first = stack(
            "deletingResources",
            json!({ "deletedResources": [site("a")] }),
        );
        assert_eq!(
            watch.observe(&first, at(1)),
            [
                "stack st: deletingResources (1.0s)",
                "stack st: deleted /subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/a (1.0s)"
            ]
        );
        // The list grew (and the id's case changed): only the new entry is news.
        let mut a_upper = site("a");
        a_upper["id"] = json!(a_upper["id"].as_str().unwrap().to_uppercase());
        let second = stack(
            "deletingResources",
            json!({ "deletedResources": [a_upper, file("x.txt")] }),
        );
        assert_eq!(
            watch.observe(&second, at(2)),
            [r#"stack st: deleted Local File {"path":"x.txt"} (2.0s)"#]
        );
        assert!(watch.observe(&second, at(3)).is_empty());
        let failed = json!({ "extension": { "name": "Local", "version": "1.0.0" }, "type": "File",
            "identifiers": { "path": "y.txt" },
            "error": { "code": "DeletionFailed", "message": "Resource could not be deleted." } });
        let last = stack(
            "failed",
            json!({ "deletedResources": [site("a"), file("x.txt")], "failedResources": [failed],
                    "resources": [failed] }),
        );
        assert_eq!(
            watch.observe(&last, at(4)),
            [
                r#"stack st: failed Local File {"path":"y.txt"}: DeletionFailed: Resource could not be deleted. (4.0s)"#,
                "stack st: failed (4.0s)"
            ]
        );
        assert_eq!(
            watch.tally(&last),
            "stack st: 1 managed, 2 deleted, 0 detached, 1 failed"
        );
    }

    #[test]
    fn extensible_identities_ignore_identifier_order() {
        let a = json!({ "extension": { "name": "K8s", "version": "1" }, "type": "ConfigMap",
                        "identifiers": { "name": "n", "namespace": "ns" } });
        let b = json!({ "extension": { "name": "k8s", "version": "1" }, "type": "ConfigMap",
                        "identifiers": { "namespace": "ns", "name": "n" }, "status": "managed" });
        assert_eq!(identity(&a), identity(&b));
        let other = json!({ "extension": { "name": "K8s", "version": "1" }, "type": "ConfigMap",
                            "identifiers": { "name": "m", "namespace": "ns" } });
        assert_ne!(identity(&a), identity(&other));
    }

    #[test]
    fn the_previous_operations_lists_are_not_news_until_they_leave() {
        let before = stack(
            "succeeded",
            json!({ "detachedResources": [site("old")], "resources": [site("a")] }),
        );
        let mut watch = StackWatch::new("st", Some(&before));
        let running = stack(
            "deleting",
            json!({ "detachedResources": [site("old")], "resources": [site("a")] }),
        );
        assert_eq!(
            watch.observe(&running, at(0)),
            ["stack st: deleting (0.0s)"]
        );
        // Cleared, then listed again by this operation: now it is news.
        watch.observe(&stack("deleting", json!({})), at(1));
        let again = stack("deleting", json!({ "detachedResources": [site("old")] }));
        assert_eq!(watch.observe(&again, at(2)).len(), 1);
    }

    #[test]
    fn a_put_watch_reports_like_any_but_keeps_no_copy_of_the_managed_set() {
        let before = stack(
            "deploying",
            json!({ "detachedResources": [site("old")], "resources": [site("a")] }),
        );
        let mut watch = StackWatch::of_put("st", Some(&before));
        let running = stack(
            "deploying",
            json!({ "detachedResources": [site("old")], "resources": [site("a"), site("b")] }),
        );
        assert_eq!(
            watch.observe(&running, at(0)),
            ["stack st: deploying (0.0s)"]
        );
        assert!(watch.managed.is_empty(), "{:?}", watch.managed);
        let mut delete = StackWatch::new("st", Some(&before));
        delete.observe(&running, at(0));
        assert_eq!(delete.managed.len(), 2);
    }

    #[test]
    fn a_vanished_stack_accounts_for_unreported_resources() {
        let before = stack(
            "succeeded",
            json!({ "resources": [site("a"), site("b"), json!({ "id": RG })] }),
        );
        let mut watch = StackWatch::new("st", Some(&before));
        watch.observe(
            &stack(
                "deleting",
                json!({ "deletedResources": [site("a")], "resources": [site("b"), json!({ "id": RG })] }),
            ),
            at(1),
        );
        let action = ActionOnUnmanage::from_cli_preset("deleteResources").unwrap();
        let lines = watch.gone(at(2), &action);
        assert_eq!(
            lines,
            [
                "stack st: unmanaged /subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/b (delete \
                 requested; the stack was removed before it reported the resource) (2.0s)",
                "stack st: unmanaged /subscriptions/s/resourceGroups/rg (detach requested; the stack was removed \
                 before it reported the resource) (2.0s)",
                "stack st: deleted (2.0s): 1 deleted, 0 detached, 2 unmanaged without a report",
            ]
        );
    }

    #[test]
    fn a_deleted_stacks_outcome_reports_what_no_read_showed() {
        let before = stack(
            "succeeded",
            json!({ "resources": [site("a"), site("b"), json!({ "id": RG })] }),
        );
        let mut watch = StackWatch::new("st", Some(&before));
        watch.observe(
            &stack(
                "deleting",
                json!({ "deletedResources": [site("a")], "resources": [site("b"), json!({ "id": RG })] }),
            ),
            at(1),
        );
        let outcome = stack(
            "succeeded",
            json!({ "deletedResources": [site("a"), site("b")], "detachedResources": [json!({ "id": RG })],
                    "resources": [] }),
        );
        assert_eq!(
            watch.deleted_outcome(&outcome, at(2)),
            [
                "stack st: deleted /subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/b (2.0s)",
                "stack st: detached /subscriptions/s/resourceGroups/rg (2.0s)",
            ]
        );
        let action = ActionOnUnmanage::from_cli_preset("deleteResources").unwrap();
        assert_eq!(
            watch.gone(at(2), &action),
            ["stack st: deleted (2.0s): 2 deleted, 1 detached, 0 unmanaged without a report"]
        );
    }

    #[test]
    fn states_are_terminal_in_any_case() {
        assert!(is_terminal(&stack("Succeeded", json!({}))));
        assert!(is_terminal(&stack("canceled", json!({}))));
        assert!(!is_terminal(&stack("deletingResources", json!({}))));
        assert!(!is_terminal(&json!({})));
    }

    #[test]
    fn entries_without_identity_fall_back_to_their_text() {
        assert_eq!(
            identity(&json!({ "id": "Not An Id" })),
            Identity::Other("not an id".into())
        );
        assert_eq!(label(&json!({ "type": "T" })), "extension T");
    }
}
