//! ARM templates and parameter files: model, validation and expansion into a deployment plan.

pub mod diagnostics;
pub mod types;

pub use diagnostics::{Diagnostic, Severity, SourceFile, join_index, join_path};
