//! `cairn stack group|sub ...` end to end: on the in-process engine (what-if before a stack exists, create,
//! what-if again, what-if of a smaller template, delete), and with `--server` against a running `cairn serve`
//! (create, update, show, list, export, delete with per-resource progress on stderr, the unmanage flags reaching
//! the stack and its DELETE, ARM errors with their codes and exit codes), with the Local extension and a test
//! extension whose deletes are slow or unsupported.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
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
                "-o",
                "json",
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
    // Every resource the in-process delete removed is reported as deleted, the last ones too (the record is gone
    // before a read could show them; the delete's outcome lists them).
    for file in ["a.txt", "b.txt"] {
        let line = format!(r#"stack st: deleted Local File {{"path":"{file}"}} ("#);
        assert_eq!(progress.matches(&line).count(), 1, "{file}: {progress}");
    }
    assert!(
        !progress.contains("removed before it reported"),
        "{progress}"
    );
    assert!(
        progress.contains(": 2 deleted, 0 detached, 0 unmanaged without a report"),
        "{progress}"
    );
    assert!(!root.join("a.txt").exists() && !root.join("b.txt").exists());
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs and expects exit `code`; returns the output.
fn expect(home: &Path, args: &[&str], code: i32) -> Output {
    let out = cairn(home, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "cairn {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    out
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
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

/// `args` plus `--server url`.
fn on<'a>(server: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--server", server]);
    all
}

/// Local files `{name}.txt` whose content ends with the `suffix` parameter.
fn suffixed_template(files: &[&str]) -> Value {
    let mut template = template(files);
    template["parameters"] = json!({ "suffix": { "type": "string", "defaultValue": "" } });
    for f in files {
        template["resources"][*f]["properties"]["content"] = json!(format!(
            "[format('{{0}}-{{1}}', '{f}', parameters('suffix'))]"
        ));
    }
    template
}

#[test]
fn server_mode_create_update_show_list_export_delete() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("client-home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let registry = dir.path().join("extensions.json");
    std::fs::write(&registry, json!({ "extensions": [] }).to_string()).unwrap();
    let server = common::start_server(&dir.path().join("server-data"), &registry);
    let url = server.url.as_str();

    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": { "suffix": { "value": "file" } },
                "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } })
        .to_string(),
    )
    .unwrap();
    let full = dir.path().join("full.json");
    std::fs::write(&full, suffixed_template(&["a", "b"]).to_string()).unwrap();
    let smaller = dir.path().join("smaller.json");
    std::fs::write(&smaller, suffixed_template(&["a"]).to_string()).unwrap();
    let (full, smaller, params) = (
        full.to_str().unwrap(),
        smaller.to_str().unwrap(),
        params.to_str().unwrap(),
    );

    expect(
        &home,
        &on(url, &["group", "create", "-n", "rg", "-l", "local"]),
        0,
    );
    let create = |file: &str, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = [
            "stack",
            "group",
            "create",
            "-n",
            "st",
            "-g",
            "rg",
            "-f",
            file,
            "-p",
            params,
            "-p",
            "suffix=one",
            "suffix=two",
            "--aou",
            "deleteAll",
            "--yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };

    // Create: progress on stderr, the stack on stdout, the flags on the record.
    let args = create(
        full,
        &[
            "--resources-without-delete-support",
            "detach",
            "--tags",
            "env=dev",
            "team=a",
            "--description",
            "d",
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = expect(&home, &on(url, &args), 0);
    let created = stdout_json(&out);
    let progress = stderr(&out);
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(
        created["properties"]["actionOnUnmanage"]["resourcesWithoutDeleteSupport"], "detach",
        "{created:#}"
    );
    assert_eq!(created["tags"], json!({ "env": "dev", "team": "a" }));
    assert!(progress.contains("stack st: deploying ("), "{progress}");
    assert!(progress.contains("stack st: succeeded ("), "{progress}");
    assert!(
        progress.contains("stack st: 2 managed, 0 deleted, 0 detached, 0 failed"),
        "{progress}"
    );
    // The later -p value won; the parameters file's value was overridden.
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "a-two"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).unwrap(),
        "b-two"
    );
    // Nothing was opened locally.
    assert!(!home.join("cairn.db").exists());

    let shown = expect(
        &home,
        &on(
            url,
            &[
                "stack",
                "group",
                "show",
                "-n",
                "st",
                "-g",
                "rg",
                "--query",
                "properties.actionOnUnmanage.resourcesWithoutDeleteSupport",
            ],
        ),
        0,
    );
    assert_eq!(stdout_json(&shown), "detach");
    let listed = stdout_json(&expect(
        &home,
        &on(url, &["stack", "group", "list", "-g", "rg"]),
        0,
    ));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");
    assert_eq!(listed[0]["name"], "st");
    let names = expect(
        &home,
        &on(
            url,
            &["stack", "group", "list", "-g", "rg", "--query", "[0].name"],
        ),
        0,
    );
    assert_eq!(stdout_json(&names), "st");
    let table = expect(
        &home,
        &on(url, &["stack", "group", "list", "-g", "rg", "-o", "table"]),
        0,
    );
    assert!(String::from_utf8_lossy(&table.stdout).contains("succeeded"));
    let exported = stdout_json(&expect(
        &home,
        &on(url, &["stack", "group", "export", "-n", "st", "-g", "rg"]),
        0,
    ));
    assert!(
        exported["template"]["resources"].get("b").is_some(),
        "{exported:#}"
    );

    // What-if and validate through the server.
    let base = [
        "-n",
        "st",
        "-g",
        "rg",
        "-f",
        full,
        "-p",
        params,
        "-p",
        "suffix=two",
        "--aou",
        "deleteAll",
    ];
    let what_if = [
        &["stack", "group", "what-if"][..],
        &base[..],
        &["-o", "json"],
    ]
    .concat();
    let predicted = stdout_json(&expect(&home, &on(url, &what_if), 0));
    let kinds = change_types(&predicted);
    assert_eq!(kinds.len(), 2, "{predicted:#}");
    assert!(
        kinds.iter().all(|(_, kind)| kind == "noChange"),
        "{kinds:?}"
    );
    let validate = [&["stack", "group", "validate"][..], &base[..]].concat();
    let validated = stdout_json(&expect(&home, &on(url, &validate), 0));
    assert_eq!(
        validated["properties"]["validatedResources"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{validated:#}"
    );
    let broken = dir.path().join("broken.json");
    let mut template = suffixed_template(&["a"]);
    template["resources"]["a"]["properties"]["content"] = json!("[parameters('missing')]");
    std::fs::write(&broken, template.to_string()).unwrap();
    let broken = broken.to_str().unwrap();
    let invalid = [
        "stack",
        "group",
        "validate",
        "-n",
        "st",
        "-g",
        "rg",
        "-f",
        broken,
        "-p",
        params,
        "--aou",
        "deleteAll",
    ];
    // A name the static checks see is refused before anything is sent, in the file, with the caret on the name.
    let local = stderr(&expect(&home, &on(url, &invalid), 2));
    assert!(
        local.starts_with("error[InvalidTemplate]: The template parameter 'missing' is not found."),
        "{local}"
    );
    assert!(
        local.contains("broken.json:1:") && local.contains("(resources.a.properties.content)"),
        "{local}"
    );
    // One computed at evaluation comes back from the server as an ARM error; its path leads to the same place.
    template["resources"]["a"]["properties"]["content"] =
        json!("[parameters(concat('suffi', 'xx'))]");
    std::fs::write(broken, serde_json::to_string_pretty(&template).unwrap()).unwrap();
    let remote = stderr(&expect(&home, &on(url, &invalid), 2));
    assert!(
        remote.starts_with(
            "error[InvalidTemplate]: The template parameter 'suffixx' is not found. Did you mean 'suffix'?"
        ),
        "{remote}"
    );
    assert!(
        remote.contains(
            "(resources.a.properties.content)\n   |\n18 |         \"content\": \"[parameters(concat('suffi', 'xx'))]\"\n"
        ),
        "{remote}"
    );

    // Update with b dropped: b is deleted and reported by name.
    let args = create(smaller, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = expect(&home, &on(url, &args), 0);
    let progress = stderr(&out);
    assert!(
        progress.contains(r#"stack st: deleted Local File {"path":"b.txt"} ("#),
        "{progress}"
    );
    assert_eq!(
        progress.matches(r#"{"path":"b.txt"}"#).count(),
        1,
        "{progress}"
    );
    assert!(
        progress.contains("stack st: 1 managed, 1 deleted, 0 detached, 0 failed"),
        "{progress}"
    );
    assert!(!root.join("b.txt").exists() && root.join("a.txt").exists());

    // Delete: a line for the remaining resource, then the stack is gone.
    let out = expect(
        &home,
        &on(
            url,
            &[
                "stack",
                "group",
                "delete",
                "-n",
                "st",
                "-g",
                "rg",
                "--aou",
                "deleteAll",
                "--yes",
            ],
        ),
        0,
    );
    let progress = stderr(&out);
    let a_lines: Vec<&str> = progress
        .lines()
        .filter(|l| l.contains(r#"Local File {"path":"a.txt"}"#))
        .collect();
    assert_eq!(a_lines.len(), 1, "{progress}");
    assert!(
        a_lines[0].starts_with("stack st: deleted ")
            || a_lines[0].starts_with(
                "stack st: unmanaged Local File {\"path\":\"a.txt\"} (delete requested"
            ),
        "{progress}"
    );
    assert!(progress.contains("stack st: deleted ("), "{progress}");
    assert!(out.stdout.is_empty(), "stdout is for results only");
    assert!(!root.join("a.txt").exists());

    // The server's ARM errors, with their codes and the in-process exit codes.
    let missing = expect(
        &home,
        &on(url, &["stack", "group", "show", "-n", "st", "-g", "rg"]),
        1,
    );
    assert_eq!(
        stderr_error(&missing)["error"]["code"],
        "DeploymentStackNotFound"
    );
    let again = expect(
        &home,
        &on(
            url,
            &[
                "stack",
                "group",
                "delete",
                "-n",
                "st",
                "-g",
                "rg",
                "--aou",
                "deleteAll",
                "--yes",
            ],
        ),
        1,
    );
    assert_eq!(
        stderr_error(&again)["error"]["code"],
        "DeploymentStackNotFound"
    );
    let bad_name = [
        "stack",
        "group",
        "create",
        "-n",
        "bad!name",
        "-g",
        "rg",
        "-f",
        full,
        "-p",
        params,
        "--aou",
        "detachAll",
    ];
    let remote = expect(&home, &on(url, &bad_name), 2);
    let remote_error = stderr_error(&remote);
    assert!(
        remote_error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains('!'),
        "{remote_error:#}"
    );
    let local_home = dir.path().join("local-home");
    expect(
        &local_home,
        &["group", "create", "-n", "rg", "-l", "local"],
        0,
    );
    let local = expect(&local_home, &bad_name, 2);
    assert_eq!(
        stderr_error(&local)["error"]["code"],
        remote_error["error"]["code"]
    );
}

/// A v2 test extension ("Things"): `slow*` resources take `SLOW_DELETE` to delete, `fixed*` resources cannot be
/// deleted (405), the rest delete at once. It remembers what exists.
#[derive(Clone, Default)]
struct Things {
    existing: Arc<Mutex<BTreeSet<String>>>,
}

const SLOW_DELETE: Duration = Duration::from_millis(1500);

fn thing(body: &Value, name: &str) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"], "identifiers": { "name": name },
            "properties": { "name": name } })
}

fn thing_name(body: &Value, pointer: &str) -> String {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

async fn thing_create(State(s): State<Things>, Json(body): Json<Value>) -> Json<Value> {
    let name = thing_name(&body, "/properties/name");
    s.existing.lock().unwrap().insert(name.clone());
    Json(thing(&body, &name))
}

async fn thing_preview(Json(body): Json<Value>) -> Json<Value> {
    let name = thing_name(&body, "/properties/name");
    Json(thing(&body, &name))
}

async fn thing_get(State(s): State<Things>, Json(body): Json<Value>) -> Response {
    let name = thing_name(&body, "/identifiers/name");
    if s.existing.lock().unwrap().contains(&name) {
        Json(thing(&body, &name)).into_response()
    } else {
        (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "not found" } })),
        )
            .into_response()
    }
}

async fn thing_delete(State(s): State<Things>, Json(body): Json<Value>) -> Response {
    let name = thing_name(&body, "/identifiers/name");
    if name.starts_with("fixed") {
        return (
            axum::http::StatusCode::METHOD_NOT_ALLOWED,
            Json(json!({ "error": { "code": "DeleteNotSupported",
                                    "message": "Things of this kind cannot be deleted." } })),
        )
            .into_response();
    }
    if name.starts_with("slow") {
        tokio::time::sleep(SLOW_DELETE).await;
    }
    s.existing.lock().unwrap().remove(&name);
    axum::http::StatusCode::NO_CONTENT.into_response()
}

/// Serves [`Things`] on a loopback port from its own runtime (kept alive by the returned handle).
fn start_things() -> (tokio::runtime::Runtime, String, Things) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let things = Things::default();
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(thing_create))
        .route("/{version}/resource/get", post(thing_get))
        .route("/{version}/resource/preview", post(thing_preview))
        .route("/{version}/resource/delete", post(thing_delete))
        .with_state(things.clone());
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app).await });
    (runtime, url, things)
}

fn things_template(names: &[&str]) -> Value {
    let resources: serde_json::Map<String, Value> = names
        .iter()
        .map(|name| {
            (
                name.replace('-', "_"),
                json!({ "extension": "things", "type": "Thing", "apiVersion": "v1",
                        "properties": { "name": name } }),
            )
        })
        .collect();
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "things": { "name": "Things", "version": "1.0.0" } },
        "resources": resources
    })
}

fn thing_line(progress: &str, verb: &str, name: &str) -> bool {
    let needle = format!(r#"stack st: {verb} Things Thing {{"name":"{name}"}}"#);
    progress.lines().filter(|l| l.starts_with(&needle)).count() == 1
}

#[test]
fn server_mode_reports_each_unmanaged_resource_and_honours_without_delete_support() {
    let (_runtime, things_url, things) = start_things();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("client-home");
    let registry = dir.path().join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Things", "version": "1.0.0",
                                  "transport": { "kind": "http", "url": things_url } } ] })
        .to_string(),
    )
    .unwrap();
    let server = common::start_server(&dir.path().join("server-data"), &registry);
    let url = server.url.as_str();
    let all = dir.path().join("all.json");
    std::fs::write(
        &all,
        things_template(&["quick", "slow-1", "fixed-1"]).to_string(),
    )
    .unwrap();
    let none = dir.path().join("none.json");
    std::fs::write(&none, things_template(&[]).to_string()).unwrap();
    let (all, none) = (all.to_str().unwrap(), none.to_str().unwrap());
    expect(
        &home,
        &on(url, &["group", "create", "-n", "rg", "-l", "local"]),
        0,
    );
    let stack = |file: &str, extra: &[&str], code: i32| {
        let mut args = vec![
            "stack", "group", "create", "-n", "st", "-g", "rg", "-f", file, "--yes",
        ];
        args.extend_from_slice(extra);
        expect(&home, &on(url, &args), code)
    };
    let existing = || things.existing.lock().unwrap().clone();

    stack(all, &["--aou", "detachAll"], 0);
    assert_eq!(existing().len(), 3);

    // Everything leaves the stack: the undeletable thing is detached, as --resources-without-delete-support says.
    let out = stack(
        none,
        &[
            "--aou",
            "deleteAll",
            "--resources-without-delete-support",
            "detach",
        ],
        0,
    );
    let progress = stderr(&out);
    assert!(thing_line(&progress, "deleted", "quick"), "{progress}");
    assert!(thing_line(&progress, "deleted", "slow-1"), "{progress}");
    assert!(thing_line(&progress, "detached", "fixed-1"), "{progress}");
    assert!(
        progress.contains("stack st: 0 managed, 2 deleted, 1 detached, 0 failed"),
        "{progress}"
    );
    assert_eq!(existing(), BTreeSet::from(["fixed-1".to_string()]));

    // A delete that cannot delete everything (the default: a type without delete support fails) leaves the
    // stack failed, with a line per deleted resource and the failure's error. (The detached thing still exists and
    // no stack manages it: taking it back is adopting it.)
    stack(all, &["--aou", "detachAll", "--adopt"], 0);
    let delete = |extra: &[&str], code: i32| {
        let mut args = vec![
            "stack",
            "group",
            "delete",
            "-n",
            "st",
            "-g",
            "rg",
            "--aou",
            "deleteAll",
            "--yes",
        ];
        args.extend_from_slice(extra);
        expect(&home, &on(url, &args), code)
    };
    let out = delete(&[], 1);
    let progress = stderr(&out);
    assert!(thing_line(&progress, "deleted", "quick"), "{progress}");
    assert!(thing_line(&progress, "deleted", "slow-1"), "{progress}");
    assert!(thing_line(&progress, "failed", "fixed-1"), "{progress}");
    assert!(
        progress.contains(r#"stack st: failed Things Thing {"name":"fixed-1"}: "#),
        "the failure's error is on its line: {progress}"
    );
    assert!(progress.contains("stack st: failed ("), "{progress}");
    let left = stdout_json(&out);
    assert_eq!(
        left["properties"]["provisioningState"], "failed",
        "{left:#}"
    );
    assert!(
        stderr_error(&out)["error"]["code"].is_string(),
        "{progress}"
    );
    assert_eq!(existing(), BTreeSet::from(["fixed-1".to_string()]));

    // The same delete with `detach` for such types goes through: the flag reached the DELETE.
    let out = delete(&["--resources-without-delete-support", "detach"], 0);
    let progress = stderr(&out);
    assert!(progress.contains("stack st: deleted ("), "{progress}");
    expect(
        &home,
        &on(url, &["stack", "group", "show", "-n", "st", "-g", "rg"]),
        1,
    );
    assert_eq!(existing(), BTreeSet::from(["fixed-1".to_string()]));
}

#[test]
fn every_stack_command_has_help_and_takes_the_server_flags() {
    let dir = tempfile::tempdir().unwrap();
    for scope in ["group", "sub"] {
        for verb in [
            "create", "validate", "show", "list", "delete", "export", "what-if",
        ] {
            let out = expect(dir.path(), &["stack", scope, verb, "--help"], 0);
            let help = String::from_utf8_lossy(&out.stdout);
            for flag in ["--server", "--token", "--ca-cert"] {
                assert!(help.contains(flag), "stack {scope} {verb}: {help}");
            }
        }
    }
    let create = expect(dir.path(), &["stack", "sub", "create", "--help"], 0);
    let help = String::from_utf8_lossy(&create.stdout);
    for flag in [
        "--resources-without-delete-support",
        "--deny-settings-excluded-principals",
        "--deny-settings-excluded-actions",
        "--deny-settings-apply-to-child-scopes",
        "--tags",
        "--deployment-resource-group",
        "--query",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    // A subscription stack needs a location; a group stack needs its group (usage errors, exit 2).
    expect(
        dir.path(),
        &[
            "stack",
            "sub",
            "create",
            "-n",
            "s",
            "-f",
            "x.json",
            "--aou",
            "detachAll",
        ],
        2,
    );
    expect(dir.path(), &["stack", "group", "show", "-n", "s"], 2);
    // An unreachable server is an error (exit 1), not a usage error.
    let out = expect(
        dir.path(),
        &[
            "stack",
            "group",
            "show",
            "-n",
            "s",
            "-g",
            "rg",
            "--server",
            "http://127.0.0.1:9",
        ],
        1,
    );
    assert!(
        stderr(&out).contains("cannot reach the server"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn management_group_stacks_in_process() {
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
    let mut mg_template = template(&["a", "b"]);
    mg_template["$schema"] = json!(
        "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#"
    );
    let file = dir.path().join("mg.json");
    std::fs::write(&file, mg_template.to_string()).unwrap();
    let (file, params) = (file.to_str().unwrap(), params.to_str().unwrap());
    let create = [
        "stack",
        "mg",
        "create",
        "-n",
        "files",
        "-m",
        "platform",
        "-l",
        "westus",
        "-f",
        file,
        "-p",
        params,
        "--action-on-unmanage",
        "deleteAll",
        "--yes",
    ];
    let created = ok_json(&home, &create);
    assert_eq!(
        created["properties"]["provisioningState"], "succeeded",
        "{created:#}"
    );
    assert_eq!(
        created["properties"]["deploymentScope"],
        "/providers/Microsoft.Management/managementGroups/platform"
    );
    assert!(root.join("a.txt").exists() && root.join("b.txt").exists());
    let listed = ok_json(&home, &["stack", "mg", "list", "-m", "platform"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed:#}");

    // Usage mistakes are caught before anything runs (exit 2).
    let no_group = expect(&home, &["stack", "mg", "show", "-n", "files"], 2);
    assert!(
        stderr(&no_group).contains("--management-group-id"),
        "{}",
        stderr(&no_group)
    );
    let wrong_flag = [
        "stack",
        "mg",
        "create",
        "-n",
        "x",
        "-m",
        "platform",
        "-l",
        "westus",
        "-f",
        file,
        "--deployment-resource-group",
        "rg",
        "--action-on-unmanage",
        "detachAll",
    ];
    expect(&home, &wrong_flag, 2);
    let no_location = [
        "stack",
        "mg",
        "create",
        "-n",
        "x",
        "-m",
        "platform",
        "-f",
        file,
        "--action-on-unmanage",
        "detachAll",
    ];
    expect(&home, &no_location, 2);

    let out = cairn(
        &home,
        &[
            "stack",
            "mg",
            "delete",
            "-n",
            "files",
            "-m",
            "platform",
            "--action-on-unmanage",
            "deleteAll",
            "--yes",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!root.join("a.txt").exists() && !root.join("b.txt").exists());
}

/// Seed 002's `{"type": "armApiCall", "value": "[list...()]"}` in a parameters file, on the in-process engine: the
/// stack evaluates the call, keeps it as an `apiReference` (never the secret), and deletes with it after the
/// secret rotated.
#[test]
fn an_arm_api_call_in_a_parameters_file_is_kept_as_a_directive() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let secret = |value: &str| {
        let vault = dir.path().join(format!("vault-{value}.json"));
        std::fs::write(
            &vault,
            json!({
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "contentVersion": "1.0.0.0",
                "resources": [
                    {"type": "Microsoft.KeyVault/vaults", "apiVersion": "2023-07-01", "name": "ops",
                     "location": "local", "properties": {}},
                    {"type": "Microsoft.KeyVault/vaults/secrets", "apiVersion": "2023-07-01", "name": "ops/tok",
                     "dependsOn": ["[resourceId('Microsoft.KeyVault/vaults', 'ops')]"],
                     "properties": {"value": value}}
                ]
            })
            .to_string(),
        )
        .unwrap();
        ok_json(
            &home,
            &[
                "deployment",
                "group",
                "create",
                "-g",
                "rg",
                "-f",
                vault.to_str().unwrap(),
                "-o",
                "json",
            ],
        );
    };
    let mut template = template(&["a"]);
    template["parameters"] = json!({"secretName": {"type": "string", "defaultValue": "tok"}});
    template["extensions"]["local"]["config"] = json!({
        "rootDirectory": {"type": "string"}, "token": {"type": "secureString"}});
    let file = dir.path().join("main.json");
    std::fs::write(&file, template.to_string()).unwrap();
    let call = "[listValue(resourceId('Microsoft.KeyVault/vaults/secrets', 'ops', parameters('secretName')), '2023-07-01').value]";
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({"parameters": {}, "extensionConfigs": {"local": {
            "rootDirectory": {"value": root}, "token": {"type": "armApiCall", "value": call}}}})
        .to_string(),
    )
    .unwrap();

    ok_json(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    secret("first-7d41");
    let (file, params) = (file.to_str().unwrap(), params.to_str().unwrap());
    let created = ok_json(
        &home,
        &[
            "stack",
            "group",
            "create",
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
            "--deny-settings-mode",
            "none",
            "--yes",
            "-o",
            "json",
        ],
    );
    assert!(root.join("a.txt").exists());
    let text = created.to_string();
    assert!(!text.contains("first-7d41"), "{created:#}");
    let token = created["properties"]["deploymentExtensions"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["name"] == "Local"))
        .map(|e| e["config"]["token"].clone())
        .unwrap_or_default();
    assert_eq!(
        token["apiReference"]["armResourceId"],
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/ops/secrets/tok",
        "{created:#}"
    );

    secret("rotated-0b9e");
    ok_json(
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
    assert!(!root.join("a.txt").exists());
}

#[test]
fn protect_and_retain_hold_through_the_cli() {
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
    std::fs::write(&full, template(&["a", "b", "c"]).to_string()).unwrap();
    let smaller = dir.path().join("smaller.json");
    std::fs::write(&smaller, template(&["a"]).to_string()).unwrap();
    let (full, smaller, params) = (
        full.to_str().unwrap(),
        smaller.to_str().unwrap(),
        params.to_str().unwrap(),
    );
    let protect_b = r#"Local/File {"path": "b.txt"}"#;
    let retain_c = r#"local/file *"c.txt"*"#;
    ok_json(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    let stack = |verb: &str, file: &str, extra: &[&str]| {
        let mut args = vec![
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
            "--aou",
            "deleteAll",
            "--yes",
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        cairn(&home, &args)
    };
    let policy = ["--protect", protect_b, "--retain", retain_c];

    let created = stack("create", full, &policy);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    let created = stdout_json(&created);
    assert_eq!(created["properties"]["protect"], json!([protect_b]));
    assert_eq!(created["properties"]["retain"], json!([retain_c]));

    // The plan shows what the update would do, and that it would be refused.
    let plan = stack("what-if", smaller, &policy);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr(&plan));
    let plan = stdout_json(&plan);
    let changes = change_types(&plan);
    assert!(
        changes.contains(&("b.txt".into(), "delete".into())),
        "{changes:?}"
    );
    assert!(
        changes.contains(&("c.txt".into(), "detach".into())),
        "{changes:?}"
    );
    assert!(
        plan.to_string()
            .contains("DeploymentStackResourceProtected"),
        "{plan:#}"
    );

    // The update is refused before anything leaves the stack.
    let refused = stack("create", smaller, &policy);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        stderr(&refused).contains("DeploymentStackResourceProtected"),
        "{}",
        stderr(&refused)
    );
    assert!(root.join("b.txt").exists() && root.join("c.txt").exists());

    // With the bypass, b is deleted and c, retained, is detached.
    let updated = stack(
        "create",
        smaller,
        &[&policy[..], &["--bypass-protection"]].concat(),
    );
    assert_eq!(updated.status.code(), Some(0), "{}", stderr(&updated));
    assert!(!root.join("b.txt").exists(), "b deleted");
    assert!(root.join("c.txt").exists(), "c retained");

    // A stack delete that would delete a protected file is refused; the bypass lets it through.
    let protect_all = stack("create", smaller, &["--protect", "Local/File *"]);
    assert_eq!(
        protect_all.status.code(),
        Some(0),
        "{}",
        stderr(&protect_all)
    );
    let delete = |extra: &[&str]| {
        let mut args = vec![
            "stack",
            "group",
            "delete",
            "-n",
            "st",
            "-g",
            "rg",
            "--aou",
            "deleteAll",
            "--yes",
        ];
        args.extend_from_slice(extra);
        cairn(&home, &args)
    };
    let refused = delete(&[]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        stderr(&refused).contains("DeploymentStackResourceProtected"),
        "{}",
        stderr(&refused)
    );
    assert!(root.join("a.txt").exists());
    let deleted = delete(&["--bypass-protection"]);
    assert_eq!(deleted.status.code(), Some(0), "{}", stderr(&deleted));
    assert!(!root.join("a.txt").exists());
}

/// A stack create that fails (here over a file a deployment made, which no stack manages) prints its error alone
/// on stderr and exits 1, as a failed deployment does: no stack record on stdout. `--adopt` then takes the file
/// over on purpose.
#[test]
fn a_failed_create_prints_only_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } }).to_string(),
    )
    .unwrap();
    let file = dir.path().join("main.json");
    std::fs::write(&file, template(&["a"]).to_string()).unwrap();
    let (file, params) = (file.to_str().unwrap(), params.to_str().unwrap());
    ok_json(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    ok_json(
        &home,
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-f",
            file,
            "-p",
            params,
        ],
    );
    let create = [
        "stack",
        "group",
        "create",
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
    ];
    let out = expect(&home, &create, 1);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "",
        "a failed create printed the stack"
    );
    assert!(
        stderr(&out).contains("DeploymentStackResourceExistsUnmanaged"),
        "{}",
        stderr(&out)
    );
    let mut adopt = create.to_vec();
    adopt.push("--adopt");
    let adopted = stdout_json(&expect(&home, &adopt, 0));
    assert_eq!(adopted["properties"]["provisioningState"], "succeeded");
}

/// `stack group create --no-wait` with `--server` returns once the operation is accepted, with the stack as
/// accepted on stdout and no progress; `stack show` then follows it to its end. In process it waits (with a note).
#[test]
fn create_no_wait_returns_once_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("client-home");
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    let registry = dir.path().join("extensions.json");
    std::fs::write(&registry, json!({ "extensions": [] }).to_string()).unwrap();
    let server = common::start_server(&dir.path().join("server-data"), &registry);
    let url = server.url.as_str();
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } }).to_string(),
    )
    .unwrap();
    let file = dir.path().join("main.json");
    std::fs::write(&file, template(&["a"]).to_string()).unwrap();
    let (file, params) = (file.to_str().unwrap(), params.to_str().unwrap());
    expect(
        &home,
        &on(url, &["group", "create", "-n", "rg", "-l", "local"]),
        0,
    );
    let create = [
        "stack",
        "group",
        "create",
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
        "--no-wait",
    ];
    let out = expect(&home, &on(url, &create), 0);
    let accepted = stdout_json(&out);
    assert_eq!(accepted["name"], "st", "{accepted:#}");
    assert!(
        !stderr(&out).contains("stack st: succeeded"),
        "--no-wait followed the operation: {}",
        stderr(&out)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let shown = stdout_json(&expect(
            &home,
            &on(url, &["stack", "group", "show", "-n", "st", "-g", "rg"]),
            0,
        ));
        if shown["properties"]["provisioningState"] == "succeeded" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(root.join("a.txt").exists());

    // In process the engine lives as long as the command: it runs the operation to its end first.
    let local_home = dir.path().join("local-home");
    let local_params = dir.path().join("local-params.json");
    let local_root = dir.path().join("local-files");
    std::fs::write(
        &local_params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": local_root } } } }).to_string(),
    )
    .unwrap();
    let mut create = create;
    create[10] = local_params.to_str().unwrap();
    expect(
        &local_home,
        &["group", "create", "-n", "rg", "-l", "local"],
        0,
    );
    let out = expect(&local_home, &create, 0);
    assert_eq!(
        stdout_json(&out)["properties"]["provisioningState"],
        "succeeded"
    );
    assert!(
        stderr(&out).contains("note: --no-wait needs --server"),
        "{}",
        stderr(&out)
    );
}

/// A stack deletes a `Directory` whose `File`s live in subdirectories nobody declared (a File makes its parents):
/// the files go first, then the directory with the parents they left empty.
#[test]
fn a_stack_deletes_a_directory_with_files_in_undeclared_subdirectories() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let root = dir.path().join("files");
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": {}, "extensionConfigs": { "local": { "rootDirectory": { "value": root } } } }).to_string(),
    )
    .unwrap();
    let file = |name: &str, path: &str| {
        (
            name.to_owned(),
            json!({ "extension": "local", "type": "File", "dependsOn": ["site"],
                    "properties": { "path": path, "content": "x\n" } }),
        )
    };
    let mut resources: serde_json::Map<String, Value> = [
        file("style", "site/css/main.css"),
        file("script", "site/js/lib/app.js"),
    ]
    .into_iter()
    .collect();
    resources.insert(
        "site".into(),
        json!({ "extension": "local", "type": "Directory", "properties": { "path": "site" } }),
    );
    let template = dir.path().join("main.json");
    std::fs::write(
        &template,
        json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.0",
            "contentVersion": "1.0.0.0",
            "extensions": { "local": { "name": "Local", "version": "1.0.0" } },
            "resources": resources
        })
        .to_string(),
    )
    .unwrap();
    let (template, params) = (template.to_str().unwrap(), params.to_str().unwrap());
    ok_json(&home, &["group", "create", "-n", "rg", "-l", "local"]);
    ok_json(
        &home,
        &[
            "stack",
            "group",
            "create",
            "-n",
            "st",
            "-g",
            "rg",
            "-f",
            template,
            "-p",
            params,
            "--action-on-unmanage",
            "deleteAll",
            "--yes",
        ],
    );
    assert!(root.join("site/js/lib/app.js").is_file());
    let out = expect(
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
        0,
    );
    assert!(
        stderr(&out).contains(r#"deleted Local Directory {"path":"site"}"#),
        "{}",
        stderr(&out)
    );
    assert!(!root.join("site").exists());
}

/// `stack group cancel` through a server stops a running delete: the deletes in flight finish, no new one starts,
/// the stack ends `canceled` managing exactly the things still there, and the next delete finishes the job.
#[test]
fn a_running_stack_delete_is_canceled_and_the_next_one_carries_on() {
    let (_runtime, things_url, things) = start_things();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("client-home");
    let registry = dir.path().join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Things", "version": "1.0.0",
                                  "transport": { "kind": "http", "url": things_url } } ] })
        .to_string(),
    )
    .unwrap();
    let server = common::start_server(&dir.path().join("server-data"), &registry);
    let url = server.url.as_str();
    let names: Vec<String> = (0..40).map(|i| format!("slow-{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let all = dir.path().join("all.json");
    std::fs::write(&all, things_template(&names).to_string()).unwrap();
    let all = all.to_str().unwrap();
    expect(
        &home,
        &on(url, &["group", "create", "-n", "rg", "-l", "local"]),
        0,
    );
    expect(
        &home,
        &on(
            url,
            &[
                "stack",
                "group",
                "create",
                "-n",
                "st",
                "-g",
                "rg",
                "-f",
                all,
                "--aou",
                "detachAll",
                "--yes",
            ],
        ),
        0,
    );
    let existing = || things.existing.lock().unwrap().len();
    assert_eq!(existing(), 40);

    let delete_args = on(
        url,
        &[
            "stack",
            "group",
            "delete",
            "-n",
            "st",
            "-g",
            "rg",
            "--aou",
            "deleteAll",
            "--yes",
        ],
    );
    let running = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", &home)
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .args(&delete_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first deletes are in flight (each takes SLOW_DELETE) once the stack says it is deleting.
    let show = on(url, &["stack", "group", "show", "-n", "st", "-g", "rg"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let shown = stdout_json(&expect(&home, &show, 0));
        if shown["properties"]["provisioningState"] == "deleting" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(SLOW_DELETE / 3);
    let canceled = expect(
        &home,
        &on(url, &["stack", "group", "cancel", "-n", "st", "-g", "rg"]),
        0,
    );
    assert!(
        stderr(&canceled).contains("cancel requested"),
        "{}",
        stderr(&canceled)
    );
    let out = running.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    let stack = stdout_json(&expect(&home, &show, 0));
    assert_eq!(
        stack["properties"]["provisioningState"], "canceled",
        "{stack:#}"
    );
    assert_eq!(
        stack["properties"]["error"]["code"],
        "DeploymentStackCanceled"
    );
    let managed = stack["properties"]["resources"].as_array().unwrap().len();
    assert!(
        managed > 0 && managed < 40,
        "stopped part way: {managed} left"
    );
    assert_eq!(managed, existing(), "every thing still there is managed");

    let again = expect(
        &home,
        &on(url, &["stack", "group", "cancel", "-n", "st", "-g", "rg"]),
        1,
    );
    assert!(
        stderr(&again).contains("DeploymentStackCannotBeCanceled"),
        "{}",
        stderr(&again)
    );
    expect(&home, &delete_args, 0);
    assert_eq!(existing(), 0);
}
