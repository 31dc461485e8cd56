//! Scripting like az, end to end on the in-process engine: `--query` (JMESPath), `-o json|jsonc|yaml|table|tsv|none`
//! (snapshots of table, tsv and yaml), enum values in any case, `--mode Complete` refused before anything is sent,
//! and templates from `--template-uri` (served by a loopback HTTP server of the test) and `--template-spec`.

mod in_process;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use in_process::Cli;
use serde_json::{Value, json};

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// No resources, an int parameter and its double as output: a deployment that finishes at once.
fn twice_template() -> String {
    json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "parameters": {"count": {"type": "int", "defaultValue": 1}},
        "resources": [],
        "outputs": {"twice": {"type": "int", "value": "[mul(parameters('count'), 2)]"}}
    })
    .to_string()
}

/// A group `rg` with deployments `alpha` (count 2) and `beta` (count 5).
fn two_deployments() -> Cli {
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    let template = cli.write("twice.json", &twice_template());
    for (name, count) in [("alpha", "count=2"), ("beta", "count=5")] {
        cli.expect(
            &[
                "deployment",
                "group",
                "create",
                "-g",
                "rg",
                "-n",
                name,
                "-f",
                &template,
                "-p",
                count,
                "--no-progress",
                "-o",
                "none",
            ],
            0,
        );
    }
    cli
}

const LIST_QUERY: &str = "sort_by([], &name)[].{name: name, state: properties.provisioningState, twice: properties.outputs.twice.value, mode: properties.mode}";

fn list(cli: &Cli, format: &str) -> String {
    cli.expect(
        &[
            "deployment",
            "group",
            "list",
            "-g",
            "rg",
            "--query",
            LIST_QUERY,
            "-o",
            format,
        ],
        0,
    )
}

#[test]
fn output_table_of_a_query() {
    let cli = two_deployments();
    insta::assert_snapshot!(list(&cli, "table"));
    // The command's own columns without a query (az's table transformer).
    let groups = cli.expect(&["group", "list", "-o", "table"], 0);
    insta::assert_snapshot!("group_list_table", groups);
}

#[test]
fn output_tsv_of_a_query() {
    let cli = two_deployments();
    let tsv = list(&cli, "tsv");
    insta::assert_snapshot!(tsv);
    // What scripts do with it: one line per deployment, fields by position.
    let names: Vec<&str> = tsv.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(names, ["alpha", "beta"]);
}

#[test]
fn output_yaml_of_a_query() {
    let cli = two_deployments();
    insta::assert_snapshot!(list(&cli, "yaml"));
}

#[test]
fn output_json_jsonc_and_none() {
    let cli = two_deployments();
    let json = list(&cli, "json");
    let parsed: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        parsed[1],
        json!({"name": "beta", "state": "Succeeded", "twice": 10, "mode": "Incremental"})
    );
    // jsonc is plain JSON when stdout is not a terminal.
    assert_eq!(list(&cli, "jsonc"), json);
    assert_eq!(list(&cli, "none"), "");
    // Format names in any case, as az takes them.
    assert_eq!(list(&cli, "JSON"), json);
    assert_eq!(list(&cli, "Table"), list(&cli, "table"));
}

#[test]
fn query_is_jmespath() {
    let cli = two_deployments();
    let succeeded = cli.json(&[
        "deployment",
        "group",
        "list",
        "-g",
        "rg",
        "--query",
        "[?properties.outputs.twice.value > `5`].name",
    ]);
    assert_eq!(succeeded, json!(["beta"]));
    let count = cli.json(&[
        "deployment",
        "group",
        "list",
        "-g",
        "rg",
        "--query",
        "length(@)",
    ]);
    assert_eq!(count, json!(2));
    let twice = cli.json(&[
        "deployment",
        "group",
        "show",
        "-g",
        "rg",
        "-n",
        "alpha",
        "--query",
        "properties.outputs.twice.value",
    ]);
    assert_eq!(twice, json!(4));
    // A query that selects nothing prints nothing, as az does.
    let missing = cli.expect(
        &[
            "deployment",
            "group",
            "show",
            "-g",
            "rg",
            "-n",
            "alpha",
            "--query",
            "properties.nothing",
        ],
        0,
    );
    assert_eq!(missing, "");
    // A query that does not parse is a usage error before anything runs (the group does not even exist).
    let error = cli.usage_error(&[
        "deployment",
        "group",
        "list",
        "-g",
        "nowhere",
        "--query",
        "[?name==",
    ]);
    assert!(error.contains("not a valid JMESPath query"), "{error}");
}

#[test]
fn mode_values_match_ignoring_case_and_complete_is_refused() {
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    let template = cli.write("twice.json", &twice_template());
    for (name, mode) in [
        ("lower", "incremental"),
        ("upper", "INCREMENTAL"),
        ("az", "Incremental"),
    ] {
        let mode_shown = cli.json(&[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-n",
            name,
            "-f",
            &template,
            "--mode",
            mode,
            "--no-progress",
            "--query",
            "properties.mode",
        ]);
        assert_eq!(mode_shown, "Incremental");
    }
    for command in ["create", "validate", "what-if"] {
        let error = cli.usage_error(&[
            "deployment",
            "group",
            command,
            "-g",
            "rg",
            "-n",
            "complete",
            "-f",
            &template,
            "--mode",
            "complete",
        ]);
        assert!(
            error.contains("--mode Complete is not supported"),
            "{error}"
        );
        assert!(
            error.contains("--action-on-unmanage deleteResources"),
            "{error}"
        );
    }
    // Nothing was sent: there is no deployment named `complete`.
    cli.expect(
        &["deployment", "group", "show", "-g", "rg", "-n", "complete"],
        1,
    );
}

/// A loopback HTTP server answering `GET path` from `files` (404 otherwise) and recording each request line.
struct TemplateServer {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TemplateServer {
    fn start(files: Vec<(&'static str, Vec<u8>)>) -> TemplateServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(16) {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                seen.lock().unwrap().push(request_line.trim().to_string());
                let target = request_line.split(' ').nth(1).unwrap_or("");
                let path = target.split('?').next().unwrap_or("");
                let response = match files.iter().find(|(p, _)| *p == path) {
                    Some((_, body)) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = stream.write_all(&response);
                let _ = stream.flush();
            }
        });
        TemplateServer { url, requests }
    }
}

#[test]
fn template_uri_is_fetched_by_the_engine_with_its_limits() {
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(5 * 1024 * 1024)).into_bytes();
    let server = TemplateServer::start(vec![
        ("/templates/twice.json", twice_template().into_bytes()),
        ("/templates/big.json", big),
    ]);
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    let uri = format!("{}/templates/twice.json", server.url);
    let deployed = cli.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "--template-uri",
        &uri,
        "--query-string",
        "sig=s3cret",
        "-p",
        "count=21",
        "--no-progress",
    ]);
    // The deployment takes the URI's file name; the query string went to the server and is never shown.
    assert_eq!(deployed["name"], "twice");
    assert_eq!(deployed["properties"]["outputs"]["twice"]["value"], 42);
    assert_eq!(deployed["properties"]["templateLink"]["uri"], uri.as_str());
    assert!(!deployed.to_string().contains("s3cret"), "{deployed}");
    assert!(
        server
            .requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("/templates/twice.json?sig=s3cret")),
        "{:?}",
        server.requests.lock().unwrap()
    );
    // Over the linked-template size limit (4 MiB): refused as ARM refuses it.
    let out = cli.run(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-u",
        &format!("{}/templates/big.json", server.url),
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("InvalidContentLink") && stderr.contains("larger than the limit"),
        "{stderr}"
    );
    // --query-string only goes with --template-uri.
    let template = cli.write("twice.json", &twice_template());
    cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &template,
        "-q",
        "sig=x",
    ]);
    // One template source at a time.
    cli.usage_error(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-f",
        &template,
        "-u",
        &uri,
    ]);
}

#[test]
fn template_spec_versions_deploy_by_id() {
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    // The spec and its version are created by a deployment (the engine's template spec provider).
    let spec_template = json!({
        "$schema": SCHEMA, "contentVersion": "1.0.0.0",
        "resources": [
            {"type": "Microsoft.Resources/templateSpecs", "apiVersion": "2022-02-01", "name": "greeter",
             "location": "local", "properties": {"description": "says hello"}},
            {"type": "Microsoft.Resources/templateSpecs/versions", "apiVersion": "2022-02-01",
             "name": "greeter/1.0", "location": "local",
             "dependsOn": ["[resourceId('Microsoft.Resources/templateSpecs', 'greeter')]"],
             "properties": {"mainTemplate": {
                 "$schema": SCHEMA, "contentVersion": "1.0.0.0",
                 "parameters": {"who": {"type": "string"}}, "resources": [],
                 "outputs": {"greeting": {"type": "string", "value": "[[concat('hello ', parameters('who'))]"}}}}}
        ]
    });
    let file = cli.write("spec.json", &spec_template.to_string());
    cli.expect(
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-f",
            &file,
            "--no-progress",
            "-o",
            "none",
        ],
        0,
    );
    let id = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Resources/templateSpecs/greeter/versions/1.0";
    let deployed = cli.json(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "--template-spec",
        id,
        "-p",
        "who=cairn",
        "--no-progress",
    ]);
    assert_eq!(deployed["name"], "greeter");
    assert_eq!(
        deployed["properties"]["outputs"]["greeting"]["value"],
        "hello cairn"
    );
    assert_eq!(deployed["properties"]["templateLink"]["id"], id);
    // Stacks take it too.
    let validated = cli.json(&[
        "stack",
        "group",
        "validate",
        "-g",
        "rg",
        "-n",
        "st",
        "-s",
        id,
        "-p",
        "who=x",
        "--aou",
        "detachAll",
    ]);
    assert!(
        validated.get("error").is_none_or(Value::is_null),
        "{validated}"
    );
    // A version that does not exist is the engine's error.
    let missing = cli.run(&[
        "deployment",
        "group",
        "create",
        "-g",
        "rg",
        "-s",
        &id.replace("1.0", "9.9"),
        "--no-progress",
    ]);
    assert_ne!(missing.status.code(), Some(0));
}

#[test]
fn the_other_commands_take_output_and_query() {
    let cli = Cli::new();
    let template = cli.write("twice.json", &twice_template());
    // template validate: a yaml report.
    let valid = cli.expect(&["template", "validate", "-f", &template, "-o", "yaml"], 0);
    assert!(valid.starts_with("status: valid"), "{valid}");
    // template expand: a part of the plan.
    let outputs = cli.json(&[
        "template", "expand", "-f", &template, "-p", "count=4", "--query", "outputs",
    ]);
    assert!(outputs.to_string().contains('8'), "{outputs}");
    // extension list: the built-ins' names, one per line.
    let names = cli.expect(&["extension", "list", "--query", "[].name", "-o", "tsv"], 0);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        ["Local", "PostgreSql", "Kubernetes", "Kubernetes"]
    );
    // extension conformance: results as data, no failure among them.
    let failed = cli.json(&[
        "extension",
        "conformance",
        "--builtin",
        "local",
        "--query",
        "[?result=='fail'].check",
    ]);
    assert_eq!(failed, json!([]));
    // lint: the report, queried.
    let status = cli.json(&["lint", "--stacks", "-f", &template, "--query", "status"]);
    assert_eq!(status, "clean");
}
