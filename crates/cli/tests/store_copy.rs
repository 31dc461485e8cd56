//! `cairn store copy --from DIR --to URL` against a real PostgreSQL: a data directory with a finished deployment
//! (a secure parameter, outputs, a journal) and a stack is copied, a second copy is refused unless `--force`, and
//! `cairn serve --store URL` then serves what was copied — and writes to PostgreSQL, not to the directory.

mod common;

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cairn_testpg::TestPostgres;
use serde_json::{Value, json};
use sqlx::PgPool;

const SUBSCRIPTION: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const PASSWORD: &str = "copied-canary-3f1d9a7c";

/// `cairn` on the data directory `home`, with a clean store environment.
fn cairn(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_STORE_KEY")
        .env_remove("CAIRN_STORE_KEY_FILE")
        .env_remove("CAIRN_SERVER")
        .env_remove("CAIRN_TOKEN")
        .env_remove("CAIRN_EXTENSIONS")
        .args(args)
        .output()
        .expect("cairn runs")
}

fn succeeded(home: &Path, args: &[&str]) -> String {
    let out = cairn(home, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "cairn {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn template(file: &str) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": { "password": { "type": "securestring", "defaultValue": "" } },
        "extensions": { "local": { "name": "Local", "version": "1.0.0" } },
        "resources": { "file": { "extension": "local", "type": "File", "apiVersion": "1.0.0",
            "properties": { "path": file, "content": "[format('{0} characters', length(parameters('password')))]" } } },
        "outputs": { "greeting": { "type": "string", "value": "[format('hello {0}', 'copy')]" } }
    })
}

/// The line of `report` counting `label`.
fn count(report: &str, label: &str) -> u64 {
    report
        .lines()
        .find_map(|line| {
            let (count, rest) = line.trim().split_once(' ')?;
            (rest.trim() == label).then(|| count.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no count of {label} in {report}"))
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = client.get(url).send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_data_dir_is_served_from_postgres() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).expect("files dir");
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        json!({ "parameters": { "password": { "value": PASSWORD } },
                "extensionConfigs": { "local": { "rootDirectory": { "value": files } } } })
        .to_string(),
    )
    .expect("params");
    let deployed = dir.path().join("deployed.json");
    std::fs::write(&deployed, template("deployed.txt").to_string()).expect("template");
    let stacked = dir.path().join("stacked.json");
    std::fs::write(&stacked, template("stacked.txt").to_string()).expect("template");
    let (params, deployed, stacked) = (
        params.to_str().unwrap(),
        deployed.to_str().unwrap(),
        stacked.to_str().unwrap(),
    );

    succeeded(&home, &["group", "create", "-n", "rg", "-l", "westus"]);
    succeeded(
        &home,
        &[
            "deployment",
            "group",
            "create",
            "-g",
            "rg",
            "-n",
            "dep",
            "-f",
            deployed,
            "-p",
            params,
            "-o",
            "none",
        ],
    );
    succeeded(
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
            stacked,
            "-p",
            params,
            "--action-on-unmanage",
            "detachAll",
            "--yes",
            "-o",
            "none",
        ],
    );
    assert!(files.join("deployed.txt").exists() && files.join("stacked.txt").exists());

    let cluster = TestPostgres::start();
    let admin = PgPool::connect(&cluster.url()).await.expect("connect");
    sqlx::query("CREATE DATABASE copied")
        .execute(&admin)
        .await
        .expect("create database");
    admin.close().await;
    let url = cluster.url_for_database("copied");
    let key_file = home.join("cairn.key");
    let key = key_file.to_str().unwrap();

    let report = succeeded(
        &home,
        &[
            "store",
            "copy",
            "--from",
            home.to_str().unwrap(),
            "--to",
            &url,
            "--to-key-file",
            key,
        ],
    );
    assert!(
        report.contains("into the cairn PostgreSQL database postgres://postgres@"),
        "{report}"
    );
    assert!(!report.contains(cluster.password()), "{report}");
    assert_eq!(count(&report, "resource groups"), 1, "{report}");
    assert_eq!(count(&report, "deployment stacks"), 1, "{report}");
    assert!(
        count(&report, "deployments") >= 2,
        "the deployment and the stack's: {report}"
    );
    assert!(count(&report, "journal steps") >= 2, "{report}");
    assert!(
        count(&report, "secrets") >= 1,
        "the secure parameter: {report}"
    );
    assert!(count(&report, "inventory resources") >= 2, "{report}");

    let again = cairn(
        &home,
        &[
            "store",
            "copy",
            "--from",
            home.to_str().unwrap(),
            "--to",
            &url,
            "--to-key-file",
            key,
        ],
    );
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("not empty") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(!stderr.contains(cluster.password()), "{stderr}");
    let forced = succeeded(
        &home,
        &[
            "store",
            "copy",
            "--from",
            home.to_str().unwrap(),
            "--to",
            &url,
            "--to-key-file",
            key,
            "--force",
        ],
    );
    assert_eq!(count(&forced, "deployment stacks"), 1, "{forced}");

    // The database holds the secure parameter sealed, never in plaintext.
    let pool = PgPool::connect(&url).await.expect("connect");
    let dumped: Vec<String> = sqlx::query_scalar(
        "SELECT t::text FROM secrets t UNION ALL SELECT t::text FROM deployment_requests t \
         UNION ALL SELECT t::text FROM deployment_operations t UNION ALL SELECT t::text FROM deployments t",
    )
    .fetch_all(&pool)
    .await
    .expect("dump");
    assert!(!dumped.is_empty());
    assert!(
        dumped.iter().all(|row| !row.contains(PASSWORD)),
        "plaintext secret in PostgreSQL"
    );

    let server = common::start_serve(
        &[
            OsStr::new("--store"),
            OsStr::new(&url),
            OsStr::new("--store-key-file"),
            key_file.as_os_str(),
        ],
        &[],
    );
    let client = reqwest::Client::new();
    let base = format!("{}{SUBSCRIPTION}/resourceGroups/rg", server.url);
    let (status, deployment) = get(
        &client,
        &format!("{base}/providers/Microsoft.Resources/deployments/dep?api-version=2025-04-01"),
    )
    .await;
    assert_eq!(status, 200, "{deployment:#}");
    assert_eq!(
        deployment["properties"]["provisioningState"], "Succeeded",
        "{deployment:#}"
    );
    assert_eq!(
        deployment["properties"]["outputs"]["greeting"]["value"], "hello copy",
        "{deployment:#}"
    );
    assert!(!deployment.to_string().contains(PASSWORD));
    let (status, operations) = get(
        &client,
        &format!(
            "{base}/providers/Microsoft.Resources/deployments/dep/operations?api-version=2025-04-01"
        ),
    )
    .await;
    assert_eq!(status, 200, "{operations:#}");
    assert!(
        operations["value"]
            .as_array()
            .is_some_and(|ops| !ops.is_empty()),
        "{operations:#}"
    );
    let (status, stack) = get(
        &client,
        &format!("{base}/providers/Microsoft.Resources/deploymentStacks/st?api-version=2024-03-01"),
    )
    .await;
    assert_eq!(status, 200, "{stack:#}");
    assert_eq!(
        stack["properties"]["provisioningState"], "succeeded",
        "{stack:#}"
    );

    // New writes go to PostgreSQL, not to the data directory.
    let response = client
        .put(format!(
            "{}{SUBSCRIPTION}/resourcegroups/served?api-version=2025-04-01",
            server.url
        ))
        .json(&json!({ "location": "westus" }))
        .send()
        .await
        .expect("put group");
    assert!(response.status().is_success(), "{}", response.status());
    let started = Instant::now();
    loop {
        let groups: Vec<String> =
            sqlx::query_scalar("SELECT name FROM resource_groups ORDER BY name")
                .fetch_all(&pool)
                .await
                .expect("groups");
        if groups == ["rg", "served"] {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{groups:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(server);
    let local = cairn(&home, &["group", "show", "-n", "served"]);
    assert_ne!(
        local.status.code(),
        Some(0),
        "the data directory did not get the new group"
    );
    pool.close().await;
}
