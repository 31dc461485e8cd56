//! Extension resource bodies checked against their extensions' types by `cairn template validate`: a corpus of
//! bad bodies (`tests/extension_types/*.json`, each a template whose `metadata.expect` lists the findings it must
//! give: ARM code, line and column), and the examples of Local, PostgreSql and Kubernetes with no finding.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cairn() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    // The built-in extensions' types only, whatever registry the environment names.
    command.env_remove("CAIRN_EXTENSIONS");
    command
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `(code, line, column)` of every finding `template validate` prints on stderr, and its exit code.
fn findings(
    template: &Path,
    parameters: Option<&Path>,
) -> (Option<i32>, BTreeSet<(String, u32, u32)>, String) {
    let mut command = cairn();
    command.args(["template", "validate", "-f"]).arg(template);
    if let Some(parameters) = parameters {
        command.arg("-p").arg(format!("@{}", parameters.display()));
    }
    let out = command.output().expect("cairn runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let mut found = BTreeSet::new();
    let mut code = None;
    for line in stderr.lines() {
        if let Some(rest) = line
            .strip_prefix("error[")
            .or_else(|| line.strip_prefix("warning["))
        {
            code = rest.split(']').next().map(str::to_string);
        } else if let (Some(at), Some(c)) = (line.trim_start().strip_prefix("--> "), code.take()) {
            let position = at.split(' ').next().unwrap_or_default();
            let mut parts = position.rsplitn(3, ':');
            let column = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
            let line = parts.next().and_then(|l| l.parse().ok()).unwrap_or(0);
            found.insert((c, line, column));
        }
    }
    (out.status.code(), found, stderr)
}

#[test]
fn every_bad_body_gives_its_findings_at_their_positions() {
    let dir = root().join("tests/extension_types");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "the corpus holds {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let text = std::fs::read_to_string(case).expect("case readable");
        let template: serde_json::Value = serde_json::from_str(&text).expect("case is JSON");
        let expected: BTreeSet<(String, u32, u32)> = template["metadata"]["expect"]
            .as_array()
            .expect("metadata.expect")
            .iter()
            .map(|e| {
                (
                    e["code"].as_str().expect("code").to_string(),
                    e["line"].as_u64().expect("line") as u32,
                    e["column"].as_u64().expect("column") as u32,
                )
            })
            .collect();
        assert!(!expected.is_empty(), "{}: expects nothing", case.display());
        let (status, found, stderr) = findings(case, None);
        if status != Some(2) || found != expected {
            failures.push(format!(
                "{}: exit {status:?}, expected {expected:?}, found {found:?}\n{stderr}",
                case.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_examples_validate_with_no_finding() {
    let examples = root().join("../../examples");
    for (template, parameters) in [
        (
            "quickstart/main.json",
            Some("quickstart/main.parameters.json"),
        ),
        (
            "postgresql/main.json",
            Some("postgresql/main.parameters.json"),
        ),
        (
            "kubernetes/main.json",
            Some("kubernetes/main.parameters.json"),
        ),
        ("templates/storage-loop.json", None),
    ] {
        let parameters = parameters.map(|p| examples.join(p));
        let (status, found, stderr) = findings(&examples.join(template), parameters.as_deref());
        assert_eq!(status, Some(0), "{template}: {stderr}");
        assert!(found.is_empty(), "{template}: {found:?}\n{stderr}");
    }
}

#[test]
fn messages_never_quote_a_value() {
    // A secure parameter's value in a body of the wrong type: the finding names the property and the types only.
    let dir = tempfile::tempdir().expect("temp dir");
    let template = dir.path().join("main.json");
    std::fs::write(
        &template,
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "languageVersion": "2.2-experimental",
  "contentVersion": "1.0.0.0",
  "parameters": { "secret": { "type": "secureObject", "defaultValue": { "pw": "hunter2-secret" } } },
  "extensions": { "pg": { "name": "PostgreSql", "version": "1.0.0",
    "config": { "host": { "type": "string", "defaultValue": "h" }, "username": { "type": "string", "defaultValue": "u" },
                "password": { "type": "secureString", "defaultValue": "" } } } },
  "resources": { "r": { "extension": "pg", "type": "PostgreSql/roles", "apiVersion": "v1",
    "properties": { "name": "app", "password": "[parameters('secret')]" } } }
}"#,
    )
    .expect("written");
    let (status, found, stderr) = findings(&template, None);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        found
            .iter()
            .any(|(code, _, _)| code == "InvalidExtensionResourcePropertyType"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[test]
fn a_type_declared_at_another_api_version_is_not_judged() {
    // The extension may accept a version its types do not name: no guess, no finding.
    let dir = tempfile::tempdir().expect("temp dir");
    let template = dir.path().join("main.json");
    std::fs::write(
        &template,
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "languageVersion": "2.2-experimental",
  "contentVersion": "1.0.0.0",
  "extensions": { "local": { "name": "Local", "version": "1.0.0",
    "config": { "rootDirectory": { "type": "string", "defaultValue": "/tmp/x" } } } },
  "resources": { "f": { "extension": "local", "type": "File", "apiVersion": "2.0.0",
    "properties": { "path": "a", "newer": true } } }
}"#,
    )
    .expect("written");
    let (status, found, stderr) = findings(&template, None);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(found.is_empty(), "{found:?}");
}
