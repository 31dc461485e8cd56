//! `cairn stack group ...` end to end on the in-process engine: what-if before a stack exists, create, what-if
//! again (no change), what-if of a smaller template (the dropped resource would be deleted), delete.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", home)
        .args(args)
        .output()
        .unwrap()
}

fn ok_json(home: &Path, args: &[&str]) -> Value {
    let out = cairn(home, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn template(files: &[&str]) -> Value {
    let mut resources = serde_json::Map::new();
    for f in files {
        resources.insert(
            (*f).to_string(),
            json!({ "extension": "local", "type": "File", "apiVersion": "1.0.0",
                    "properties": { "path": format!("{f}.txt"), "content": format!("{f}\n") } }),
        );
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "local": { "name": "Local", "version": "1.0.0" } },
        "resources": resources
    })
}

fn change_types(result: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = result["properties"]["changes"]["resourceChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("no resource changes: {result:#}"))
        .iter()
        .map(|c| {
            let what = c["identifiers"]["path"]
                .as_str()
                .or_else(|| c["id"].as_str())
                .unwrap_or_default()
                .to_string();
            (
                what,
                c["changeType"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn stack_what_if_create_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } }).to_string(),
    )
    .unwrap();
    let full = dir.path().join("full.json");
    std::fs::write(&full, template(&["a", "b"]).to_string()).unwrap();
    let smaller = dir.path().join("smaller.json");
    std::fs::write(&smaller, template(&["a"]).to_string()).unwrap();
    let (full, smaller, params) = (
        full.to_str().unwrap(),
        smaller.to_str().unwrap(),
        params.to_str().unwrap(),
    );

    ok_json(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    let stack = |verb: &str, file: &str| {
        ok_json(
            &home,
            &[
                "stack",
                "group",
                verb,
                "-n",
                "st",
                "-g",
                "rg",
                "-f",
                file,
                "-p",
                params,
                "--action-on-unmanage",
                "deleteAll",
                "--yes",
            ],
        )
    };
    let first = stack("what-if", full);
    let first = change_types(&first);
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|(_, kind)| kind == "create"), "{first:?}");
    assert!(!root.join("a.txt").exists(), "what-if must not deploy");

    let created = stack("create", full);
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert!(root.join("a.txt").exists() && root.join("b.txt").exists());

    let again = change_types(&stack("what-if", full));
    assert!(
        again.iter().all(|(_, kind)| kind == "noChange"),
        "{again:?}"
    );
    let shrink = change_types(&stack("what-if", smaller));
    assert!(
        shrink.contains(&("b.txt".to_string(), "delete".to_string())),
        "{shrink:?}"
    );
    assert!(root.join("b.txt").exists(), "what-if must not delete");

    let out = cairn(
        &home,
        &[
            "stack",
            "group",
            "delete",
            "-n",
            "st",
            "-g",
            "rg",
            "--action-on-unmanage",
            "deleteAll",
            "--yes",
        ],
    );
    let progress = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{progress}");
    assert!(
        progress.contains("stack st: deleted"),
        "progress during the delete: {progress}"
    );
    assert!(!root.join("a.txt").exists() && !root.join("b.txt").exists());
}
