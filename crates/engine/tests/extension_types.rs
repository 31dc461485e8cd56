//! Extension resource bodies checked against the types the registry knows, before anything runs: a deployment's
//! validation refuses a misspelt, missing or mistyped property with ARM errors whose `TemplateViolation` path leads
//! to the closest place the template writes; values known only at run time are not judged; what-if reports them
//! and an identifier the template changed since the last run.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::deployment::DeploymentWhatIf;
use cairn_engine::{Engine, Providers};
use cairn_host::{ExtensionHost, HostSettings, RegisteredExtension, Registry, RetryPolicy};
use cairn_template::resource_types::types::{Flags, TypeBuilder, TypeSet};
use common::*;
use serde_json::{Value, json};

/// The fake extension's `widget@v1`: `name` required and identifier, `size` an int, `uid` read-only.
fn widget_types() -> TypeSet {
    let mut b = TypeBuilder::new("Fake", "1.0.0");
    let string = b.string();
    let int = b.int();
    let body = b.object(
        "widget",
        vec![
            (
                "name",
                string.clone(),
                Flags::REQUIRED | Flags::IDENTIFIER,
                "",
            ),
            ("size", int, Flags::NONE, ""),
            ("uid", string, Flags::READ_ONLY, ""),
        ],
        None,
    );
    b.resource("widget", "v1", body);
    b.finish()
}

async fn setup_typed() -> TestEnv {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = open_store(dir.path()).await;
    create_group(&store, "rg1").await;
    let fake = FakeExtension::new(Duration::from_millis(1));
    let mut registry = Registry::new();
    registry.register(
        RegisteredExtension::new("Fake", "1.0.0", Arc::new(FakeTransport(fake.clone())))
            .with_types(Arc::new(widget_types())),
    );
    let settings = HostSettings {
        relo_poll_interval: Duration::from_millis(10),
        min_poll_interval: Duration::from_millis(10),
        retry: RetryPolicy::none(),
        ..HostSettings::default()
    };
    let host = Arc::new(ExtensionHost::new(
        Arc::new(registry),
        settings,
        "http://localhost/cairn-test",
    ));
    let engine =
        Engine::new(store.clone(), host, Providers::empty(), common::settings()).expect("engine");
    TestEnv {
        dir,
        store,
        engine,
        fake,
    }
}

/// The innermost errors of a refused validation, as JSON.
async fn refused(env: &TestEnv, template: Value) -> Vec<Value> {
    let error = env
        .engine
        .validate(RG, "typed", request(template, json!({})))
        .await
        .expect_err("refused");
    let detail = serde_json::to_value(error.detail()).expect("JSON");
    fn leaves(e: &Value, out: &mut Vec<Value>) {
        match e.get("details").and_then(Value::as_array) {
            Some(details) if !details.is_empty() => details.iter().for_each(|d| leaves(d, out)),
            _ => out.push(e.clone()),
        }
    }
    let mut out = Vec::new();
    leaves(&detail, &mut out);
    out
}

fn violation_path(e: &Value) -> &str {
    e["additionalInfo"][0]["info"]["path"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_refuses_bodies_that_do_not_fit_their_type() {
    let env = setup_typed().await;
    let template = fake_template(
        json!({
            "a": widget("a", json!({ "sise": 1 })),
            "b": { "extension": "fake", "type": "widget", "apiVersion": "v1", "properties": { "size": 2 } },
            "c": widget("c", json!({ "size": "big", "uid": "x" }))
        }),
        json!({}),
    );
    let errors = refused(&env, template).await;
    let found: Vec<(&str, &str, &str)> = errors
        .iter()
        .map(|e| {
            (
                e["code"].as_str().unwrap_or_default(),
                e["target"].as_str().unwrap_or_default(),
                violation_path(e),
            )
        })
        .collect();
    for expected in [
        (
            "UnknownExtensionResourceProperty",
            "resources.a.properties.sise",
            "resources.a.properties.sise",
        ),
        (
            "MissingExtensionResourceProperty",
            "resources.b.properties.name",
            "resources.b.properties",
        ),
        (
            "InvalidExtensionResourcePropertyType",
            "resources.c.properties.size",
            "resources.c.properties.size",
        ),
        (
            "ReadOnlyExtensionResourceProperty",
            "resources.c.properties.uid",
            "resources.c.properties.uid",
        ),
    ] {
        assert!(found.contains(&expected), "{expected:?} not in {found:#?}");
    }
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Did you mean 'size'?"),
        "{errors:#?}"
    );
    // Nothing ran.
    assert_eq!(env.fake.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_known_only_at_run_time_are_not_judged() {
    let env = setup_typed().await;
    let template = fake_template(
        json!({
            "a": widget("a", json!({ "size": 1 })),
            "b": widget("b", json!({ "size": "[reference('a').size]" }))
        }),
        json!({}),
    );
    env.engine
        .validate(RG, "typed", request(template.clone(), json!({})))
        .await
        .expect("valid");
    let record = deploy(&env.engine, RG, "typed", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_reports_bad_bodies_and_identifiers_that_changed() {
    let env = setup_typed().await;
    let first = fake_template(
        json!({ "w": widget("first", json!({ "size": 1 })) }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "typed", request(first, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let next = fake_template(
        json!({ "w": widget("second", json!({ "sise": 1 })) }),
        json!({}),
    );
    let what_if: DeploymentWhatIf = serde_json::from_value(
        json!({ "properties": { "mode": "Incremental", "template": next } }),
    )
    .expect("request");
    let result = env
        .engine
        .what_if(RG, "typed", what_if)
        .await
        .expect("what-if");
    let result = serde_json::to_value(result).expect("JSON");
    let diagnostics = result["properties"]["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let codes: Vec<(&str, &str)> = diagnostics
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default(),
                d["target"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        codes.contains(&(
            "UnknownExtensionResourceProperty",
            "resources.w.properties.sise"
        )),
        "{result:#}"
    );
    assert!(
        codes.contains(&(
            "ExtensionResourceIdentifierChanged",
            "resources.w.properties.name"
        )),
        "{result:#}"
    );
}
