//! Secret handling: a config property the extension does not echo appears in no log line, error, or
//! stored/returned value.

mod common;

use cairn_host::{
    CallContext, CreateOrUpdateRequest, ExtensionConfig, ExtensionKey, ResourceLocator,
};
use common::*;
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};

fn key() -> ExtensionKey {
    ExtensionKey::new(NAME, VERSION)
}

/// Collects everything tracing writes, at every level.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn unechoed_config_never_leaks() {
    const SECRET: &str = "s3cr3t-kubeconfig-value";
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // Global, and alone in this test binary: with a scoped subscriber, tests running in parallel threads
    // can cache "no interest" for shared callsites and hide events.
    tracing::subscriber::set_global_default(subscriber)
        .expect("the only subscriber of this binary");

    let fake = FakeExtension::start().await;
    let echoed = json!({ "type": "Acme.Queue/queues", "identifiers": { "name": "orders" }, "properties": { "name": "orders" },
        "config": { "endpoint": "https://q" }, "configId": "CFG" });
    fake.script(
        &route("POST", "resource/createOrUpdate"),
        vec![Reply::json(200, echoed)],
    );
    fake.script(
        &route("POST", "resource/get"),
        vec![Reply::json(
            500,
            json!({ "error": { "code": "Boom", "message": "failed" } }),
        )],
    );
    let host = v2_host(&fake, fast_settings(), None);
    let config = json!({ "endpoint": "https://q", "token": SECRET });
    let request = CreateOrUpdateRequest {
        resource_type: "Acme.Queue/queues".into(),
        api_version: None,
        properties: json!({ "name": "orders" }),
        config: ExtensionConfig::from_value(config.clone()),
        config_id: None,
        known_identifiers: None,
    };
    let request_debug = format!("{request:?}");
    let resource = host
        .create_or_update(&key(), request, &CallContext::default())
        .await
        .unwrap();
    let locator = ResourceLocator {
        resource_type: resource.resource_type.clone(),
        api_version: None,
        identifiers: resource.identifiers.clone(),
        config: ExtensionConfig::from_value(config),
        config_id: resource.config_id.clone(),
    };
    let error = host
        .get(&key(), &locator, &CallContext::default())
        .await
        .unwrap_err();

    // The secret did reach the extension: the checks below can fail.
    let sent = fake.calls(&route("POST", "resource/createOrUpdate"))[0].json();
    assert_eq!(sent["config"]["token"], json!(SECRET));

    assert_eq!(resource.secret_config_keys, vec!["token"]);
    assert_eq!(
        serde_json::to_value(&resource.echoed_config).unwrap(),
        json!({ "endpoint": "https://q" })
    );
    let stored = serde_json::to_string(&resource).unwrap();
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("extension answered"),
        "tracing was not captured: {logs}"
    );
    for (what, text) in [
        ("stored resource", stored),
        ("resource debug", format!("{resource:?}")),
        ("locator debug", format!("{locator:?}")),
        ("request debug", request_debug),
        ("error", format!("{error} {error:?} {}", error.to_body())),
        ("logs", logs),
    ] {
        assert!(
            !text.contains(SECRET),
            "the secret leaked into the {what}: {text}"
        );
    }
}
