//! The contract's `OperationStatus`: an open string whose terminal values are `Succeeded`, `Failed` and `Canceled`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Progress of a resource (RELO) or a long-running operation.
///
/// The set of values is open: anything other than the three terminal values (compared exactly,
/// case-sensitively) is non-terminal, e.g. `"Running"`, `"Deleting"`, `"Accepted"`. A resource without a
/// status is treated as [`OperationStatus::succeeded`] (see [`OperationStatus::or_succeeded`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationStatus(String);

impl OperationStatus {
    /// Terminal: the operation finished successfully.
    pub const SUCCEEDED: &'static str = "Succeeded";
    /// Terminal: the operation failed; an `error` must accompany it.
    pub const FAILED: &'static str = "Failed";
    /// Terminal: the operation was canceled; an `error` must accompany it.
    pub const CANCELED: &'static str = "Canceled";

    /// Wraps any status string.
    pub fn new(status: impl Into<String>) -> Self {
        Self(status.into())
    }

    /// `Succeeded`.
    pub fn succeeded() -> Self {
        Self(Self::SUCCEEDED.to_owned())
    }

    /// `Failed`.
    pub fn failed() -> Self {
        Self(Self::FAILED.to_owned())
    }

    /// `Canceled`.
    pub fn canceled() -> Self {
        Self(Self::CANCELED.to_owned())
    }

    /// `Running`, the usual non-terminal value.
    pub fn running() -> Self {
        Self("Running".to_owned())
    }

    /// The status of an optional field, where a missing status means `Succeeded`.
    pub fn or_succeeded(status: Option<&OperationStatus>) -> OperationStatus {
        status.cloned().unwrap_or_else(Self::succeeded)
    }

    /// The raw string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `Succeeded`, `Failed` or `Canceled`.
    pub fn is_terminal(&self) -> bool {
        self.is_succeeded() || self.is_failed() || self.is_canceled()
    }

    /// Exactly `Succeeded`.
    pub fn is_succeeded(&self) -> bool {
        self.0 == Self::SUCCEEDED
    }

    /// Exactly `Failed`.
    pub fn is_failed(&self) -> bool {
        self.0 == Self::FAILED
    }

    /// Exactly `Canceled`.
    pub fn is_canceled(&self) -> bool {
        self.0 == Self::CANCELED
    }

    /// `Failed` or `Canceled`: terminal states that require an `error`.
    pub fn requires_error(&self) -> bool {
        self.is_failed() || self.is_canceled()
    }
}

impl fmt::Display for OperationStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for OperationStatus {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_values_are_exact() {
        let cases = [
            ("Succeeded", true),
            ("Failed", true),
            ("Canceled", true),
            ("succeeded", false),
            ("Cancelled", false),
            ("Running", false),
            ("Deleting", false),
            ("", false),
        ];
        for (status, terminal) in cases {
            assert_eq!(
                OperationStatus::new(status).is_terminal(),
                terminal,
                "{status}"
            );
        }
    }

    #[test]
    fn missing_status_is_succeeded() {
        assert!(OperationStatus::or_succeeded(None).is_succeeded());
        assert!(!OperationStatus::or_succeeded(Some(&OperationStatus::running())).is_terminal());
    }

    #[test]
    fn serializes_as_plain_string() {
        let json = serde_json::to_string(&OperationStatus::new("Deleting")).unwrap();
        assert_eq!(json, "\"Deleting\"");
    }
}
