//! `cairn stack group|sub|mg drift --name N`: detects the drift of a stack's managed resources (in process, or on a
//! server with `--server`) and prints a per-resource report: which resources are as the stack last applied them,
//! which were changed outside the stack (each changed property, applied value → current value), which are gone, and
//! which could not be read (with the error). `-o`/`--query` print the drift detection result instead.
//!
//! While the resources are read, a terminal's stderr shows how many have been read. Exit codes: 0 every resource is
//! in sync, 3 some are modified, deleted or unreachable (the report says which), 1 the detection failed or the
//! stack does not exist, 2 usage.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use cairn_arm::ErrorDetail;
use cairn_arm::models::stack_drift::{
    DeploymentStackDriftRequest, DeploymentStackDriftResult, DriftStatus, ResourceDrift,
};
use cairn_arm::models::stack_what_if::{
    DeploymentStacksWhatIfPropertyChange, StackPropertyChangeType,
};
use clap::Args;
use serde_json::Value;

use super::ScopeArgs;
use super::backend::StackBackend;
use crate::output::{self, CmdResult, EXIT_FAILED, Failure, Format, OutputArgs, TableView};
use crate::render::print_stdout;

/// Exit code: the detection ran and found resources not in sync.
pub(crate) const EXIT_DRIFTED: u8 = 3;

/// How often the in-process result is read while the detection runs.
const LOCAL_POLL: Duration = Duration::from_millis(200);

#[derive(Args)]
pub(crate) struct DriftArgs {
    /// Stack name.
    #[arg(short = 'n', long)]
    name: String,
    #[command(flatten)]
    pub(super) scope: ScopeArgs,
    /// How long the server keeps the result (ISO 8601, e.g. `PT12H`) [default: the service's, P7D].
    #[arg(long = "retention-interval", value_name = "DURATION")]
    retention_interval: Option<String>,
    /// `-o`/`--query` print the drift detection result (its `--query` part) instead of the report.
    #[command(flatten)]
    out: OutputArgs,
}

const DRIFT_COLUMNS: &[(&str, &str)] = &[
    ("Status", "/driftStatus"),
    ("Type", "/type"),
    ("Resource", "/id"),
    ("Identifiers", "/identifiers"),
    ("Error", "/error/code"),
];

/// Runs `cairn stack ... drift`.
pub(crate) async fn run(backend: &StackBackend, scope: &str, args: DriftArgs) -> CmdResult {
    let request = DeploymentStackDriftRequest {
        retention_interval: args.retention_interval.clone(),
    };
    let progress = Progress::new(std::io::stderr().is_terminal());
    let result = follow(backend, scope, &args.name, &request, &progress).await;
    progress.clear();
    let result = result?;
    let value = serde_json::to_value(&result).map_err(|e| Failure::Other(e.into()))?;
    if args.out.output.is_some() || args.out.query.is_some() {
        let rows: Vec<Value> = value["properties"]["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        args.out
            .print(Format::Json, &value, TableView::Rows(rows, DRIFT_COLUMNS))?;
    } else {
        print_stdout(&report(&args.name, &result)).map_err(|e| Failure::Other(e.into()))?;
    }
    if let Some(error) = &result.properties.error {
        output::print_error_json(error);
    }
    Ok(ExitCode::from(exit_code(&result)))
}

/// The exit code a finished detection ends the command with.
fn exit_code(result: &DeploymentStackDriftResult) -> u8 {
    let summary = &result.properties.summary;
    if result.properties.status.as_str() != "Succeeded" {
        EXIT_FAILED
    } else if summary.drifted() || summary.unreachable > 0 {
        EXIT_DRIFTED
    } else {
        0
    }
}

/// Starts the detection and reads its result until it has ended.
async fn follow(
    backend: &StackBackend,
    scope: &str,
    name: &str,
    request: &DeploymentStackDriftRequest,
    progress: &Progress,
) -> CmdResult<DeploymentStackDriftResult> {
    match backend {
        StackBackend::Local(local) => {
            let service = local.service();
            let started = service.detect_drift(scope, name, request.clone()).await?;
            let id = started.name.clone().unwrap_or_default();
            let mut result = started;
            while !result.properties.status.is_terminal() {
                progress.show(&result);
                tokio::time::sleep(LOCAL_POLL).await;
                result = service.drift_result(scope, name, &id).await?;
            }
            Ok(result)
        }
        StackBackend::Remote(client) => {
            let started = client.detect_stack_drift(scope, name, request).await?;
            let mut body = started.body;
            let mut poll = started.poll;
            loop {
                let result = parse(body)?;
                if result.properties.status.is_terminal() {
                    return Ok(result);
                }
                progress.show(&result);
                tokio::time::sleep(poll).await;
                let read = client.read_stack_drift(&started.location).await?;
                (body, poll) = (read.body, read.poll);
            }
        }
    }
}

fn parse(body: Value) -> CmdResult<DeploymentStackDriftResult> {
    serde_json::from_value(body).map_err(|e| {
        Failure::Other(anyhow::anyhow!(
            "the server's drift detection result cannot be read: {e}"
        ))
    })
}

/// `read N/M resources` on a terminal's stderr, rewritten in place.
struct Progress {
    terminal: bool,
}

impl Progress {
    fn new(terminal: bool) -> Self {
        Self { terminal }
    }

    fn show(&self, result: &DeploymentStackDriftResult) {
        if self.terminal {
            let summary = &result.properties.summary;
            eprint!(
                "\rdetecting drift: read {}/{} resources",
                summary.checked, summary.total
            );
            let _ = std::io::stderr().flush();
        }
    }

    fn clear(&self) {
        if self.terminal {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
        }
    }
}

/// The report: a summary line, then each resource not in sync with what differs, then those in sync.
fn report(name: &str, result: &DeploymentStackDriftResult) -> String {
    let summary = &result.properties.summary;
    let mut lines = vec![format!(
        "Drift of deployment stack '{name}': {} resource(s): {} in sync, {} modified, {} deleted, {} unreachable",
        summary.total, summary.in_sync, summary.modified, summary.deleted, summary.unreachable
    )];
    let mut resources: Vec<&ResourceDrift> = result.properties.resources.iter().collect();
    // Drifted first, in the stack's order within each status.
    resources.sort_by_key(|r| rank(&r.drift_status));
    if !resources.is_empty() {
        lines.push(String::new());
    }
    for resource in resources {
        lines.push(format!(
            "  {:<12} {}",
            label(&resource.drift_status),
            describe(resource)
        ));
        for change in resource.property_changes.iter().flatten() {
            change_lines(change, "", 6, &mut lines);
        }
        if let Some(error) = &resource.error {
            lines.push(format!("      {}", error_line(error)));
        }
        if let Some(message) = &resource.message {
            lines.push(format!("      note: {message}"));
        }
    }
    lines.join("\n")
}

fn rank(status: &DriftStatus) -> u8 {
    match status {
        DriftStatus::Modified => 0,
        DriftStatus::Deleted => 1,
        DriftStatus::Unreachable | DriftStatus::Other(_) => 2,
        DriftStatus::InSync => 3,
    }
}

fn label(status: &DriftStatus) -> &str {
    match status {
        DriftStatus::InSync => "in sync",
        other => other.as_str(),
    }
}

/// How a resource is named: its ARM id, or its extension, type and identifiers (and its symbolic name).
fn describe(resource: &ResourceDrift) -> String {
    let mut text = match (&resource.id, &resource.extension) {
        (Some(id), _) => id.clone(),
        (None, extension) => {
            let extension = extension
                .as_ref()
                .map(|e| format!("{} ", e.name))
                .unwrap_or_default();
            format!(
                "{extension}{} {}",
                resource.resource_type.as_deref().unwrap_or_default(),
                resource
                    .identifiers
                    .as_ref()
                    .map(identifiers)
                    .unwrap_or_default()
            )
        }
    };
    if let Some(symbolic) = &resource.symbolic_name {
        text.push_str(&format!(" ({symbolic})"));
    }
    text
}

/// `a=1 b=x` for an object of scalars; JSON otherwise.
fn identifiers(value: &Value) -> String {
    match value.as_object() {
        Some(map) if map.values().all(|v| !v.is_object() && !v.is_array()) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => format!("{key}={text}"),
                other => format!("{key}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => value.to_string(),
    }
}

/// `~ path: before → after` (modified), `- path: before` (gone), `+ path: after` (added); array items nested.
fn change_lines(
    change: &DeploymentStacksWhatIfPropertyChange,
    parent: &str,
    indent: usize,
    lines: &mut Vec<String>,
) {
    let path = if parent.is_empty() {
        change.path.clone()
    } else {
        format!("{parent}[{}]", change.path)
    };
    let pad = " ".repeat(indent);
    let shown = |value: &Option<Value>| {
        value
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_else(|| "null".into())
    };
    match &change.change_type {
        StackPropertyChangeType::Array => {
            for child in change.children.iter().flatten() {
                change_lines(child, &path, indent, lines);
            }
        }
        StackPropertyChangeType::Create => {
            lines.push(format!("{pad}+ {path}: {}", shown(&change.after)));
        }
        StackPropertyChangeType::Delete => {
            lines.push(format!("{pad}- {path}: {}", shown(&change.before)));
        }
        _ => match &change.children {
            Some(children) if !children.is_empty() => {
                for child in children {
                    change_lines(child, &path, indent, lines);
                }
            }
            _ => lines.push(format!(
                "{pad}~ {path}: {} → {}",
                shown(&change.before),
                shown(&change.after)
            )),
        },
    }
}

fn error_line(error: &ErrorDetail) -> String {
    format!("{}: {}", error.code(), error.message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(resources: Value, summary: Value) -> DeploymentStackDriftResult {
        serde_json::from_value(json!({
            "name": "drift-1",
            "properties": {
                "deploymentStackResourceId": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/app",
                "status": "Succeeded",
                "summary": summary,
                "resources": resources
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_report_lists_drift_first_with_each_change() {
        let drift = result(
            json!([
                {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv",
                 "driftStatus": "inSync"},
                {"extension": {"name": "Local", "version": "1.0.0"}, "type": "File",
                 "identifiers": {"path": "app.conf"}, "symbolicName": "conf", "driftStatus": "modified",
                 "propertyChanges": [
                     {"path": "properties.content", "changeType": "modify", "before": "a", "after": "b"},
                     {"path": "properties.tags", "changeType": "array",
                      "children": [{"path": "1", "changeType": "delete", "before": "y"}]}
                 ]},
                {"extension": {"name": "Gadgets", "version": "1.0.0"}, "type": "gadget",
                 "identifiers": {"name": "g"}, "driftStatus": "unreachable",
                 "error": {"code": "ServiceUnavailable", "message": "down"}},
                {"extension": {"name": "Local", "version": "1.0.0"}, "type": "File",
                 "identifiers": {"path": "gone.txt"}, "driftStatus": "deleted"}
            ]),
            json!({"total": 4, "checked": 4, "inSync": 1, "modified": 1, "deleted": 1, "unreachable": 1}),
        );
        assert_eq!(
            report("app", &drift),
            "Drift of deployment stack 'app': 4 resource(s): 1 in sync, 1 modified, 1 deleted, 1 unreachable\n\
             \n  modified     Local File path=app.conf (conf)\
             \n      ~ properties.content: \"a\" → \"b\"\
             \n      - properties.tags[1]: \"y\"\
             \n  deleted      Local File path=gone.txt\
             \n  unreachable  Gadgets gadget name=g\
             \n      ServiceUnavailable: down\
             \n  in sync      /subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv"
        );
        assert_eq!(exit_code(&drift), EXIT_DRIFTED);
    }

    #[test]
    fn in_sync_exits_zero_and_a_failed_detection_one() {
        let clean = result(
            json!([{"id": "/subscriptions/s/resourceGroups/rg/providers/A.B/c/d", "driftStatus": "inSync"}]),
            json!({"total": 1, "checked": 1, "inSync": 1, "modified": 0, "deleted": 0, "unreachable": 0}),
        );
        assert_eq!(exit_code(&clean), 0);
        let mut failed = clean.clone();
        failed.properties.status = cairn_arm::models::lro::OperationStatus::Failed;
        assert_eq!(exit_code(&failed), EXIT_FAILED);
    }
}
