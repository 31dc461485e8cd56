//! Stacks-mode validation of extension configs (REP 0006, seeds 000 and 002): rule `stacks-extensibility-compat`.
//!
//! For every extension config in a deployment tree — the parameters file's `extensionConfigs`, each nested
//! deployment's `properties.extensionConfigs`, and declarations' own config (v1 `imports`, v2 `defaultValue`) — the
//! linter traces where each value comes from (literals, parameters secure or not, variables, every reachable `if`
//! branch, `createObject`/`union`/`json`, user-defined functions, lambdas, `extensions()`/`extensionConfigs()`
//! inheritance, `reference()` and `list*()` outputs, Key Vault references) and applies seed 000's two tables:
//!
//! - inside `auth` and any property the extension declares secure, only Key Vault references and `list*` outputs
//!   (or a secure inherited property) are allowed;
//! - elsewhere, no secure parameters, Key Vault references or `list*` outputs.
//!
//! Shape-deciding parts (property names, constant `if` conditions) are evaluated with runtime functions replaced
//! by sentinels, so names and required properties are checked before anything deploys.
//!
//! The crate is pure: the caller passes the file texts and gets [`Diagnostic`]s with JSON path, line and column.

mod check;
pub mod glob;
mod origin;
mod partial;
pub mod rules;
mod trace;

use std::cell::RefCell;
use std::rc::Rc;

use cairn_template::{Diagnostic, ParametersFile, Severity, SourceFile, Template};

pub use rules::{Level, Mode, RULE_CODE, Rules, RulesError};

use crate::check::Checker;
use crate::origin::FileKind;
use crate::trace::{Scope, Tracer};

/// What to lint.
pub struct LintInput<'a> {
    /// The ARM JSON template (its `name` is shown in diagnostics).
    pub template: &'a SourceFile,
    /// The parameters file, if any: its `extensionConfigs` configure the root deployment.
    pub parameters: Option<&'a SourceFile>,
    pub rules: &'a Rules,
    pub mode: Mode,
    /// Directory the rules file's globs are relative to: a file name starting with it is matched without it.
    pub rules_base: Option<&'a str>,
}

/// Lints a template (and parameters file). Findings carry code [`RULE_CODE`], a severity from the rules file
/// (default: error for [`Mode::Stacks`], warning otherwise), the JSON path, and line and column. A file that is not
/// JSON gives one `InvalidTemplate`/`InvalidParameterFile` error instead.
pub fn lint(input: &LintInput<'_>) -> Vec<Diagnostic> {
    let template_root = match cairn_json::parse(&input.template.text) {
        Ok(root) => root,
        Err(e) => {
            return vec![
                input.template.locate(
                    Diagnostic::error(
                        "InvalidTemplate",
                        format!("The template is not valid JSON: {e}."),
                        "",
                    )
                    .with_span(e.span),
                ),
            ];
        }
    };
    let parameters_root = match input.parameters.map(|p| cairn_json::parse(&p.text)) {
        None => None,
        Some(Ok(root)) => Some(root),
        Some(Err(e)) => {
            let source = input.parameters.unwrap_or(input.template);
            return vec![
                source.locate(
                    Diagnostic::error(
                        "InvalidParameterFile",
                        format!("The parameters file is not valid JSON: {e}."),
                        "",
                    )
                    .with_span(e.span),
                ),
            ];
        }
    };
    let (template, _) = Template::parse(template_root);
    let parameter_values = parameters_root
        .as_ref()
        .map(|root| {
            ParametersFile::parse(root)
                .0
                .parameters
                .into_iter()
                .map(|p| (p.name, p.value))
                .collect()
        })
        .unwrap_or_default();

    let mut tracer = Tracer::new(
        &input.template.text,
        input.parameters.map(|p| p.text.as_str()),
    );
    tracer.scopes.push(Scope::new(
        Rc::new(template),
        None,
        0,
        String::new(),
        Rc::new(parameter_values),
    ));
    let mut checker = Checker {
        tracer,
        rules: input.rules,
        findings: RefCell::new(Vec::new()),
    };
    match &parameters_root {
        Some(root) => checker.check_parameters_file(root),
        None => checker.check_root_without_parameters(),
    }
    checker.check_scope(0, 0);

    let mut out: Vec<Diagnostic> = Vec::new();
    for finding in checker.findings.into_inner() {
        let source = match finding.file {
            FileKind::Template => input.template,
            FileKind::Parameters => input.parameters.unwrap_or(input.template),
        };
        let level = input
            .rules
            .level_for(&rule_path(&source.name, input.rules_base), input.mode);
        let severity = match level {
            Level::Off => continue,
            Level::Info => Severity::Info,
            Level::Warning => Severity::Warning,
            Level::Error => Severity::Error,
        };
        let mut d = Diagnostic::error(RULE_CODE, finding.message, finding.target);
        d.severity = severity;
        if let Some(span) = finding.span {
            d = d.with_span(span);
        }
        out.push(source.locate(d));
    }
    out.sort_by(|a, b| {
        (a.file.as_deref(), a.line, a.column, &a.target).cmp(&(
            b.file.as_deref(),
            b.line,
            b.column,
            &b.target,
        ))
    });
    out
}

/// The file name as the rules file's globs see it.
fn rule_path(name: &str, base: Option<&str>) -> String {
    let normalized = name.replace('\\', "/");
    match base.map(|b| b.replace('\\', "/")) {
        Some(base) if !base.is_empty() => {
            let base = base.trim_end_matches('/');
            normalized
                .strip_prefix(base)
                .and_then(|rest| rest.strip_prefix('/'))
                .map(str::to_string)
                .unwrap_or(normalized)
        }
        _ => normalized,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_paths() {
        assert_eq!(
            rule_path("cfg/modules/a.json", Some("cfg")),
            "modules/a.json"
        );
        assert_eq!(
            rule_path("cfg/modules/a.json", Some("cfg/")),
            "modules/a.json"
        );
        assert_eq!(rule_path("other/a.json", Some("cfg")), "other/a.json");
        assert_eq!(rule_path("a.json", None), "a.json");
    }

    #[test]
    fn bad_json_is_one_error() {
        let template = SourceFile::new("main.json", "{ nope");
        let rules = Rules::default();
        let diags = lint(&LintInput {
            template: &template,
            parameters: None,
            rules: &rules,
            mode: Mode::Stacks,
            rules_base: None,
        });
        assert_eq!(diags.len(), 1);
        assert_eq!(diags[0].code, "InvalidTemplate");
        assert!(diags[0].line.is_some());
    }
}
