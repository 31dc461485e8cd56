//! End-to-end tests of `cairn template validate|expand`: exit codes, diagnostics with positions, the plan.

use std::path::PathBuf;
use std::process::Command;

fn cairn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
}

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/templates/storage-loop.json")
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn expand_prints_the_plan() {
    let out = cairn()
        .args(["template", "expand", "-f"])
        .arg(example())
        .args(["-p", "count=3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let resources = plan["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 4);
    let blob = &resources[3];
    assert_eq!(
        blob["type"],
        "Microsoft.Storage/storageAccounts/blobServices"
    );
    assert_eq!(
        blob["dependsOn"].as_array().unwrap().len(),
        3,
        "dependsOn a copy loop means every instance"
    );
    assert_eq!(
        plan["outputs"]["names"]["value"].as_array().unwrap().len(),
        3
    );
}

#[test]
fn validate_reports_positions_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        &dir,
        "main.json",
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "resources": [
    { "type": "A.B/c", "apiVersion": "2020-01-01", "name": "[concat('x', parameters('nope'))]" }
  ]
}"#,
    );
    let out = cairn()
        .args(["template", "validate", "-f"])
        .arg(&template)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error[InvalidTemplate]"), "{stderr}");
    assert!(stderr.contains("main.json:5:"), "{stderr}");
    assert!(stderr.contains("resources[0].name"), "{stderr}");
}

#[test]
fn parameters_file_and_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let params = write(
        &dir,
        "params.json",
        r#"{ "parameters": { "count": { "value": 9 } } }"#,
    );
    let out = cairn()
        .args(["template", "validate", "-f"])
        .arg(example())
        .arg("-p")
        .arg(format!("@{}", params.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("less than or equal to '5'"));
    let out = cairn()
        .args(["template", "validate", "-f"])
        .arg(example())
        .args(["-p", "count=2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_json_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        &dir,
        "main.json",
        "{\n  \"resources\": [\n    { \"type\": }\n  ]\n}",
    );
    let out = cairn()
        .args(["template", "expand", "-f"])
        .arg(&template)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not valid JSON") && stderr.contains("main.json:3:"),
        "{stderr}"
    );
}

#[test]
fn missing_file_exits_2() {
    let out = cairn()
        .args(["template", "validate", "-f", "/nonexistent/main.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn real_world_templates_validate_as_arm_deploys_them() {
    // Issue 44: `-p name=null` takes the default; a false-condition resource's name is never evaluated; a
    // nullable `$ref` parameter and an untyped (resource-derived) one are optional; `roleDefinitions()` answers.
    let dir = tempfile::tempdir().unwrap();
    let template = write(
        &dir,
        "main.json",
        r##"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "languageVersion": "2.0",
  "contentVersion": "1.0.0.0",
  "definitions": {"lockType": {"type": "object", "properties": {"kind": {"type": "string"}}, "nullable": true}},
  "parameters": {
    "origins": {"type": "array", "defaultValue": []},
    "kvId": {"type": "string", "nullable": true},
    "lock": {"$ref": "#/definitions/lockType"},
    "natGateway": {"metadata": {"__bicep_resource_derived_type!": {"source": "Microsoft.Network/virtualNetworks/subnets@2023-04-01#properties/properties/properties/natGateway"}}, "nullable": true}
  },
  "resources": {
    "kv": {
      "condition": "[not(empty(parameters('kvId')))]",
      "existing": true,
      "type": "Microsoft.KeyVault/vaults",
      "apiVersion": "2023-07-01",
      "name": "[last(split(parameters('kvId'), '/'))]"
    }
  },
  "outputs": {
    "origins": {"type": "int", "value": "[length(parameters('origins'))]"},
    "contributor": {"type": "string", "value": "[roleDefinitions('Contributor').roleDefinitionId]"}
  }
}"##,
    );
    for command in ["validate", "expand"] {
        let out = cairn()
            .args(["template", command, "-f"])
            .arg(&template)
            .args(["-p", "origins=null"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if command == "expand" {
            let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                plan["parameters"]["origins"]["value"],
                serde_json::json!([])
            );
            assert_eq!(plan["outputs"]["origins"]["value"], 0);
            assert_eq!(
                plan["outputs"]["contributor"]["value"],
                "b24988ac-6180-42a0-ab88-20f7382dd24c"
            );
            assert_eq!(plan["resources"][0]["key"], "kv");
            assert_eq!(plan["resources"][0]["condition"], false);
        }
    }
}

#[test]
fn validate_names_what_waits_for_the_deployment() {
    // A module's copy count over a runtime value (issue 44's corpus): valid, expanded when the deployment runs.
    let template = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../template/tests/real_world/09-copy-count-runtime-deferred/template.json");
    let out = cairn()
        .args(["template", "validate", "-f"])
        .arg(template)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "valid");
    assert_eq!(
        result["deferred"],
        serde_json::json!([
            "The copy count at 'resources[1].properties.template.resources[0].copy.count' depends on a value known \
             only while the deployment runs ('[length(parameters('configs'))]'): its resources are expanded when \
             the deployment starts."
        ])
    );
}
