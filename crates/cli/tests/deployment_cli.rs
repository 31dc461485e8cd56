//! End-to-end tests of `cairn group|deployment|keyvault` with the in-process engine: each test runs the binary
//! with its own `CAIRN_HOME` and working directory (the quickstart's Local `rootDirectory` is `./out`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const CANARY: &str = "quickstart-canary-7c1f9e";

struct Env {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    fn cairn(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .env("CAIRN_HOME", self.home.path())
            .env_remove("CAIRN_SERVER")
            .env_remove("CAIRN_TOKEN")
            .env_remove("CAIRN_EXTENSIONS")
            .current_dir(self.work.path())
            .output()
            .unwrap()
    }

    /// Runs and expects `code`; returns stdout.
    fn expect(&self, args: &[&str], code: i32) -> String {
        let out = self.cairn(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "cairn {args:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let stdout = self.expect(args, 0);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    fn out(&self, path: &str) -> PathBuf {
        self.work.path().join("out").join(path)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.work.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

fn quickstart(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart")
        .join(file)
        .display()
        .to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The ARM error JSON at the end of stderr (after any progress lines).
fn stderr_error(out: &Output) -> Value {
    let text = stderr(out);
    let start = text
        .find("{\n  \"error\"")
        .unwrap_or_else(|| panic!("no ARM error on stderr: {text}"));
    // The JSON object, without what follows it (a hint such as `cairn group create ...`).
    serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no JSON error: {text}"))
}

/// Deploys the quickstart (apiKey = the canary) and returns stdout.
fn deploy_quickstart(env: &Env, extra: &[&str]) -> String {
    let (template, params) = (quickstart("main.json"), quickstart("main.parameters.json"));
    let canary = format!("apiKey={CANARY}");
    let mut args = vec![
        "deployment",
        "group",
        "create",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
        "-f",
        &template,
        "-p",
    ];
    let at_params = format!("@{params}");
    args.extend([at_params.as_str(), "-p", &canary]);
    args.extend(extra);
    env.expect(&args, 0)
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn every_command_has_help() {
    let env = Env::new();
    for command in [
        "group create",
        "group show",
        "group list",
        "group delete",
        "deployment group create",
        "deployment group show",
        "deployment group list",
        "deployment group delete",
        "deployment group validate",
        "deployment group what-if",
        "deployment group cancel",
        "deployment group export",
        "deployment sub create",
        "deployment operation group list",
        "deployment operation sub list",
        "keyvault create",
        "keyvault secret set",
        "keyvault secret show",
        "keyvault secret list",
    ] {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push("--help");
        let help = env.expect(&args, 0);
        assert!(help.contains("Usage"), "{command}: {help}");
    }
    // A missing required flag is a usage error.
    env.expect(&["deployment", "group", "show", "-n", "x"], 2);
}

#[test]
fn group_create_show_list_delete() {
    let env = Env::new();
    let created = env.json(&[
        "group", "create", "-n", "rg1", "-l", "local", "--tags", "env=dev",
    ]);
    assert_eq!(created["name"], "rg1");
    assert_eq!(created["location"], "local");
    assert_eq!(created["tags"]["env"], "dev");
    assert_eq!(
        created["id"],
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg1"
    );
    env.json(&["group", "create", "-n", "rg2", "-l", "local"]);
    let shown = env.json(&["group", "show", "-n", "rg1"]);
    assert_eq!(shown["properties"]["provisioningState"], "Succeeded");
    let names: Vec<Value> = env
        .json(&["group", "list"])
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].clone())
        .collect();
    assert_eq!(names, vec![Value::from("rg1"), Value::from("rg2")]);
    let table = env.expect(&["group", "list", "-o", "table"], 0);
    assert!(
        table.starts_with("Name    Location    Status\n------  ----------  "),
        "{table}"
    );
    // Another location for an existing group is ARM's conflict.
    let moved = env.cairn(&["group", "create", "-n", "rg1", "-l", "elsewhere"]);
    assert_eq!(moved.status.code(), Some(1));
    assert_eq!(
        stderr_error(&moved)["error"]["code"],
        "InvalidResourceGroupLocation"
    );
    assert_eq!(
        env.expect(&["group", "delete", "-n", "rg1", "--yes"], 0),
        ""
    );
    let missing = env.cairn(&["group", "show", "-n", "rg1"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr_error(&missing)["error"]["code"],
        "ResourceGroupNotFound"
    );
    assert_eq!(env.json(&["group", "list"]).as_array().unwrap().len(), 1);
    // Other subscriptions are separate.
    let other = env.json(&[
        "group",
        "list",
        "--subscription",
        "11111111-1111-1111-1111-111111111111",
    ]);
    assert_eq!(other, Value::Array(vec![]));
}

#[test]
fn quickstart_deploys_writes_files_and_reruns_idempotently() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "quickstart", "-l", "local"]);
    let record = parse(&deploy_quickstart(&env, &[]));
    assert_eq!(
        record["properties"]["provisioningState"], "Succeeded",
        "{record:#}"
    );
    let outputs = &record["properties"]["outputs"];
    assert_eq!(outputs["indexPath"]["value"], "hello/index.html");
    assert_eq!(outputs["notesPath"]["value"], "hello/notes.txt");
    assert_eq!(
        outputs["apiKeySecretUri"]["value"],
        "https://quickstart-kv.vault.azure.net/secrets/api-key"
    );
    let index = std::fs::read_to_string(env.out("hello/index.html")).unwrap();
    assert_eq!(
        index,
        "<h1>Hello from cairn!</h1>\n<p>Deployed by cairn to resource group quickstart.</p>\n"
    );
    let notes = std::fs::read_to_string(env.out("hello/notes.txt")).unwrap();
    assert_eq!(
        notes,
        "Written by the nested deployment hello-notes.\nHELLO FROM CAIRN!\n"
    );
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(env.out("hello/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings["vaultUri"],
        "https://quickstart-kv.vault.azure.net/"
    );
    // The secret reached the vault and nothing printed it.
    let secret = env.json(&[
        "keyvault",
        "secret",
        "show",
        "--vault-name",
        "quickstart-kv",
        "-n",
        "api-key",
    ]);
    assert_eq!(secret["value"], CANARY);
    assert!(!record.to_string().contains(CANARY));

    // Re-running re-applies: same result, unchanged files are not rewritten.
    let modified = std::fs::metadata(env.out("hello/index.html"))
        .unwrap()
        .modified()
        .unwrap();
    let again = parse(&deploy_quickstart(&env, &["--query", "properties.outputs"]));
    assert_eq!(&again, outputs);
    assert_eq!(
        std::fs::metadata(env.out("hello/index.html"))
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );
    let versions = env.json(&[
        "keyvault",
        "secret",
        "list",
        "--vault-name",
        "quickstart-kv",
    ]);
    assert_eq!(versions.as_array().unwrap().len(), 1);

    // The nested deployment has its own record; both are listed.
    let list = env.json(&["deployment", "group", "list", "-g", "quickstart"]);
    let mut names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    names.sort();
    assert_eq!(names, vec!["hello-notes", "quickstart"]);
    let shown = env.expect(
        &[
            "deployment",
            "group",
            "show",
            "-g",
            "quickstart",
            "-n",
            "quickstart",
        ],
        0,
    );
    assert!(!shown.contains(CANARY));
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        shown["properties"]["parameters"]["apiKey"],
        serde_json::json!({"type": "SecureString"})
    );
    let exported = env.json(&[
        "deployment",
        "group",
        "export",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
    ]);
    assert_eq!(exported["languageVersion"], "2.2-experimental");
}

#[test]
fn operations_are_listed_per_resource() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "quickstart", "-l", "local"]);
    deploy_quickstart(&env, &["-o", "none"]);
    let ops = env.json(&[
        "deployment",
        "operation",
        "group",
        "list",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
    ]);
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 6, "{ops:#?}");
    assert!(
        ops.iter()
            .all(|o| o["properties"]["provisioningState"] == "Succeeded")
    );
    let symbolic: Vec<&str> = ops
        .iter()
        .filter_map(|o| o["properties"]["targetResource"]["symbolicName"].as_str())
        .collect();
    for name in [
        "site",
        "index",
        "vault",
        "apiKeySecret",
        "settings",
        "notes",
    ] {
        assert!(symbolic.contains(&name), "{name} in {symbolic:?}");
    }
    assert!(!serde_json::to_string(ops).unwrap().contains(CANARY));
    let table = env.expect(
        &[
            "deployment",
            "operation",
            "group",
            "list",
            "-g",
            "quickstart",
            "-n",
            "quickstart",
            "-o",
            "table",
        ],
        0,
    );
    assert!(
        table.contains("Microsoft.KeyVault/vaults/quickstart-kv/secrets/api-key"),
        "{table}"
    );
    let inner = env.json(&[
        "deployment",
        "operation",
        "group",
        "list",
        "-g",
        "quickstart",
        "-n",
        "hello-notes",
    ]);
    assert_eq!(inner.as_array().unwrap().len(), 1);
}

#[test]
fn what_if_predicts_create_then_no_change() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "quickstart", "-l", "local"]);
    let (template, params) = (quickstart("main.json"), quickstart("main.parameters.json"));
    let at_params = format!("@{params}");
    let canary = format!("apiKey={CANARY}");
    let what_if = |extra: &[&str]| {
        let mut args = vec![
            "deployment",
            "group",
            "what-if",
            "-g",
            "quickstart",
            "-n",
            "quickstart",
            "-f",
            &template,
            "-p",
            &at_params,
            "-p",
            &canary,
        ];
        args.extend(extra);
        env.expect(&args, 0)
    };
    let changes = |text: &str| -> Vec<(String, String)> {
        let result: Value = serde_json::from_str(text).unwrap();
        result["properties"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["symbolicName"]
                        .as_str()
                        .or(c["resourceId"].as_str())
                        .unwrap_or("")
                        .to_string(),
                    c["changeType"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let first = what_if(&["-o", "json"]);
    assert!(!first.contains(CANARY), "what-if must not echo the secret");
    let first = changes(&first);
    assert_eq!(first.len(), 6, "{first:?}");
    assert!(first.iter().all(|(_, kind)| kind == "Create"), "{first:?}");
    let summary = what_if(&[]);
    assert!(
        summary.contains("Resource changes: 6 to create."),
        "{summary}"
    );
    deploy_quickstart(&env, &["-o", "none"]);
    let second = what_if(&["--no-pretty-print"]);
    assert!(!second.contains(CANARY));
    // A Key Vault secret's value is write-only: what-if neither shows nor compares it and reports the secret
    // as Deploy (re-applied, may or may not change); every other resource is unchanged.
    let second = changes(&second);
    assert_eq!(second.len(), 6, "{second:?}");
    for (resource, kind) in second {
        if resource == "apiKeySecret" {
            assert_eq!(kind, "Deploy");
        } else {
            assert_eq!(kind, "NoChange", "{resource}");
        }
    }
}

#[test]
fn a_failing_deployment_exits_1_with_the_error_tree() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "rg", "-l", "local"]);
    let template = env.write(
        "bad.json",
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "languageVersion": "2.2-experimental",
  "contentVersion": "1.0.0.0",
  "extensions": { "local": { "name": "Local", "version": "1.0.0",
                  "config": { "rootDirectory": { "type": "string", "defaultValue": "./out" } } } },
  "resources": {
    "ok": { "extension": "local", "type": "File", "properties": { "path": "ok.txt", "content": "fine" } },
    "escape": { "extension": "local", "type": "File", "properties": { "path": "../escape.txt", "content": "x" } }
  }
}"#,
    );
    let out = env.cairn(&["deployment", "group", "create", "-g", "rg", "-f", &template]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let error = stderr_error(&out);
    assert_eq!(error["error"]["code"], "DeploymentFailed");
    assert_eq!(error["error"]["details"][0]["code"], "PathOutsideRoot");
    // The progress lines name the failed resource.
    assert!(
        stderr(&out).contains("local:escape (File): Failed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(env.out("ok.txt")).unwrap(), "fine");
    let shown = env.json(&["deployment", "group", "show", "-g", "rg", "-n", "bad"]);
    assert_eq!(shown["properties"]["provisioningState"], "Failed");
    // A missing deployment is exit 1 with ARM's error.
    let missing = env.cairn(&["deployment", "group", "show", "-g", "rg", "-n", "nope"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr_error(&missing)["error"]["code"],
        "DeploymentNotFound"
    );
    // So is a missing resource group.
    let no_group = env.cairn(&[
        "deployment",
        "group",
        "create",
        "-g",
        "nogroup",
        "-f",
        &template,
    ]);
    assert_eq!(no_group.status.code(), Some(1));
    assert_eq!(
        stderr_error(&no_group)["error"]["code"],
        "ResourceGroupNotFound"
    );
}

#[test]
fn bad_templates_and_parameters_exit_2_with_a_diagnostic() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "rg", "-l", "local"]);
    let syntax = env.write("syntax.json", "{\n  \"resources\": [ }\n");
    let out = env.cairn(&["deployment", "group", "create", "-g", "rg", "-f", &syntax]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(text.contains("error[InvalidTemplate]"), "{text}");
    assert!(text.contains("syntax.json:2:18"), "{text}");

    let template = env.write(
        "needs.json",
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "parameters": { "count": { "type": "int" } },
  "resources": [],
  "outputs": { "twice": { "type": "int", "value": "[mul(parameters('count'), 2)]" } }
}"#,
    );
    // A required parameter missing: the engine's validation error (exit 2), shown where the parameter is declared.
    let out = env.cairn(&["deployment", "group", "create", "-g", "rg", "-f", &template]);
    assert_eq!(out.status.code(), Some(2));
    let text = stderr(&out);
    assert!(
        text.starts_with(
            "error[InvalidTemplate]: The value for the template parameter 'count' is not provided."
        ),
        "{text}"
    );
    assert!(
        text.contains("needs.json:4:19 (parameters.count)\n  |\n4 |   \"parameters\": { \"count\": { \"type\": \"int\" } },\n  |                   ^^^^^^^"),
        "{text}"
    );
    let out = env.cairn(&[
        "deployment",
        "group",
        "validate",
        "-g",
        "rg",
        "-f",
        &template,
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A broken parameters file, with its position.
    let params = env.write("params.json", "{ \"parameters\": { \"count\": 3 } }");
    let out = env.cairn(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &template,
        "-p",
        &params,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error[InvalidParameterFile]"),
        "{}",
        stderr(&out)
    );
    // Given properly, it validates and deploys.
    let valid = env.json(&[
        "deployment",
        "group",
        "validate",
        "-g",
        "rg",
        "-f",
        &template,
        "-p",
        "count=3",
    ]);
    assert_eq!(valid["properties"]["provisioningState"], "Succeeded");
    let outputs = env.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &template,
        "-p",
        "count=3",
        "--query",
        "properties.outputs.twice.value",
    ]);
    assert_eq!(outputs, Value::from(6));
}

#[test]
fn keyvault_secrets_set_show_list() {
    let env = Env::new();
    env.json(&["group", "create", "-n", "rg", "-l", "local"]);
    let vault = env.json(&["keyvault", "create", "-n", "kv1", "-g", "rg"]);
    assert_eq!(
        vault["properties"]["vaultUri"],
        "https://kv1.vault.azure.net/"
    );
    assert_eq!(vault["location"], "local");
    let set = env.expect(
        &[
            "keyvault",
            "secret",
            "set",
            "--vault-name",
            "kv1",
            "-n",
            "db",
            "--value",
            CANARY,
        ],
        0,
    );
    assert!(!set.contains(CANARY), "set must not print the value: {set}");
    let set: Value = serde_json::from_str(&set).unwrap();
    assert_eq!(set["name"], "db");
    let shown = env.json(&[
        "keyvault",
        "secret",
        "show",
        "--vault-name",
        "kv1",
        "-n",
        "db",
    ]);
    assert_eq!(shown["value"], CANARY);
    assert_eq!(shown["id"], set["id"]);
    // The same value keeps the version; a new value makes a new one, and the old stays readable.
    let same = env.json(&[
        "keyvault",
        "secret",
        "set",
        "--vault-name",
        "kv1",
        "-n",
        "db",
        "--value",
        CANARY,
    ]);
    assert_eq!(same["id"], set["id"]);
    let file = env.write("value.txt", "second-value");
    let second = env.json(&[
        "keyvault",
        "secret",
        "set",
        "--vault-name",
        "kv1",
        "-n",
        "db",
        "--file",
        &file,
    ]);
    assert_ne!(second["id"], set["id"]);
    let version = set["id"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let old = env.json(&[
        "keyvault",
        "secret",
        "show",
        "--vault-name",
        "kv1",
        "-n",
        "db",
        "--version",
        &version,
    ]);
    assert_eq!(old["value"], CANARY);
    env.json(&[
        "keyvault",
        "secret",
        "set",
        "--vault-name",
        "kv1",
        "-n",
        "other",
        "--value",
        "x",
    ]);
    let list = env.expect(&["keyvault", "secret", "list", "--vault-name", "kv1"], 0);
    assert!(
        !list.contains(CANARY) && !list.contains("second-value"),
        "{list}"
    );
    let list: Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, vec!["db", "other"]);
    // A deployment reading the secret through a Key Vault parameter reference never shows it either.
    let template = env.write(
        "uses.json",
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "parameters": { "password": { "type": "securestring" } },
  "resources": [],
  "outputs": { "length": { "type": "int", "value": "[length(parameters('password'))]" } }
}"#,
    );
    let vault_id = vault["id"].as_str().unwrap();
    let params = env.write(
        "uses.parameters.json",
        &serde_json::json!({ "parameters": { "password": { "reference": {
            "keyVault": { "id": vault_id }, "secretName": "db" } } } })
        .to_string(),
    );
    let record = env.expect(
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-f",
            &template,
            "-p",
            &params,
        ],
        0,
    );
    assert!(!record.contains("second-value"));
    let record: Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["properties"]["outputs"]["length"]["value"], 12);
    let shown = env.expect(
        &["deployment", "group", "show", "-g", "rg", "-n", "uses"],
        0,
    );
    assert!(!shown.contains("second-value") && !shown.contains(CANARY));
    // Missing secrets and vaults are exit 1 with ARM-shaped errors.
    let missing = env.cairn(&[
        "keyvault",
        "secret",
        "show",
        "--vault-name",
        "kv1",
        "-n",
        "nope",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(stderr_error(&missing)["error"]["code"], "SecretNotFound");
    let no_vault = env.cairn(&["keyvault", "secret", "list", "--vault-name", "nokv"]);
    assert_eq!(no_vault.status.code(), Some(1));
    // Deleting the group deletes its vaults.
    env.expect(&["group", "delete", "-n", "rg", "-y"], 0);
    env.json(&["group", "create", "-n", "rg", "-l", "local"]);
    assert_eq!(
        env.cairn(&["keyvault", "secret", "list", "--vault-name", "kv1"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn subscription_deployments_need_a_location() {
    let env = Env::new();
    let template = env.write(
        "sub.json",
        r#"{
  "$schema": "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "resources": [
    { "type": "Microsoft.Resources/resourceGroups", "apiVersion": "2024-03-01", "name": "made-by-sub", "location": "local" }
  ],
  "outputs": { "id": { "type": "string", "value": "[subscriptionResourceId('Microsoft.Resources/resourceGroups', 'made-by-sub')]" } }
}"#,
    );
    env.expect(&["deployment", "sub", "create", "-f", &template], 2);
    let record = env.json(&[
        "deployment",
        "sub",
        "create",
        "-l",
        "local",
        "-f",
        &template,
    ]);
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    env.json(&["group", "show", "-n", "made-by-sub"]);
    let list = env.json(&["deployment", "sub", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
}

/// A `cairn serve` child process (TLS, tokens) on a free port, with its own data directory; killed on drop.
struct Server {
    child: std::process::Child,
    url: String,
    ca_cert: String,
    token: &'static str,
    _stdout: std::process::ChildStdout,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Serves from `env`'s working directory, the server's one Local root (where `./out` lands, as in process).
    fn start(env: &Env) -> Server {
        use std::io::BufRead as _;
        let dir = env.work.path().join("server");
        std::fs::create_dir_all(&dir).unwrap();
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
                .unwrap();
        let (cert, key, tokens) = (
            dir.join("cert.pem"),
            dir.join("key.pem"),
            dir.join("tokens"),
        );
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let token = "cli-test-token-5d0b";
        std::fs::write(&tokens, format!("{token}\n")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .arg("--tokens")
            .arg(&tokens)
            .arg("--local-root")
            .arg(env.work.path())
            .env("CAIRN_HOME", dir.join("home"))
            .env_remove("CAIRN_EXTENSIONS")
            .current_dir(env.work.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut reader = std::io::BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("cairn serve listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_string();
        Server {
            child,
            url,
            ca_cert: cert.display().to_string(),
            token,
            _stdout: reader.into_inner(),
        }
    }

    /// `args` plus `--server`, `--token` and `--ca-cert`.
    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend([
            "--server",
            &self.url,
            "--token",
            self.token,
            "--ca-cert",
            &self.ca_cert,
        ]);
        all
    }
}

#[test]
fn server_mode_deploys_the_quickstart_over_tls_with_a_token() {
    let env = Env::new();
    let server = Server::start(&env);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let created = env.json(&server.args(&["group", "create", "-n", "quickstart", "-l", "local"]));
    assert_eq!(created["name"], "quickstart");
    let (template, params) = (quickstart("main.json"), quickstart("main.parameters.json"));
    let at_params = format!("@{params}");
    let canary = format!("apiKey={CANARY}");
    let create = [
        "deployment",
        "group",
        "create",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
        "-f",
        &template,
        "-p",
        &at_params,
        "-p",
        &canary,
    ];
    let out = env.cairn(&server.args(&create));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let record = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(record["properties"]["provisioningState"], "Succeeded");
    assert_eq!(
        record["properties"]["outputs"]["notesPath"]["value"],
        "hello/notes.txt"
    );
    assert!(!record.to_string().contains(CANARY));
    // Progress came from polled operations, nested deployment included.
    let progress = stderr(&out);
    assert!(
        progress.contains("Deployment 'quickstart': Succeeded"),
        "{progress}"
    );
    assert!(progress.contains("    local:notesFile"), "{progress}");
    // The server's Local extension wrote the files (it runs in the server's working directory).
    assert_eq!(
        std::fs::read_to_string(env.out("hello/notes.txt")).unwrap(),
        "Written by the nested deployment hello-notes.\nHELLO FROM CAIRN!\n"
    );
    // Nothing was opened locally.
    assert!(!env.home.path().join("cairn.db").exists());

    let shown = env.json(&server.args(&[
        "deployment",
        "group",
        "show",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
    ]));
    assert_eq!(shown["properties"]["provisioningState"], "Succeeded");
    let ops = env.json(&server.args(&[
        "deployment",
        "operation",
        "group",
        "list",
        "-g",
        "quickstart",
        "-n",
        "quickstart",
    ]));
    assert_eq!(ops.as_array().unwrap().len(), 6);
    let mut what_if = vec!["deployment", "group", "what-if"];
    what_if.extend_from_slice(&create[3..]);
    what_if.push("--no-pretty-print");
    let result = env.expect(&server.args(&what_if), 0);
    assert!(!result.contains(CANARY));
    let result = parse(&result);
    let kinds: Vec<&str> = result["properties"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["symbolicName"] != "apiKeySecret")
        .filter_map(|c| c["changeType"].as_str())
        .collect();
    assert_eq!(kinds, vec!["NoChange"; 5]);
    let missing = env.cairn(&server.args(&[
        "deployment",
        "group",
        "show",
        "-g",
        "quickstart",
        "-n",
        "nope",
    ]));
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        stderr_error(&missing)["error"]["code"],
        "DeploymentNotFound"
    );
    env.expect(
        &server.args(&[
            "deployment",
            "group",
            "delete",
            "-g",
            "quickstart",
            "-n",
            "quickstart",
        ]),
        0,
    );
    let list = env.json(&server.args(&["deployment", "group", "list", "-g", "quickstart"]));
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "the nested deployment's record stays: {list:#}"
    );
    env.expect(
        &server.args(&["group", "delete", "-n", "quickstart", "-y"]),
        0,
    );
    assert_eq!(
        env.json(&server.args(&["group", "list"])),
        Value::Array(vec![])
    );
}

#[test]
fn server_mode_reports_auth_and_tls_failures() {
    let env = Env::new();
    let server = Server::start(&env);
    let wrong = env.cairn(&[
        "group",
        "list",
        "--server",
        &server.url,
        "--token",
        "not-the-token",
        "--ca-cert",
        &server.ca_cert,
    ]);
    assert_eq!(wrong.status.code(), Some(1));
    assert_eq!(
        stderr_error(&wrong)["error"]["code"],
        "InvalidAuthenticationToken"
    );
    assert!(!stderr(&wrong).contains("not-the-token"));
    // Without --ca-cert the self-signed certificate is not trusted.
    let untrusted = env.cairn(&[
        "group",
        "list",
        "--server",
        &server.url,
        "--token",
        server.token,
    ]);
    assert_eq!(untrusted.status.code(), Some(1));
    assert!(
        stderr(&untrusted).contains("cannot reach the server"),
        "{}",
        stderr(&untrusted)
    );
    // Key Vault's management plane works through the server (vaults, setting secrets); its data plane
    // (reading values, listing) needs the in-process engine.
    let group = env.cairn(&server.args(&["group", "create", "-n", "kvrg", "-l", "local"]));
    assert_eq!(group.status.code(), Some(0), "{}", stderr(&group));
    let created = env.cairn(&server.args(&["keyvault", "create", "-n", "kv", "-g", "kvrg"]));
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let set = env.cairn(&server.args(&[
        "keyvault",
        "secret",
        "set",
        "--vault-name",
        "kv",
        "-g",
        "kvrg",
        "-n",
        "token",
        "--value",
        "kv-canary-93e1",
    ]));
    assert_eq!(set.status.code(), Some(0), "{}", stderr(&set));
    assert!(!String::from_utf8_lossy(&set.stdout).contains("kv-canary-93e1"));
    let no_group = env.cairn(&server.args(&[
        "keyvault",
        "secret",
        "set",
        "--vault-name",
        "kv",
        "-n",
        "t",
        "--value",
        "x",
    ]));
    assert_eq!(no_group.status.code(), Some(2), "{}", stderr(&no_group));
    let kv = env.cairn(&server.args(&[
        "keyvault",
        "secret",
        "list",
        "--vault-name",
        "kv",
        "-g",
        "kvrg",
    ]));
    assert_eq!(kv.status.code(), Some(2));
    assert_eq!(stderr_error(&kv)["error"]["code"], "NotSupportedWithServer");
}
