//! Data-driven tests: one directory per case under `tests/cases/` with `main.json`, an optional `params.json` and
//! `expected.json` (`{ "seedRow", "findings": [ { "target", "message", "severity", "file"? } ], "rules"?,
//! "standardSeverity"? }`). Every case runs twice: as a stack deployment (the expected findings, as written) and as
//! an ordinary deployment (seed 000's "non-stack" column: the same findings, none of them an error).

use std::path::{Path, PathBuf};

use cairn_stacks_lint::{LintInput, Mode, RULE_CODE, Rules, lint};
use cairn_template::{Diagnostic, Severity, SourceFile};
use serde_json::Value;

fn cases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases")
}

struct Expected {
    target: String,
    message: String,
    severity: String,
    file: String,
}

fn severity_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

fn run_case(dir: &Path) -> Result<(), String> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name));
    let template = SourceFile::new(
        "main.json",
        read("main.json").map_err(|e| format!("main.json: {e}"))?,
    );
    let parameters = read("params.json")
        .ok()
        .map(|text| SourceFile::new("params.json", text));
    let expected: Value =
        serde_json::from_str(&read("expected.json").map_err(|e| format!("expected.json: {e}"))?)
            .map_err(|e| format!("expected.json: {e}"))?;
    let rules = match expected.get("rules") {
        Some(r) => Rules::parse(&r.to_string()).map_err(|e| format!("rules: {e}"))?,
        None => Rules::default(),
    };
    let findings: Vec<Expected> = expected["findings"]
        .as_array()
        .ok_or("expected.json needs 'findings'")?
        .iter()
        .map(|f| Expected {
            target: f["target"].as_str().unwrap_or_default().to_string(),
            message: f["message"].as_str().unwrap_or_default().to_string(),
            severity: f["severity"].as_str().unwrap_or("error").to_string(),
            file: match f.get("file").and_then(Value::as_str) {
                Some("params") => "params.json".to_string(),
                _ => "main.json".to_string(),
            },
        })
        .collect();
    let standard_severity = expected
        .get("standardSeverity")
        .and_then(Value::as_str)
        .unwrap_or("warning");

    for mode in [Mode::Stacks, Mode::Standard] {
        let got = lint(&LintInput {
            template: &template,
            parameters: parameters.as_ref(),
            rules: &rules,
            mode,
            rules_base: None,
        });
        let shown = || {
            got.iter()
                .map(|d| {
                    format!(
                        "    {} {} @ {}:{}:{} — {}",
                        severity_name(d.severity),
                        d.target,
                        d.file.as_deref().unwrap_or("?"),
                        d.line.unwrap_or(0),
                        d.column.unwrap_or(0),
                        d.message
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        if got.len() != findings.len() {
            return Err(format!(
                "{mode:?}: expected {} finding(s), got {}:\n{}",
                findings.len(),
                got.len(),
                shown()
            ));
        }
        let mut unmatched: Vec<&Diagnostic> = got.iter().collect();
        for want in &findings {
            let severity = match mode {
                Mode::Stacks => want.severity.as_str(),
                Mode::Standard => standard_severity,
            };
            let position = unmatched.iter().position(|d| {
                d.code == RULE_CODE
                    && d.target == want.target
                    && d.message.contains(&want.message)
                    && severity_name(d.severity) == severity
                    && d.file.as_deref() == Some(want.file.as_str())
            });
            match position {
                Some(i) => {
                    let d = unmatched.remove(i);
                    if d.line.is_none() || d.column.is_none() {
                        return Err(format!(
                            "{mode:?}: finding without a position: {}",
                            d.message
                        ));
                    }
                }
                None => {
                    return Err(format!(
                        "{mode:?}: no {severity} finding at '{}' in {} containing \"{}\"; got:\n{}",
                        want.target,
                        want.file,
                        want.message,
                        shown()
                    ));
                }
            }
        }
        if mode == Mode::Standard
            && got.iter().any(|d| d.is_error())
            && expected.get("rules").is_none()
        {
            return Err(
                "an ordinary deployment must not get errors (seed 000: every row ✅)".into(),
            );
        }
    }
    Ok(())
}

#[test]
fn cases() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/cases exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 14,
        "one case per row of both seed 000 tables at least"
    );
    let failures: Vec<String> = dirs
        .iter()
        .filter_map(|dir| {
            run_case(dir).err().map(|e| {
                format!(
                    "{}: {e}",
                    dir.file_name().unwrap_or_default().to_string_lossy()
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} case(s) failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
}

/// Every row of both seed 000 tables has its case, allowed and refused.
#[test]
fn seed_000_rows_are_covered() {
    let rows = [
        "auth-literal",
        "auth-nonsecure-parameter",
        "auth-secure-parameter",
        "auth-keyvault-reference",
        "auth-reference-output",
        "auth-list-output",
        "auth-other-expression",
        "nonauth-literal",
        "nonauth-nonsecure-parameter",
        "nonauth-secure-parameter",
        "nonauth-keyvault-reference",
        "nonauth-reference-output",
        "nonauth-list-output",
        "nonauth-other-expression",
    ];
    for row in rows {
        assert!(
            cases_dir().join(row).join("expected.json").exists(),
            "missing case {row}"
        );
    }
}
