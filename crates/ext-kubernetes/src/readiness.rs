//! Readiness, opt-in per resource like `kubectl wait` or kapp: `waitFor: { condition: 'Available',
//! status?: 'True', timeoutSeconds?: 120 }` on any object with status conditions. The apply is done
//! only once the condition holds for the applied generation; a timeout fails the resource with the
//! object's conditions in the error.
//!
//! The host gives a request 60 seconds, readiness can take longer: createOrUpdate waits up to
//! [`SYNC_WAIT`] itself, then answers the resource `Running` (a resource-based long-running operation)
//! and the host polls get, which judges readiness again from the live object. A get request carries
//! only identifiers, so the `waitFor` settings are kept on the object as the annotation
//! [`WAIT_FOR_ANNOTATION`] (owned by cairn's field manager). The deadline is remembered in process per
//! object and generation; a get in a process that did not apply it (a restart) counts from the time
//! cairn's field manager last changed the object.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use cairn_extension_sdk::{ExtensionError, Validator};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::k8s_codes;

/// The annotation keeping a resource's `waitFor` for the gets that poll it.
pub const WAIT_FOR_ANNOTATION: &str = "cairn/wait-for";

/// How long createOrUpdate itself waits before answering `Running`.
pub const SYNC_WAIT: Duration = Duration::from_secs(10);

/// The timeout when `waitFor` names none.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;

/// The longest timeout accepted (the host's deadline for a long-running operation is two hours).
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;

/// A resource's `waitFor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitFor {
    /// The condition type, e.g. `Available` or `Ready`.
    pub condition: String,
    /// The status the condition must have (`True`, `False` or `Unknown`; default `True`).
    #[serde(default = "default_status")]
    pub status: String,
    /// How long the resource may take.
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

fn default_status() -> String {
    "True".to_owned()
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_SECONDS
}

impl WaitFor {
    /// Parses the `waitFor` option (at `/properties/waitFor`).
    pub fn parse(value: Value, validator: &mut Validator) -> Option<WaitFor> {
        let target = "/properties/waitFor";
        let parsed: WaitFor = match serde_json::from_value(value) {
            Ok(parsed) => parsed,
            Err(_) => {
                validator.error(
                    k8s_codes::INVALID_PROPERTY,
                    target,
                    "'waitFor' must be { condition, status?, timeoutSeconds? } (status 'True', 'False' or \
                     'Unknown'; timeoutSeconds a whole number).",
                );
                return None;
            }
        };
        let mut ok = true;
        if parsed.condition.is_empty() || parsed.condition.len() > 316 {
            validator.error(
                k8s_codes::INVALID_PROPERTY,
                format!("{target}/condition"),
                "'waitFor.condition' must name a condition type such as 'Available' or 'Ready'.",
            );
            ok = false;
        }
        if !matches!(parsed.status.as_str(), "True" | "False" | "Unknown") {
            validator.error(
                k8s_codes::INVALID_PROPERTY,
                format!("{target}/status"),
                "'waitFor.status' must be 'True', 'False' or 'Unknown'.",
            );
            ok = false;
        }
        if parsed.timeout_seconds == 0 || parsed.timeout_seconds > MAX_TIMEOUT_SECONDS {
            validator.error(
                k8s_codes::INVALID_PROPERTY,
                format!("{target}/timeoutSeconds"),
                format!("'waitFor.timeoutSeconds' must be between 1 and {MAX_TIMEOUT_SECONDS}."),
            );
            ok = false;
        }
        ok.then_some(parsed)
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The `waitFor` an object keeps in its [`WAIT_FOR_ANNOTATION`], if any.
    pub fn of_object(object: &Value) -> Option<WaitFor> {
        let text = object
            .pointer("/metadata/annotations")?
            .get(WAIT_FOR_ANNOTATION)?
            .as_str()?;
        serde_json::from_str(text).ok()
    }

    /// The timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }
}

/// Whether an object is ready, and if not, what its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// The condition holds for the current generation.
    Ready,
    /// Not yet; the conditions as they are (or why they do not count yet).
    NotReady(String),
}

/// Judges `object` against `wait_for`: the condition must have the wanted status, and a controller must
/// have observed the object's current generation (so an old generation's `Available` does not count).
pub fn judge(object: &Value, wait_for: &WaitFor) -> Readiness {
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let observed = object
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let conditions = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let summary = summarise(&conditions);
    if let (Some(generation), Some(observed)) = (generation, observed)
        && observed < generation
    {
        return Readiness::NotReady(format!(
            "generation {generation} not observed yet (observed {observed}); {summary}"
        ));
    }
    let found = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(wait_for.condition.as_str()));
    match found {
        Some(condition)
            if condition.get("status").and_then(Value::as_str)
                == Some(wait_for.status.as_str()) =>
        {
            let stale = match (
                generation,
                condition.get("observedGeneration").and_then(Value::as_i64),
            ) {
                (Some(generation), Some(observed)) => observed < generation,
                _ => false,
            };
            if stale {
                Readiness::NotReady(format!(
                    "{} is {} for an older generation; {summary}",
                    wait_for.condition, wait_for.status
                ))
            } else {
                Readiness::Ready
            }
        }
        _ => Readiness::NotReady(summary),
    }
}

/// `Available=False (MinimumReplicasUnavailable: Deployment does not have minimum availability.); ...`
fn summarise(conditions: &[Value]) -> String {
    if conditions.is_empty() {
        return "no status conditions yet".to_owned();
    }
    conditions
        .iter()
        .map(|c| {
            let text = |key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default();
            let mut line = format!("{}={}", text("type"), text("status"));
            match (text("reason"), text("message")) {
                ("", "") => {}
                (reason, "") => line.push_str(&format!(" ({reason})")),
                ("", message) => line.push_str(&format!(" ({message})")),
                (reason, message) => line.push_str(&format!(" ({reason}: {message})")),
            }
            line
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The error of a resource that did not become ready in time.
pub fn timed_out(what: &str, wait_for: &WaitFor, conditions: &str) -> ExtensionError {
    ExtensionError::conflict(
        k8s_codes::READINESS_TIMEOUT,
        format!(
            "{what} was not {}={} within {} s: {conditions}.",
            wait_for.condition, wait_for.status, wait_for.timeout_seconds
        ),
    )
    .with_target("/properties/waitFor")
}

/// Deadlines of the readiness waits this process started, per object UID and generation.
static DEADLINES: LazyLock<Mutex<HashMap<(String, i64), Instant>>> = LazyLock::new(Mutex::default);

fn key(object: &Value) -> Option<(String, i64)> {
    let uid = object.pointer("/metadata/uid")?.as_str()?.to_owned();
    let generation = object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Some((uid, generation))
}

/// Remembers when the wait for `object` (as just applied) ends.
pub fn remember_deadline(object: &Value, deadline: Instant) {
    if let Some(key) = key(object) {
        let mut deadlines = DEADLINES.lock().unwrap_or_else(|p| p.into_inner());
        deadlines.retain(|_, at| at.elapsed() < Duration::from_secs(MAX_TIMEOUT_SECONDS));
        deadlines.insert(key, deadline);
    }
}

/// Whether the wait for `object` has passed its deadline: the remembered one, else `timeout` after
/// `field_manager` last changed the object (a process that did not apply it).
pub fn past_deadline(object: &Value, wait_for: &WaitFor, field_manager: &str) -> bool {
    if let Some(key) = key(object)
        && let Some(deadline) = DEADLINES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
    {
        return Instant::now() >= *deadline;
    }
    let applied_at = object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|entries| {
            entries.iter().find(|entry| {
                entry.get("manager").and_then(Value::as_str) == Some(field_manager)
                    && entry.get("operation").and_then(Value::as_str) == Some("Apply")
            })
        })
        .and_then(|entry| entry.get("time"))
        .and_then(Value::as_str)
        .and_then(|time| time.parse::<jiff::Timestamp>().ok());
    match applied_at {
        Some(at) => {
            let now = jiff::Timestamp::try_from(SystemTime::now()).unwrap_or(at);
            now.duration_since(at).as_secs() >= wait_for.timeout_seconds as i64
        }
        // Nothing tells when it started: judge by readiness alone until the host's own deadline.
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wait(condition: &str) -> WaitFor {
        WaitFor {
            condition: condition.into(),
            status: "True".into(),
            timeout_seconds: 60,
        }
    }

    #[test]
    fn conditions_count_only_for_the_current_generation() {
        let ready = json!({ "metadata": { "generation": 2 },
            "status": { "observedGeneration": 2, "conditions": [
                { "type": "Available", "status": "True", "reason": "MinimumReplicasAvailable" } ] } });
        assert_eq!(judge(&ready, &wait("Available")), Readiness::Ready);
        let old = json!({ "metadata": { "generation": 3 },
            "status": { "observedGeneration": 2, "conditions": [ { "type": "Available", "status": "True" } ] } });
        assert!(
            matches!(judge(&old, &wait("Available")), Readiness::NotReady(text) if text.contains("generation 3"))
        );
        let stale_condition = json!({ "metadata": { "generation": 3 },
            "status": { "conditions": [ { "type": "Ready", "status": "True", "observedGeneration": 1 } ] } });
        assert!(matches!(
            judge(&stale_condition, &wait("Ready")),
            Readiness::NotReady(_)
        ));
        let unavailable = json!({ "metadata": { "generation": 1 },
            "status": { "observedGeneration": 1, "conditions": [
                { "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                  "message": "Deployment does not have minimum availability." },
                { "type": "Progressing", "status": "True" } ] } });
        assert_eq!(
            judge(&unavailable, &wait("Available")),
            Readiness::NotReady(
                "Available=False (MinimumReplicasUnavailable: Deployment does not have minimum availability.); \
                 Progressing=True"
                    .into()
            )
        );
        assert_eq!(
            judge(&json!({ "metadata": {} }), &wait("Ready")),
            Readiness::NotReady("no status conditions yet".into())
        );
    }

    #[test]
    fn wait_for_parses_with_defaults_and_round_trips_through_the_annotation() {
        let mut validator = Validator::new();
        let parsed = WaitFor::parse(json!({ "condition": "Ready" }), &mut validator).unwrap();
        assert!(validator.is_empty());
        assert_eq!(
            (parsed.status.as_str(), parsed.timeout_seconds),
            ("True", DEFAULT_TIMEOUT_SECONDS)
        );
        let object = json!({ "metadata": { "annotations": { WAIT_FOR_ANNOTATION: parsed.to_annotation() } } });
        assert_eq!(WaitFor::of_object(&object), Some(parsed));
        for bad in [
            json!("Ready"),
            json!({ "condition": "" }),
            json!({ "condition": "Ready", "status": "Yes" }),
            json!({ "condition": "Ready", "timeoutSeconds": 0 }),
            json!({ "condition": "Ready", "timeoutSeconds": 99999 }),
            json!({ "condition": "Ready", "extra": 1 }),
        ] {
            let mut validator = Validator::new();
            assert!(
                WaitFor::parse(bad.clone(), &mut validator).is_none(),
                "{bad}"
            );
            assert!(!validator.is_empty(), "{bad}");
        }
    }

    #[test]
    fn deadlines_come_from_memory_or_from_the_last_apply() {
        let wait_for = wait("Available");
        let object = json!({ "metadata": { "uid": "u-1", "generation": 1, "managedFields": [
            { "manager": "cairn", "operation": "Apply", "time": "2000-01-01T00:00:00Z" } ] } });
        assert!(past_deadline(&object, &wait_for, "cairn"));
        remember_deadline(&object, Instant::now() + Duration::from_secs(60));
        assert!(!past_deadline(&object, &wait_for, "cairn"));
        let recent = json!({ "metadata": { "uid": "u-2", "managedFields": [
            { "manager": "cairn", "operation": "Apply", "time": jiff::Timestamp::now().to_string() } ] } });
        assert!(!past_deadline(&recent, &wait_for, "cairn"));
        assert!(!past_deadline(
            &json!({ "metadata": { "uid": "u-3" } }),
            &wait_for,
            "cairn"
        ));
    }
}
