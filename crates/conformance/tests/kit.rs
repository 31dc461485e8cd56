//! The kit against small SDK extensions: a correct one using stepwise LRO and RELO passes, deliberately
//! broken ones fail the checks they break.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_conformance::{Options, Outcome, Profile, Protocol, Report, run};
use cairn_extension_sdk::{
    Applied, Apply, ContractError, Deleted, Extension, ExtensionConfig, ExtensionError,
    InProcessTransport, Lookup, OperationStatus, OperationTracker, PreviewInput, PreviewOutput,
    ResourceHandler, ResourceState,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How the test extension misbehaves.
#[derive(Clone, Copy, Default)]
struct Faults {
    /// `get` still finds deleted resources.
    get_after_delete_finds_it: bool,
    /// Deleting a missing resource fails.
    delete_missing_fails: bool,
    /// A different configId every time.
    unstable_config_id: bool,
    /// `get` returns other properties than were set.
    forgets_properties: bool,
}

#[derive(Clone)]
struct Config {
    endpoint: String,
    faults: Faults,
    counter: Arc<Mutex<u64>>,
}

static FAULTS: Mutex<Option<(Faults, Arc<Mutex<u64>>)>> = Mutex::new(None);

impl ExtensionConfig for Config {
    const SECRET_PROPERTIES: &'static [&'static str] = &["token"];

    fn from_request(config: Option<&Value>) -> Result<Self, ExtensionError> {
        let endpoint = config
            .and_then(|c| c.get("endpoint"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ExtensionError::invalid("InvalidConfig", "/config/endpoint", "endpoint is required")
            })?;
        let (faults, counter) = FAULTS.lock().unwrap().clone().unwrap_or_default();
        Ok(Config {
            endpoint: endpoint.to_owned(),
            faults,
            counter,
        })
    }

    fn config_id(&self) -> Option<String> {
        if self.faults.unstable_config_id {
            let mut counter = self.counter.lock().unwrap();
            *counter += 1;
            Some(format!("{}-{counter}", self.endpoint))
        } else {
            Some(self.endpoint.clone())
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct QueueProperties {
    name: String,
    depth: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct QueueIdentifiers {
    name: String,
}

#[derive(Default)]
struct Store {
    queues: HashMap<String, QueueProperties>,
    deleted: HashMap<String, QueueProperties>,
    /// Names being deleted (RELO): the next get finishes the deletion.
    deleting: HashMap<String, u32>,
}

/// Creates through a stepwise LRO, deletes through RELO.
struct Queues {
    store: Arc<Mutex<Store>>,
    tracker: OperationTracker,
    asynchronous: bool,
}

impl ResourceHandler<Config> for Queues {
    type Properties = QueueProperties;
    type Identifiers = QueueIdentifiers;

    fn resource_type(&self) -> &str {
        "Test.Queue/queues"
    }

    async fn preview(&self, input: PreviewInput<Config>) -> Result<PreviewOutput, ExtensionError> {
        if !self.asynchronous {
            return Err(ExtensionError::preview_not_supported(
                "this test extension previews only in async mode",
            ));
        }
        let properties: QueueProperties = input.typed_properties()?;
        Ok(PreviewOutput {
            identifiers: Some(json!({ "name": properties.name })),
            properties: input.properties.clone(),
            metadata: Default::default(),
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<Config, QueueProperties>,
    ) -> Result<Applied<QueueIdentifiers, QueueProperties>, ExtensionError> {
        let properties = request.properties;
        let identifiers = QueueIdentifiers {
            name: properties.name.clone(),
        };
        if !self.asynchronous {
            self.store
                .lock()
                .unwrap()
                .queues
                .insert(properties.name.clone(), properties.clone());
            return Ok(Applied::Resource(ResourceState::new(
                identifiers,
                properties,
            )));
        }
        let store = Arc::clone(&self.store);
        Ok(Applied::Accepted(self.tracker.start(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            store
                .lock()
                .unwrap()
                .queues
                .insert(properties.name.clone(), properties);
            Ok::<(), ContractError>(())
        })))
    }

    async fn get(
        &self,
        request: Lookup<Config, QueueIdentifiers>,
    ) -> Result<Option<ResourceState<QueueIdentifiers, QueueProperties>>, ExtensionError> {
        let name = request.identifiers.name.clone();
        let mut store = self.store.lock().unwrap();
        if let Some(remaining) = store.deleting.get_mut(&name) {
            if *remaining > 0 {
                *remaining -= 1;
                let properties = store.queues.get(&name).cloned();
                return Ok(properties.map(|p| {
                    ResourceState::new(request.identifiers, p)
                        .with_status(OperationStatus::new("Deleting"))
                }));
            }
            store.deleting.remove(&name);
            if let Some(gone) = store.queues.remove(&name) {
                store.deleted.insert(name.clone(), gone);
            }
        }
        let found = store.queues.get(&name).cloned().or_else(|| {
            request
                .config
                .faults
                .get_after_delete_finds_it
                .then(|| store.deleted.get(&name).cloned())
                .flatten()
        });
        Ok(found.map(|mut properties| {
            if request.config.faults.forgets_properties {
                properties.depth += 1;
            }
            ResourceState::new(request.identifiers, properties)
        }))
    }

    async fn delete(
        &self,
        request: Lookup<Config, QueueIdentifiers>,
    ) -> Result<Deleted<QueueIdentifiers, QueueProperties>, ExtensionError> {
        let name = request.identifiers.name.clone();
        let mut store = self.store.lock().unwrap();
        let Some(properties) = store.queues.get(&name).cloned() else {
            if request.config.faults.delete_missing_fails {
                return Err(ExtensionError::new(404, "QueueNotFound", "no such queue"));
            }
            return Ok(Deleted::Gone);
        };
        if !self.asynchronous {
            store.queues.remove(&name);
            store.deleted.insert(name, properties);
            return Ok(Deleted::Gone);
        }
        store.deleting.insert(name, 2);
        Ok(Deleted::Deleting(
            ResourceState::new(request.identifiers, properties)
                .with_status(OperationStatus::new("Deleting")),
        ))
    }
}

fn transport(asynchronous: bool) -> InProcessTransport {
    let tracker = OperationTracker::with_retry_after(0);
    let extension = Extension::<Config>::new("Test", "2.0.0")
        .handler(Queues {
            store: Arc::default(),
            tracker: tracker.clone(),
            asynchronous,
        })
        .operations(tracker);
    InProcessTransport::from_extension(extension)
}

fn profile() -> Profile {
    Profile::parse(
        r#"{ "extensionVersion": "2.0.0", "type": "Test.Queue/queues",
             "config": { "endpoint": "https://queues.test", "token": "s3cr3t" },
             "properties": { "name": "orders", "depth": 5 },
             "updatedProperties": { "name": "orders", "depth": 9 },
             "secretConfigProperties": ["token"] }"#,
        &[],
    )
    .unwrap()
}

fn options() -> Options {
    let mut options = Options::new(Protocol::Http);
    options.max_poll_interval = Duration::from_millis(20);
    options
}

// The fault switch is process-global, so the tests that use it run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run_with(faults: Faults, asynchronous: bool) -> Report {
    *FAULTS.lock().unwrap() = Some((faults, Arc::default()));
    let report = run(&transport(asynchronous), &profile(), &options()).await;
    *FAULTS.lock().unwrap() = None;
    report
}

fn outcome(report: &Report, name: &str) -> Outcome {
    report
        .result(name)
        .unwrap_or_else(|| panic!("no check {name}"))
        .outcome
}

#[tokio::test]
async fn correct_synchronous_extension_passes() {
    let _serial = SERIAL.lock().await;
    let report = run_with(Faults::default(), false).await;
    assert!(report.passed(), "{}", report.render_table());
    assert_eq!(outcome(&report, "long-running"), Outcome::Skip);
    // No preview handler: PreviewNotSupported is allowed.
    assert!(
        report
            .result("preview")
            .unwrap()
            .detail
            .contains("PreviewNotSupported")
    );
    assert_eq!(outcome(&report, "config-echo"), Outcome::Pass);
}

#[tokio::test]
async fn lro_create_and_relo_delete_are_followed() {
    let _serial = SERIAL.lock().await;
    let report = run_with(Faults::default(), true).await;
    assert!(report.passed(), "{}", report.render_table());
    let long_running = report.result("long-running").unwrap();
    assert_eq!(long_running.outcome, Outcome::Pass);
    assert!(
        long_running.detail.contains("LRO [create: 202 then"),
        "{}",
        long_running.detail
    );
    assert!(
        long_running
            .detail
            .contains("RELO [delete: 3 get poll(s) to 404]"),
        "{}",
        long_running.detail
    );
    assert_eq!(outcome(&report, "preview"), Outcome::Pass);
}

#[tokio::test]
async fn get_after_delete_that_still_finds_the_resource_fails() {
    let _serial = SERIAL.lock().await;
    let report = run_with(
        Faults {
            get_after_delete_finds_it: true,
            ..Faults::default()
        },
        false,
    )
    .await;
    assert!(!report.passed());
    assert_eq!(outcome(&report, "get-after-delete"), Outcome::Fail);
    assert_eq!(outcome(&report, "delete"), Outcome::Pass);
}

#[tokio::test]
async fn failing_delete_of_missing_resource_fails() {
    let _serial = SERIAL.lock().await;
    let report = run_with(
        Faults {
            delete_missing_fails: true,
            ..Faults::default()
        },
        false,
    )
    .await;
    assert_eq!(outcome(&report, "delete-missing"), Outcome::Fail);
    assert_eq!(report.failures().len(), 1, "{}", report.render_table());
}

#[tokio::test]
async fn unstable_config_id_fails() {
    let _serial = SERIAL.lock().await;
    let report = run_with(
        Faults {
            unstable_config_id: true,
            ..Faults::default()
        },
        false,
    )
    .await;
    assert_eq!(
        outcome(&report, "configId-stability"),
        Outcome::Fail,
        "{}",
        report.render_table()
    );
}

#[tokio::test]
async fn forgetting_properties_fails_get() {
    let _serial = SERIAL.lock().await;
    let report = run_with(
        Faults {
            forgets_properties: true,
            ..Faults::default()
        },
        false,
    )
    .await;
    assert_eq!(outcome(&report, "get"), Outcome::Fail);
    assert!(report.render_table().contains("FAIL"));
}

#[tokio::test]
async fn unreachable_extension_fails_everything_it_tries() {
    struct Down;
    impl cairn_extension_contract::ExtensionTransport for Down {
        fn send(
            &self,
            _request: cairn_extension_contract::TransportRequest,
        ) -> cairn_extension_contract::BoxFuture<
            '_,
            Result<
                cairn_extension_contract::TransportResponse,
                cairn_extension_contract::TransportError,
            >,
        > {
            Box::pin(async {
                Err(cairn_extension_contract::TransportError::Connect {
                    message: "refused".into(),
                })
            })
        }
    }
    let report = run(&Down, &profile(), &options()).await;
    assert!(!report.passed());
    assert_eq!(outcome(&report, "create"), Outcome::Fail);
    assert_eq!(outcome(&report, "get"), Outcome::Skip);
}

/// Wraps a transport and drops `x-ms-request-id` from error responses.
struct StripsErrorHeaders(InProcessTransport);

impl cairn_extension_contract::ExtensionTransport for StripsErrorHeaders {
    fn send(
        &self,
        request: cairn_extension_contract::TransportRequest,
    ) -> cairn_extension_contract::BoxFuture<
        '_,
        Result<
            cairn_extension_contract::TransportResponse,
            cairn_extension_contract::TransportError,
        >,
    > {
        Box::pin(async move {
            let mut response = self.0.send(request).await?;
            if response.status >= 400 {
                response
                    .headers
                    .retain(|(name, _)| name != "x-ms-request-id");
            }
            Ok(response)
        })
    }
}

#[tokio::test]
async fn missing_request_id_on_errors_fails_header_echo() {
    let _serial = SERIAL.lock().await;
    *FAULTS.lock().unwrap() = Some((Faults::default(), Arc::default()));
    let report = run(
        &StripsErrorHeaders(transport(false)),
        &profile(),
        &options(),
    )
    .await;
    *FAULTS.lock().unwrap() = None;
    let header = report.result("header-echo").unwrap();
    assert_eq!(header.outcome, Outcome::Fail, "{}", report.render_table());
    assert!(
        header.detail.contains("error: no x-ms-request-id"),
        "{}",
        header.detail
    );
}

#[tokio::test]
async fn hanging_extension_times_out() {
    struct Hangs;
    impl cairn_extension_contract::ExtensionTransport for Hangs {
        fn send(
            &self,
            _request: cairn_extension_contract::TransportRequest,
        ) -> cairn_extension_contract::BoxFuture<
            '_,
            Result<
                cairn_extension_contract::TransportResponse,
                cairn_extension_contract::TransportError,
            >,
        > {
            Box::pin(std::future::pending())
        }
    }
    let mut options = options();
    options.request_timeout = Duration::from_millis(20);
    let report = run(&Hangs, &profile(), &options).await;
    let create = report.result("create").unwrap();
    assert_eq!(create.outcome, Outcome::Fail);
    assert!(
        create.detail.contains("no answer within"),
        "{}",
        create.detail
    );
}

#[tokio::test]
async fn unevaluated_preview_values_must_come_back_unchanged() {
    let _serial = SERIAL.lock().await;
    let report = run_with(Faults::default(), true).await;
    let check = report.result("preview-unevaluated").unwrap();
    assert_eq!(check.outcome, Outcome::Pass, "{}", report.render_table());
    assert!(
        check.detail.contains("'name' echoed unevaluated"),
        "{}",
        check.detail
    );
}
