//! What commands print and how they exit: the result on stdout in az's formats (`-o json|jsonc|yaml|table|tsv|none`,
//! after `--query`), ARM errors as JSON on stderr, and the exit codes (0 succeeded, 1 failed, 2 usage or
//! validation).
//!
//! `table` and `tsv` are rendered as az (knack) renders them: a command's own columns when it has them and no
//! `--query` is given, else az's automatic table (the scalar fields of an object, or of each object of a list;
//! `id`, `type` and `etag` left out; headers capitalised; every cell left-aligned, a column at least two wider than
//! its header); `tsv` prints one line per item (or the one result), values tab-separated without headers, nested
//! lists as their length and nested objects as nothing. Commands whose table lists rows derived from the result
//! (what-if changes, deployment operations) print those rows' cells as their `tsv` too.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use cairn_arm::{ArmError, ErrorDetail};
use clap::{Args, ValueEnum};
use serde_json::Value;

use crate::query::Query;
use crate::render::print_stdout;

/// `-o/--output`: az's formats (`yamlc` aside). Values match ignoring case.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The result as pretty JSON (az's default).
    #[default]
    Json,
    /// JSON coloured for a terminal (plain JSON when stdout is not one, or NO_COLOR is set).
    Jsonc,
    /// The result as YAML.
    Yaml,
    /// A table of the main fields (with --query, of the scalar fields of the result).
    Table,
    /// Tab-separated values, one line per item, no headers: for `read` and `cut` in scripts.
    Tsv,
    /// Nothing on stdout: scripts read the exit code.
    None,
}

/// `-o` and `--query`, flattened into every command that prints a result.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct OutputArgs {
    /// Output format [default: json].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    pub(crate) output: Option<Format>,
    /// JMESPath query applied to the result before it is printed, e.g. `properties.outputs` or
    /// `[].{name:name, state:properties.provisioningState}`.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    pub(crate) query: Option<Query>,
}

/// How `-o table` shows a result when no `--query` is given (az's table transformer of the command).
pub(crate) enum TableView<'a> {
    /// az's automatic table over the result.
    Auto,
    /// These columns (header, JSON pointer) over the result: one row, or one per item of a list.
    Columns(&'a [(&'a str, &'a str)]),
    /// These columns over rows derived from the result; `-o tsv` lists the same rows (a missing cell is `None`).
    Rows(Vec<Value>, &'a [(&'a str, &'a str)]),
}

impl OutputArgs {
    /// The format asked for, else `default`.
    pub(crate) fn format_or(&self, default: Format) -> Format {
        self.output.unwrap_or(default)
    }

    /// Prints `value` (its `--query` part) in the format asked for, else `default`.
    pub(crate) fn print(
        &self,
        default: Format,
        value: &Value,
        view: TableView<'_>,
    ) -> CmdResult<()> {
        let color = color_stdout();
        match render(
            self.format_or(default),
            self.query.as_ref(),
            value,
            view,
            color,
        )? {
            Some(text) => print_stdout(&text).map_err(|e| Failure::Other(e.into())),
            None => Ok(()),
        }
    }
}

/// Colour on stdout: a terminal, and `NO_COLOR` unset or empty.
pub(crate) fn color_stdout() -> bool {
    color_enabled(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// Colour on stderr (plans and progress shown there): a terminal, and `NO_COLOR` unset or empty.
pub(crate) fn color_stderr() -> bool {
    color_enabled(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// Colour for a stream that is (or is not) a terminal, given `NO_COLOR` (no-color.org: any non-empty value
/// turns colour off).
fn color_enabled(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The text `format` prints for `value` after `query` (without the final newline), or `None` when nothing is
/// printed: `-o none`, or a query that selects nothing (az prints nothing then).
pub(crate) fn render(
    format: Format,
    query: Option<&Query>,
    value: &Value,
    view: TableView<'_>,
    color: bool,
) -> CmdResult<Option<String>> {
    if format == Format::None {
        return Ok(None);
    }
    let queried;
    let (value, view, sort_keys) = match query {
        Some(query) => {
            queried = query.apply(value).map_err(Failure::Usage)?;
            // az drops the command's table transformer once a query shapes the result.
            (&queried, TableView::Auto, false)
        }
        None => (value, view, true),
    };
    if query.is_some() && value.is_null() {
        return Ok(None);
    }
    let text = match format {
        Format::None => return Ok(None),
        Format::Json => pretty_json(value)?,
        Format::Jsonc if color => colored_json(value),
        Format::Jsonc => pretty_json(value)?,
        Format::Yaml => yaml_serde::to_string(value)
            .map_err(|e| Failure::Other(e.into()))?
            .trim_end()
            .to_string(),
        Format::Table => match view {
            TableView::Auto => auto_table(value, sort_keys)?,
            TableView::Columns(columns) => match value {
                Value::Array(items) => table(items.as_slice(), columns),
                one => table(std::slice::from_ref(one), columns),
            },
            TableView::Rows(rows, columns) => table(&rows, columns),
        },
        // Rows a command derives from its result (what-if changes, operations) are what its tsv lists too.
        Format::Tsv => match view {
            TableView::Rows(rows, columns) => {
                let projected: Vec<Value> = rows
                    .iter()
                    .map(|row| {
                        Value::Array(
                            columns
                                .iter()
                                .map(|(_, pointer)| {
                                    row.pointer(pointer).cloned().unwrap_or(Value::Null)
                                })
                                .collect(),
                        )
                    })
                    .collect();
                tsv(&Value::Array(projected), false)?
            }
            _ => tsv(value, sort_keys)?,
        },
    };
    // An empty list prints nothing in a table or tsv, as az prints it: no header over no rows.
    if text.is_empty() && matches!(format, Format::Table | Format::Tsv) {
        return Ok(None);
    }
    Ok(Some(text))
}

fn pretty_json(value: &Value) -> CmdResult<String> {
    serde_json::to_string_pretty(value).map_err(|e| Failure::Other(e.into()))
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
            Failure::Arm(e) => {
                print_error_json(e.detail());
                if let Some(hint) = hint(e.detail()) {
                    eprintln!("{hint}");
                }
            }
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

/// What to do about an error, when the CLI knows: a missing resource group is created with `cairn group create`.
fn hint(error: &ErrorDetail) -> Option<String> {
    if error.code() != "ResourceGroupNotFound" {
        return None;
    }
    // "Resource group 'NAME' could not be found."
    let name = error
        .message()
        .split('\'')
        .nth(1)
        .filter(|n| !n.is_empty())?;
    Some(format!(
        "hint: create the resource group first: cairn group create -n {name} -l local"
    ))
}

/// ARM's error body, `{"error": {code, message, target?, details?}}`, pretty-printed on stderr.
pub(crate) fn print_error_json(detail: &ErrorDetail) {
    let body = serde_json::json!({ "error": detail });
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&body).unwrap_or_else(|_| body.to_string())
    );
}

/// A plain text table as az's (tabulate's `simple`): a header row, a dashed rule, then one row per item; every
/// cell left-aligned, a column as wide as its widest cell and at least two wider than its header; trailing spaces
/// trimmed.
pub(crate) fn table(rows: &[Value], columns: &[(&str, &str)]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let headers: Vec<String> = columns.iter().map(|(h, _)| h.to_string()).collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|(_, pointer)| cell(row.pointer(pointer)))
                .collect()
        })
        .collect();
    layout(&headers, &cells)
}

fn layout(headers: &[String], cells: &[Vec<String>]) -> String {
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, header)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .chain([header.chars().count() + 2])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |values: &[String]| -> String {
        let padded: Vec<String> = values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![
        line(headers),
        line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>()),
    ];
    out.extend(cells.iter().map(|row| line(row)));
    out.join("\n")
}

/// A table cell as az shows it: strings as they are, `True`/`False`, numbers as written, containers as JSON.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(true)) => "True".to_string(),
        Some(Value::Bool(false)) => "False".to_string(),
        Some(other) => other.to_string(),
    }
}

/// Keys az's automatic table leaves out.
const TABLE_SKIP_KEYS: [&str; 3] = ["id", "type", "etag"];

/// az's automatic table: one row per item of a list (or the one result); an object gives its non-null scalar
/// fields (keys sorted unless a query ordered them), a list `Column1`, `Column2`, ..., a scalar `Result`. Headers
/// are the keys with a capital first letter, in order of first appearance. A result with no such field cannot be a
/// table (az says the same).
fn auto_table(value: &Value, sort_keys: bool) -> CmdResult<String> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    if items.is_empty() {
        return Ok(String::new());
    }
    let entries: Vec<Vec<(String, &Value)>> = items
        .iter()
        .map(|item| match item {
            Value::Object(map) => {
                let mut fields: Vec<(&String, &Value)> = map
                    .iter()
                    .filter(|(k, v)| {
                        !TABLE_SKIP_KEYS.contains(&k.as_str())
                            && !matches!(v, Value::Null | Value::Array(_) | Value::Object(_))
                    })
                    .collect();
                if sort_keys {
                    fields.sort_by(|a, b| a.0.cmp(b.0));
                }
                fields
                    .into_iter()
                    .map(|(k, v)| (capitalize(k), v))
                    .collect()
            }
            Value::Array(values) => values
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("Column{}", i + 1), v))
                .collect(),
            scalar => vec![("Result".to_string(), scalar)],
        })
        .collect();
    let mut headers: Vec<String> = Vec::new();
    for (key, _) in entries.iter().flatten() {
        if !headers.contains(key) {
            headers.push(key.clone());
        }
    }
    if headers.is_empty() {
        return Err(Failure::usage(
            "table output unavailable: the result has no scalar fields; use --query to select some, e.g. \
             --query \"[].{name:name}\"",
        ));
    }
    let cells: Vec<Vec<String>> = entries
        .iter()
        .map(|row| {
            headers
                .iter()
                .map(|h| cell(row.iter().find(|(k, _)| k == h).map(|(_, v)| *v)))
                .collect()
        })
        .collect();
    Ok(layout(&headers, &cells))
}

fn capitalize(key: &str) -> String {
    let mut chars = key.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// az's tsv: one line per item of a list (or for the one result). An object's values (sorted by key unless a
/// query ordered them) or a list's values, tab-separated; a nested list is its length, a nested object nothing,
/// `null` is `None`; a boolean line is `true`/`false`, a boolean value `True`/`False`. A result whose every value
/// is an object would be lines of tabs alone (`--query properties.outputs`): refused, naming the fix, as a table of
/// no scalar fields is.
fn tsv(value: &Value, sort_keys: bool) -> CmdResult<String> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        one => std::slice::from_ref(one),
    };
    let tsv_value = |v: &Value| match v {
        Value::Array(values) => values.len().to_string(),
        Value::Object(_) => String::new(),
        Value::Null => "None".to_string(),
        other => cell(Some(other)),
    };
    let lines: Vec<String> = items
        .iter()
        .map(|item| match item {
            Value::Object(map) => {
                let mut fields: Vec<(&String, &Value)> = map.iter().collect();
                if sort_keys {
                    fields.sort_by(|a, b| a.0.cmp(b.0));
                }
                fields
                    .into_iter()
                    .map(|(_, v)| tsv_value(v))
                    .collect::<Vec<_>>()
                    .join("\t")
            }
            Value::Array(values) => values.iter().map(tsv_value).collect::<Vec<_>>().join("\t"),
            Value::Bool(b) => b.to_string(),
            scalar => tsv_value(scalar),
        })
        .collect();
    let only_tabs = |line: &String| line.contains('\t') && line.chars().all(|c| c == '\t');
    if !lines.is_empty() && lines.iter().all(only_tabs) {
        return Err(Failure::usage(
            "tsv output unavailable: the result's values are objects, which tsv leaves empty; use --query to \
             select scalars, e.g. --query \"*.value\" or --query \"[].{name:name}\"",
        ));
    }
    Ok(lines.join("\n"))
}

/// ANSI colours of `jsonc` (keys, strings, numbers, `true`/`false`/`null`).
const KEY: &str = "\x1b[94m";
const STRING: &str = "\x1b[32m";
const NUMBER: &str = "\x1b[36m";
const LITERAL: &str = "\x1b[35m";
const RESET: &str = "\x1b[0m";

/// Pretty JSON laid out as `serde_json::to_string_pretty` lays it out, with colours.
fn colored_json(value: &Value) -> String {
    fn string(s: &str) -> String {
        serde_json::to_string(s).unwrap_or_default()
    }
    fn write(value: &Value, indent: usize, out: &mut String) {
        let pad = "  ".repeat(indent + 1);
        let close = "  ".repeat(indent);
        match value {
            Value::Null | Value::Bool(_) => out.push_str(&format!("{LITERAL}{value}{RESET}")),
            Value::Number(n) => out.push_str(&format!("{NUMBER}{n}{RESET}")),
            Value::String(s) => out.push_str(&format!("{STRING}{}{RESET}", string(s))),
            Value::Array(items) if items.is_empty() => out.push_str("[]"),
            Value::Object(map) if map.is_empty() => out.push_str("{}"),
            Value::Array(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad);
                    write(item, indent + 1, out);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&close);
                out.push(']');
            }
            Value::Object(map) => {
                out.push_str("{\n");
                for (i, (key, item)) in map.iter().enumerate() {
                    out.push_str(&format!("{pad}{KEY}{}{RESET}: ", string(key)));
                    write(item, indent + 1, out);
                    out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
                }
                out.push_str(&close);
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    write(value, 0, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_pad_columns_as_az_does() {
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

    /// Two deployments as `deployment group list` returns them (shortened).
    fn deployments() -> Value {
        json!([
            {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/web",
             "name": "web", "type": "Microsoft.Resources/deployments",
             "properties": {"provisioningState": "Succeeded", "mode": "Incremental", "duration": "PT1.5S",
                            "outputs": {"url": {"type": "String", "value": "http://web"}},
                            "outputResources": [{"id": "a"}, {"id": "b"}]},
             "tags": {"env": "dev"}, "retries": 2, "pinned": true},
            {"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/db",
             "name": "db", "type": "Microsoft.Resources/deployments",
             "properties": {"provisioningState": "Failed", "mode": "Incremental", "duration": "PT12S",
                            "outputResources": []},
             "retries": null, "pinned": false}
        ])
    }

    fn rendered(format: Format, query: Option<&str>, view: TableView<'_>) -> String {
        let query = query.map(|q| Query::parse(q).unwrap());
        render(format, query.as_ref(), &deployments(), view, false)
            .unwrap()
            .unwrap_or_default()
    }

    const COLUMNS: &[(&str, &str)] = &[
        ("Name", "/name"),
        ("State", "/properties/provisioningState"),
        ("Duration", "/properties/duration"),
    ];

    #[test]
    fn table_with_the_command_columns() {
        insta::assert_snapshot!(rendered(Format::Table, None, TableView::Columns(COLUMNS)));
    }

    #[test]
    fn table_of_a_query_is_az_automatic_table() {
        // The command's columns give way to the query's shape; keys in the order the query writes them.
        insta::assert_snapshot!(rendered(
            Format::Table,
            Some(
                "[].{state: properties.provisioningState, name: name, resources: length(properties.outputResources)}"
            ),
            TableView::Columns(COLUMNS),
        ));
    }

    #[test]
    fn automatic_table_keeps_scalar_fields_sorted() {
        // id, type and nested values are left out; null cells are empty.
        insta::assert_snapshot!(rendered(Format::Table, None, TableView::Auto));
    }

    #[test]
    fn tsv_of_a_query_in_the_order_written() {
        insta::assert_snapshot!(rendered(
            Format::Tsv,
            Some("[].{name: name, state: properties.provisioningState, pinned: pinned}"),
            TableView::Auto,
        ));
    }

    #[test]
    fn tsv_of_whole_objects_sorts_keys_and_counts_lists() {
        insta::assert_snapshot!(rendered(
            Format::Tsv,
            Some("[].properties"),
            TableView::Auto
        ));
        insta::assert_snapshot!(
            "tsv_without_query",
            rendered(Format::Tsv, None, TableView::Columns(COLUMNS))
        );
    }

    /// An empty list is no table (no header over no rows) and no tsv; an object of objects is no tsv line of tabs.
    #[test]
    fn empty_tables_print_nothing_and_objects_of_objects_no_tabs() {
        for format in [Format::Table, Format::Tsv] {
            for view in [TableView::Auto, TableView::Columns(COLUMNS)] {
                let text = render(format, None, &json!([]), view, false).unwrap();
                assert_eq!(text, None, "{format:?}");
            }
        }
        let outputs = json!({"indexPath": {"type": "String", "value": "hello/index.html"},
                             "notesPath": {"type": "String", "value": "hello/notes.txt"}});
        let refused = render(Format::Tsv, None, &outputs, TableView::Auto, false);
        assert!(
            matches!(&refused, Err(Failure::Usage(message)) if message.contains("--query")),
            "{:?}",
            refused.map(|_| ())
        );
        let query = Query::parse("*.value").unwrap();
        assert_eq!(
            render(Format::Tsv, Some(&query), &outputs, TableView::Auto, false).unwrap(),
            Some("hello/index.html\nhello/notes.txt".to_owned())
        );
    }

    #[test]
    fn tsv_of_scalars_is_one_value_per_line() {
        assert_eq!(
            rendered(Format::Tsv, Some("[].name"), TableView::Auto),
            "web\ndb"
        );
        assert_eq!(
            rendered(Format::Tsv, Some("[0].pinned"), TableView::Auto),
            "true"
        );
        assert_eq!(
            rendered(Format::Tsv, Some("length(@)"), TableView::Auto),
            "2"
        );
    }

    #[test]
    fn yaml_keeps_the_result_order() {
        // A query's objects come out with their keys sorted (as az prints them); without one, as ARM wrote them.
        insta::assert_snapshot!(rendered(Format::Yaml, None, TableView::Auto));
        insta::assert_snapshot!(
            "yaml_of_a_query",
            rendered(Format::Yaml, Some("[1].properties"), TableView::Auto)
        );
    }

    #[test]
    fn jsonc_is_coloured_json_on_a_terminal_only() {
        let value = deployments();
        let plain = render(Format::Jsonc, None, &value, TableView::Auto, false)
            .unwrap()
            .unwrap();
        assert_eq!(plain, serde_json::to_string_pretty(&value).unwrap());
        let colored = render(Format::Jsonc, None, &value, TableView::Auto, true)
            .unwrap()
            .unwrap();
        assert!(colored.contains(&format!("{KEY}\"name\"{RESET}: {STRING}\"web\"{RESET}")));
        assert!(colored.contains(&format!("{LITERAL}true{RESET}")));
        assert!(colored.contains(&format!("{NUMBER}2{RESET}")));
        let stripped = colored
            .replace(KEY, "")
            .replace(STRING, "")
            .replace(NUMBER, "")
            .replace(LITERAL, "")
            .replace(RESET, "");
        assert_eq!(stripped, plain);
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(color_enabled(true, None));
        assert!(color_enabled(true, Some(std::ffi::OsStr::new(""))));
        assert!(!color_enabled(true, Some(std::ffi::OsStr::new("1"))));
        assert!(!color_enabled(false, None));
    }

    #[test]
    fn none_and_empty_queries_print_nothing() {
        assert_eq!(
            render(Format::None, None, &deployments(), TableView::Auto, false).unwrap(),
            None
        );
        let missing = Query::parse("[0].properties.missing").unwrap();
        assert_eq!(
            render(
                Format::Json,
                Some(&missing),
                &deployments(),
                TableView::Auto,
                false
            )
            .unwrap(),
            None
        );
    }

    #[test]
    fn a_result_without_scalars_cannot_be_a_table() {
        let nested = json!([{"properties": {"a": 1}}]);
        let error = render(Format::Table, None, &nested, TableView::Auto, false).unwrap_err();
        assert!(matches!(error, Failure::Usage(m) if m.contains("--query")));
        // An empty list prints nothing at all (not even an empty line).
        assert_eq!(
            render(Format::Table, None, &json!([]), TableView::Auto, false).unwrap(),
            None
        );
    }

    #[test]
    fn formats_match_ignoring_case() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            out: OutputArgs,
        }
        for (text, format) in [
            ("JSON", Format::Json),
            ("Table", Format::Table),
            ("tSv", Format::Tsv),
        ] {
            let cli = <Cli as clap::Parser>::try_parse_from(["x", "-o", text]).unwrap();
            assert_eq!(cli.out.output, Some(format));
        }
        let bad = <Cli as clap::Parser>::try_parse_from(["x", "--query", "a.["]);
        assert!(bad.is_err());
    }

    #[test]
    fn a_missing_resource_group_suggests_creating_it() {
        let missing = ArmError::resource_group_not_found("app");
        assert_eq!(
            hint(missing.detail()).as_deref(),
            Some("hint: create the resource group first: cairn group create -n app -l local")
        );
        assert_eq!(hint(ArmError::deployment_not_found("d").detail()), None);
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
