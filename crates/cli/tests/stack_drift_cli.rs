//! `cairn stack ... drift` and `create --adopt` end to end, in process and with `--server` against a running `cairn
//! serve`: Local files edited and removed by hand are reported `modified` (with the changed property) and
//! `deleted`, exit 3, `-o json` prints the result, re-creating the stack repairs them (exit 0); a file that exists
//! before the stack is left alone and reported unless `--adopt`.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .args(args)
        .output()
        .unwrap()
}

/// Runs and expects exit `code`; returns (stdout, stderr).
fn expect(home: &Path, args: &[&str], code: i32) -> (String, String) {
    let out = cairn(home, args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "cairn {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

/// Local files `{name}.txt` holding `{name}`.
fn template(files: &[&str], schema: &str) -> Value {
    let mut resources = serde_json::Map::new();
    for f in files {
        resources.insert(
            (*f).to_string(),
            json!({ "extension": "local", "type": "File", "apiVersion": "1.0.0",
                    "properties": { "path": format!("{f}.txt"), "content": *f } }),
        );
    }
    json!({
        "$schema": format!("https://schema.management.azure.com/schemas/2019-04-01/{schema}.json#"),
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "local": { "name": "Local", "version": "1.0.0" } },
        "resources": resources
    })
}

struct Files {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    root: std::path::PathBuf,
    template: String,
    params: String,
}

fn files(schema: &str) -> Files {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } })
            .to_string(),
    )
    .unwrap();
    let template_path = dir.path().join("template.json");
    std::fs::write(&template_path, template(&["a", "b"], schema).to_string()).unwrap();
    Files {
        home,
        root,
        template: template_path.to_string_lossy().into_owned(),
        params: params.to_string_lossy().into_owned(),
        _dir: dir,
    }
}

/// `stack <scope args> <verb> -n st ...` plus `extra`.
fn stack_args<'a>(scope: &[&'a str], verb: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["stack"];
    args.extend(scope.iter().take(1));
    args.push(verb);
    args.extend(["-n", "st"]);
    args.extend(scope.iter().skip(1));
    args.extend(extra);
    args
}

/// Create (with `create_only` flags too), drift in sync, drift after edits by hand (report and JSON), repair,
/// drift in sync again.
fn drift_round(f: &Files, scope: &[&str], create_only: &[&str], server: &[&str]) {
    let create_extra = [
        "-f",
        &f.template,
        "-p",
        &f.params,
        "--aou",
        "deleteAll",
        "--yes",
        "-o",
        "none",
    ];
    let mut create: Vec<&str> = stack_args(scope, "create", &create_extra);
    create.extend(create_only);
    create.extend(server);
    let mut drift: Vec<&str> = stack_args(scope, "drift", &[]);
    drift.extend(server);

    expect(&f.home, &create, 0);
    let (report, _) = expect(&f.home, &drift, 0);
    assert!(
        report.starts_with("Drift of deployment stack 'st': 2 resource(s): 2 in sync, 0 modified"),
        "{report}"
    );

    std::fs::write(f.root.join("a.txt"), "edited").unwrap();
    std::fs::remove_file(f.root.join("b.txt")).unwrap();
    let (report, _) = expect(&f.home, &drift, 3);
    assert!(report.contains("1 modified, 1 deleted"), "{report}");
    assert!(
        report.contains("  modified     Local File path=a.txt (a)"),
        "{report}"
    );
    assert!(
        report.contains("      ~ properties.content: \"a\" → \"edited\""),
        "{report}"
    );
    assert!(
        report.contains("  deleted      Local File path=b.txt (b)"),
        "{report}"
    );
    let mut as_json = drift.clone();
    as_json.extend(["-o", "json"]);
    let (json_out, _) = expect(&f.home, &as_json, 3);
    let result: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(result["properties"]["status"], "Succeeded");
    assert_eq!(result["properties"]["summary"]["deleted"], 1);
    // A query shapes the result like any command's, in any format; the exit code still says drift.
    let mut queried = drift.clone();
    queried.extend([
        "--query",
        "properties.resources[?driftStatus!='inSync'].driftStatus",
        "-o",
        "tsv",
    ]);
    let (tsv, _) = expect(&f.home, &queried, 3);
    let mut statuses: Vec<&str> = tsv.lines().collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["deleted", "modified"], "{tsv}");

    expect(&f.home, &create, 0);
    assert_eq!(std::fs::read_to_string(f.root.join("a.txt")).unwrap(), "a");
    let (report, _) = expect(&f.home, &drift, 0);
    assert!(report.contains("2 in sync"), "{report}");
}

#[test]
fn drift_in_process_at_group_scope() {
    let f = files("deploymentTemplate");
    expect(&f.home, &["group", "create", "-n", "rg", "-l", "local"], 0);
    drift_round(&f, &["group", "-g", "rg"], &[], &[]);
    // No such stack: exit 1 with the ARM error.
    let (_, stderr) = expect(
        &f.home,
        &["stack", "group", "drift", "-n", "nope", "-g", "rg"],
        1,
    );
    assert!(stderr.contains("DeploymentStackNotFound"), "{stderr}");
}

#[test]
fn drift_on_a_server_at_management_group_scope() {
    let f = files("managementGroupDeploymentTemplate");
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("extensions.json");
    std::fs::write(&registry, json!({ "extensions": [] }).to_string()).unwrap();
    // The stack's Local root lives in the files' own temporary directory.
    let server = common::start_server_with(
        &dir.path().join("data"),
        &registry,
        &[std::ffi::OsStr::new("--local-root"), f.root.as_os_str()],
    );
    drift_round(
        &f,
        &["mg", "-m", "platform"],
        &["-l", "westus"],
        &["--server", server.url.as_str()],
    );
}

#[test]
fn create_adopts_an_existing_file_only_with_adopt() {
    let f = files("deploymentTemplate");
    expect(&f.home, &["group", "create", "-n", "rg", "-l", "local"], 0);
    std::fs::write(f.root.join("a.txt"), "made by hand").unwrap();
    let base = [
        "stack",
        "group",
        "create",
        "-n",
        "st",
        "-g",
        "rg",
        "-f",
        &f.template,
        "-p",
        &f.params,
        "--aou",
        "deleteAll",
        "--yes",
        "-o",
        "none",
    ];
    let what_if: Vec<&str> = [
        "stack",
        "group",
        "what-if",
        "-n",
        "st",
        "-g",
        "rg",
        "-f",
        &f.template,
        "-p",
        &f.params,
        "--aou",
        "deleteAll",
    ]
    .to_vec();
    let (predicted, _) = expect(&f.home, &what_if, 0);
    assert!(
        predicted.contains("DeploymentStackResourceExistsUnmanaged")
            && predicted.contains("exists, unmanaged"),
        "{predicted}"
    );
    let (_, stderr) = expect(&f.home, &base, 1);
    assert!(
        stderr.contains("DeploymentStackResourceExistsUnmanaged"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(f.root.join("a.txt")).unwrap(),
        "made by hand"
    );
    let mut adopt = base.to_vec();
    adopt.push("--adopt");
    expect(&f.home, &adopt, 0);
    assert_eq!(std::fs::read_to_string(f.root.join("a.txt")).unwrap(), "a");
    let (help, _) = expect(&f.home, &["stack", "sub", "drift", "--help"], 0);
    for flag in ["--server", "--retention-interval", "--output"] {
        assert!(help.contains(flag), "{help}");
    }
}
