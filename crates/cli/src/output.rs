//! What the resource commands (`group`, `deployment`, `keyvault`) print and how they exit: `-o json|table|none`
//! on stdout, ARM errors as JSON on stderr, and the exit codes (0 succeeded, 1 failed, 2 usage or validation).

use std::process::ExitCode;

use cairn_arm::{ArmError, ErrorDetail};
use clap::ValueEnum;
use serde_json::Value;

use crate::render::print_stdout;

/// `-o/--output`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The ARM response as pretty JSON (az's default).
    #[default]
    Json,
    /// A human-readable table of the main fields.
    Table,
    /// Nothing on stdout: scripts read the exit code.
    None,
}

/// Exit code: the deployment (or request) failed, or what was asked for does not exist.
pub(crate) const EXIT_FAILED: u8 = 1;
/// Exit code: bad command line, unreadable input, or a template or request the engine rejects as invalid.
pub(crate) const EXIT_USAGE: u8 = 2;

/// Why a command did not succeed, and so which exit code and message it ends with.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An ARM error from the engine or server: printed as `{"error": ...}` JSON on stderr. 400 (an invalid
    /// template, parameters or request) exits 2, anything else (not found, conflict, server failure) exits 1.
    Arm(ArmError),
    /// A usage problem the CLI found itself (unreadable file, missing flag): `error: ...`, exit 2.
    Usage(String),
    /// Diagnostics already printed (e.g. template syntax with positions): exit 2 without more output.
    Reported,
    /// Anything else (the store cannot open, the server cannot be reached): `error: ...`, exit 1.
    Other(anyhow::Error),
}

impl Failure {
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure::Usage(message.into())
    }

    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::Arm(e) if e.status() == 400 => EXIT_USAGE,
            Failure::Arm(_) | Failure::Other(_) => EXIT_FAILED,
            Failure::Usage(_) | Failure::Reported => EXIT_USAGE,
        }
    }

    /// Prints the failure on stderr and returns the exit code.
    pub(crate) fn report(self) -> ExitCode {
        let code = self.exit_code();
        match self {
            Failure::Arm(e) => print_error_json(e.detail()),
            Failure::Usage(message) => eprintln!("error: {message}"),
            Failure::Reported => {}
            Failure::Other(e) => eprintln!("error: {e:#}"),
        }
        ExitCode::from(code)
    }
}

impl From<ArmError> for Failure {
    fn from(e: ArmError) -> Self {
        Failure::Arm(e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl From<cairn_engine::EngineError> for Failure {
    fn from(e: cairn_engine::EngineError) -> Self {
        Failure::Arm(e.to_arm())
    }
}

/// The store cannot open is a failure of the command's environment (exit 1), a store URL a usage error (exit 2),
/// an engine that refuses its settings its ARM error.
impl From<cairn_assembly::AssemblyError> for Failure {
    fn from(e: cairn_assembly::AssemblyError) -> Self {
        match e {
            cairn_assembly::AssemblyError::Engine(e) => e.into(),
            e @ cairn_assembly::AssemblyError::UnsupportedStore { .. } => {
                Failure::Usage(e.to_string())
            }
            e => Failure::Other(e.into()),
        }
    }
}

impl From<cairn_store::StoreError> for Failure {
    fn from(e: cairn_store::StoreError) -> Self {
        Failure::Arm(cairn_engine::EngineError::Store(e).to_arm())
    }
}

pub(crate) type CmdResult<T = ExitCode> = Result<T, Failure>;

/// ARM's error body, `{"error": {code, message, target?, details?}}`, pretty-printed on stderr.
pub(crate) fn print_error_json(detail: &ErrorDetail) {
    let body = serde_json::json!({ "error": detail });
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&body).unwrap_or_else(|_| body.to_string())
    );
}

/// Prints `value` in `format`; `table` uses `columns` (header, JSON pointer) over `rows`.
pub(crate) fn emit(
    format: Format,
    value: &Value,
    rows: &[Value],
    columns: &[(&str, &str)],
) -> CmdResult<()> {
    let text = match format {
        Format::None => return Ok(()),
        Format::Json => serde_json::to_string_pretty(value).map_err(anyhow::Error::from)?,
        Format::Table => table(rows, columns),
    };
    print_stdout(&text).map_err(|e| Failure::Other(e.into()))
}

/// Prints one object: `json` as is, `table` as a one-row table.
pub(crate) fn emit_one(format: Format, value: &Value, columns: &[(&str, &str)]) -> CmdResult<()> {
    emit(format, value, std::slice::from_ref(value), columns)
}

/// Prints a list: `json` as an array, `table` one row per item.
pub(crate) fn emit_list(
    format: Format,
    items: &[Value],
    columns: &[(&str, &str)],
) -> CmdResult<()> {
    emit(format, &Value::Array(items.to_vec()), items, columns)
}

/// A plain text table: a header row, a dashed rule, then one row per item, columns padded to their widest cell.
pub(crate) fn table(rows: &[Value], columns: &[(&str, &str)]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|(_, pointer)| cell(row.pointer(pointer)))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([header.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: Vec<String>| -> String {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![
        line(columns.iter().map(|(h, _)| h.to_string()).collect()),
        line(widths.iter().map(|w| "-".repeat(*w)).collect()),
    ];
    out.extend(cells.into_iter().map(line));
    out.join("\n")
}

fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let rows = [
            json!({"name": "a", "properties": {"state": "Succeeded"}}),
            json!({"name": "longer", "properties": {}}),
        ];
        let text = table(&rows, &[("Name", "/name"), ("State", "/properties/state")]);
        assert_eq!(
            text,
            "Name    State\n------  ---------\na       Succeeded\nlonger"
        );
    }

    #[test]
    fn exit_codes_follow_the_error_class() {
        assert_eq!(
            Failure::Arm(ArmError::new(400, "InvalidTemplate", "x")).exit_code(),
            2
        );
        assert_eq!(
            Failure::Arm(ArmError::deployment_not_found("d")).exit_code(),
            1
        );
        assert_eq!(Failure::usage("x").exit_code(), 2);
        assert_eq!(Failure::Other(anyhow::anyhow!("x")).exit_code(), 1);
    }
}
