//! The checks: drives one extension through a resource's lifecycle and the contract's edge cases.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use cairn_extension_contract::transport::{
    ExtensionTransport, Operation, TransportRequest, TransportResponse,
};
use cairn_extension_contract::v2::{Resource, ResourcePreview};
use cairn_extension_contract::{codes, headers, validate};
use serde_json::{Map, Value, json};

use crate::profile::Profile;

/// Which protocol the transport speaks underneath; gRPC has no headers, config echo or LROs, and `configId`
/// only in cairn's addition to its messages (a Bicep gRPC extension sends none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP contract v2.0.0 (remote or in process).
    Http,
    /// The local-deploy gRPC protocol (through a transport mapping it onto v2 semantics).
    Grpc,
}

/// How the kit runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The protocol underneath the transport.
    pub protocol: Protocol,
    /// How long one long-running operation may take.
    pub operation_timeout: Duration,
    /// The longest wait between polls (the contract's default is 60 s; the kit does not wait that long).
    pub max_poll_interval: Duration,
    /// How long one request may take (the contract's host limit is 60 s).
    pub request_timeout: Duration,
}

impl Options {
    /// Defaults for `protocol`: 60 s per request and per long-running operation, polls at most every 2 s.
    pub fn new(protocol: Protocol) -> Self {
        Self {
            protocol,
            operation_timeout: Duration::from_secs(60),
            max_poll_interval: Duration::from_secs(2),
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The extension behaves as the contract says.
    Pass,
    /// It does not.
    Fail,
    /// Not applicable (e.g. no config, or the protocol lacks the feature).
    Skip,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "FAIL",
            Outcome::Skip => "skip",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// Stable check name, e.g. `get-after-delete`.
    pub name: &'static str,
    /// Outcome.
    pub outcome: Outcome,
    /// What was seen (never config values).
    pub detail: String,
}

/// Every check's result, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The results.
    pub results: Vec<CheckResult>,
}

impl Report {
    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        self.results.iter().all(|r| r.outcome != Outcome::Fail)
    }

    /// The result of a check by name.
    pub fn result(&self, name: &str) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// The failed checks.
    pub fn failures(&self) -> Vec<&CheckResult> {
        self.results
            .iter()
            .filter(|r| r.outcome == Outcome::Fail)
            .collect()
    }

    /// A plain-text table: check, result, detail; then a summary line.
    pub fn render_table(&self) -> String {
        let width = self
            .results
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut out = format!("{:<width$}  {:<6}  detail\n", "check", "result");
        for result in &self.results {
            let _ = writeln!(
                out,
                "{:<width$}  {:<6}  {}",
                result.name,
                result.outcome.label(),
                result.detail
            );
        }
        let count = |outcome| self.results.iter().filter(|r| r.outcome == outcome).count();
        let _ = writeln!(
            out,
            "{} passed, {} failed, {} skipped",
            count(Outcome::Pass),
            count(Outcome::Fail),
            count(Outcome::Skip)
        );
        out
    }
}

/// One request and its answer.
struct Exchange {
    request_id: String,
    response: TransportResponse,
}

impl Exchange {
    fn status(&self) -> u16 {
        self.response.status
    }

    fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.response.body).ok()
    }
}

/// What the lifecycle observed about long-running work.
#[derive(Debug, Default)]
struct LongRunning {
    relo: Vec<String>,
    lro: Vec<String>,
}

type Step<T> = Result<T, String>;

struct Kit<'a> {
    transport: &'a dyn ExtensionTransport,
    profile: &'a Profile,
    options: &'a Options,
    report: Report,
    long_running: LongRunning,
}

/// Runs every check against `transport` with the sample resource of `profile`.
pub async fn run(
    transport: &dyn ExtensionTransport,
    profile: &Profile,
    options: &Options,
) -> Report {
    let mut kit = Kit {
        transport,
        profile,
        options,
        report: Report::default(),
        long_running: LongRunning::default(),
    };
    kit.run_all().await;
    kit.report
}

fn describe_error(exchange: &Exchange) -> String {
    match validate::parse_error_response(&exchange.response.body) {
        Ok(error) => format!(
            "HTTP {} {}: {}",
            exchange.status(),
            error.error.code,
            error.error.message
        ),
        Err(_) => format!("HTTP {}", exchange.status()),
    }
}

/// Whether every value in `expected` appears, equal, in `actual` (objects compared key by key).
fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(actual), Value::Object(expected)) => expected
            .iter()
            .all(|(key, value)| actual.get(key).is_some_and(|found| contains(found, value))),
        _ => actual == expected,
    }
}

impl Kit<'_> {
    fn record(&mut self, name: &'static str, outcome: Outcome, detail: impl Into<String>) {
        self.report.results.push(CheckResult {
            name,
            outcome,
            detail: detail.into(),
        });
    }

    fn record_step<T>(
        &mut self,
        name: &'static str,
        step: &Step<T>,
        pass_detail: impl FnOnce(&T) -> String,
    ) {
        match step {
            Ok(value) => {
                let detail = pass_detail(value);
                self.record(name, Outcome::Pass, detail);
            }
            Err(message) => self.record(name, Outcome::Fail, message.clone()),
        }
    }

    fn http(&self) -> bool {
        self.options.protocol == Protocol::Http
    }

    async fn send_version(
        &self,
        version: &str,
        operation: Operation,
        body: &Value,
    ) -> Step<Exchange> {
        let request_id = uuid::Uuid::new_v4().to_string();
        let trace_id = uuid::Uuid::new_v4().simple().to_string();
        let request = TransportRequest {
            operation,
            extension_version: version.to_owned(),
            body: serde_json::to_vec(body)
                .map_err(|err| format!("could not encode the request: {err}"))?,
            headers: vec![
                (headers::CLIENT_REQUEST_ID.to_owned(), request_id.clone()),
                (
                    headers::CORRELATION_REQUEST_ID.to_owned(),
                    uuid::Uuid::new_v4().to_string(),
                ),
                (
                    headers::REFERER.to_owned(),
                    "https://cairn.invalid/conformance".to_owned(),
                ),
                (
                    headers::TRACEPARENT.to_owned(),
                    format!("00-{trace_id}-{}-01", &trace_id[..16]),
                ),
                (headers::TRACESTATE.to_owned(), String::new()),
            ],
            max_response_bytes: 20 * 1024 * 1024,
        };
        match tokio::time::timeout(self.options.request_timeout, self.transport.send(request)).await
        {
            Ok(Ok(response)) => Ok(Exchange {
                request_id,
                response,
            }),
            Ok(Err(err)) => Err(format!("{operation} failed: {err}")),
            Err(_) => Err(format!(
                "{operation} got no answer within {} s",
                self.options.request_timeout.as_secs()
            )),
        }
    }

    async fn send(&self, operation: Operation, body: &Value) -> Step<Exchange> {
        self.send_version(&self.profile.extension_version, operation, body)
            .await
    }

    fn specification(&self, properties: &Value) -> Value {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            Value::String(self.profile.resource_type.clone()),
        );
        if let Some(api_version) = &self.profile.api_version {
            body.insert("apiVersion".into(), Value::String(api_version.clone()));
        }
        body.insert("properties".into(), properties.clone());
        if let Some(config) = &self.profile.config {
            body.insert("config".into(), config.clone());
        }
        Value::Object(body)
    }

    fn reference(&self, identifiers: &Value, config_id: Option<&str>) -> Value {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            Value::String(self.profile.resource_type.clone()),
        );
        if let Some(api_version) = &self.profile.api_version {
            body.insert("apiVersion".into(), Value::String(api_version.clone()));
        }
        body.insert("identifiers".into(), identifiers.clone());
        if let Some(config) = &self.profile.config {
            body.insert("config".into(), config.clone());
        }
        if let Some(config_id) = config_id {
            body.insert("configId".into(), Value::String(config_id.to_owned()));
        }
        Value::Object(body)
    }

    /// Expects a 4xx with a well-formed `ErrorResponse`.
    fn expect_client_error(exchange: &Exchange, what: &str) -> Step<String> {
        if !(400..500).contains(&exchange.status()) {
            return Err(format!(
                "{what}: expected a 4xx error, got HTTP {}",
                exchange.status()
            ));
        }
        let error =
            validate::parse_error_response(&exchange.response.body).map_err(|violation| {
                format!(
                    "{what}: HTTP {} without a valid error body ({violation})",
                    exchange.status()
                )
            })?;
        if error.error.code.is_empty() || error.error.message.is_empty() {
            return Err(format!("{what}: the error has an empty code or message"));
        }
        Ok(format!("HTTP {} {}", exchange.status(), error.error.code))
    }

    fn parse_resource(exchange: &Exchange, what: &str) -> Step<Resource> {
        validate::parse_resource(&exchange.response.body)
            .map_err(|violation| format!("{what}: {violation}"))
    }

    async fn sleep_before_poll(&self, retry_after_seconds: u32) {
        let wait =
            Duration::from_secs(u64::from(retry_after_seconds)).min(self.options.max_poll_interval);
        tokio::time::sleep(wait.max(Duration::from_millis(20))).await;
    }

    /// Polls a stepwise LRO to its end; returns an error description when it failed.
    async fn wait_for_operation(&mut self, accepted: &Exchange, what: &str) -> Step<()> {
        let started = Instant::now();
        let mut operation = validate::parse_long_running_operation(&accepted.response.body)
            .map_err(|violation| format!("{what}: 202 body: {violation}"))?;
        let mut polls = 0;
        while !operation.status.is_terminal() {
            if started.elapsed() > self.options.operation_timeout {
                return Err(format!(
                    "{what}: the long-running operation did not finish in time"
                ));
            }
            self.sleep_before_poll(operation.retry_after_or_default())
                .await;
            let handle = operation.operation_handle.clone().unwrap_or_default();
            let polled = self
                .send(Operation::GetLongRunningOperation, &handle)
                .await?;
            if polled.status() != 200 {
                return Err(format!(
                    "{what}: polling the operation answered {}",
                    describe_error(&polled)
                ));
            }
            operation = validate::parse_long_running_operation(&polled.response.body)
                .map_err(|violation| format!("{what}: poll: {violation}"))?;
            polls += 1;
        }
        self.long_running.lro.push(format!(
            "{what}: 202 then {polls} poll(s) to {}",
            operation.status
        ));
        if operation.status.is_succeeded() {
            Ok(())
        } else {
            let error = operation
                .error
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_default();
            Err(format!(
                "{what}: the operation ended {} ({error})",
                operation.status
            ))
        }
    }

    /// Polls get until the resource's status is terminal (RELO create/update).
    async fn wait_for_resource(&mut self, mut resource: Resource, what: &str) -> Step<Resource> {
        let started = Instant::now();
        let mut polls = 0;
        while !resource.effective_status().is_terminal() {
            if started.elapsed() > self.options.operation_timeout {
                return Err(format!(
                    "{what}: the resource stayed '{}' too long",
                    resource.effective_status()
                ));
            }
            self.sleep_before_poll(1).await;
            let got = self
                .send(
                    Operation::Get,
                    &self.reference(&resource.identifiers, resource.config_id.as_deref()),
                )
                .await?;
            if got.status() != 200 {
                return Err(format!(
                    "{what}: polling get answered {}",
                    describe_error(&got)
                ));
            }
            resource = Self::parse_resource(&got, what)?;
            polls += 1;
        }
        if polls > 0 {
            self.long_running.relo.push(format!(
                "{what}: {polls} get poll(s) to {}",
                resource.effective_status()
            ));
        }
        if resource.effective_status().is_succeeded() {
            Ok(resource)
        } else {
            let error = resource
                .error
                .as_ref()
                .map(|e| format!("{}: {}", e.code, e.message))
                .unwrap_or_default();
            Err(format!(
                "{what}: the resource ended {} ({error})",
                resource.effective_status()
            ))
        }
    }

    /// createOrUpdate to completion: the final resource and the first exchange (for header checks).
    async fn apply(&mut self, properties: &Value, what: &str) -> Step<(Resource, Exchange)> {
        let exchange = self
            .send(Operation::CreateOrUpdate, &self.specification(properties))
            .await?;
        match exchange.status() {
            200 | 201 => {
                let resource = Self::parse_resource(&exchange, what)?;
                let resource = self.wait_for_resource(resource, what).await?;
                Ok((resource, exchange))
            }
            202 => {
                self.wait_for_operation(&exchange, what).await?;
                // The contract's final get needs identifiers; a preview of the same input names them.
                let preview = self
                    .send(Operation::Preview, &self.specification(properties))
                    .await?;
                let identifiers = validate::parse_resource_preview(&preview.response.body)
                    .map(|p| p.identifiers)
                    .map_err(|_| format!("{what}: after the operation, the identifiers could not be learned from preview"))?;
                let got = self
                    .send(Operation::Get, &self.reference(&identifiers, None))
                    .await?;
                if got.status() != 200 {
                    return Err(format!(
                        "{what}: the final get answered {}",
                        describe_error(&got)
                    ));
                }
                Ok((Self::parse_resource(&got, what)?, exchange))
            }
            _ => Err(format!("{what}: {}", describe_error(&exchange))),
        }
    }

    /// delete to completion.
    async fn delete(&mut self, identifiers: &Value, config_id: Option<&str>) -> Step<String> {
        let reference = self.reference(identifiers, config_id);
        let exchange = self.send(Operation::Delete, &reference).await?;
        match exchange.status() {
            204 => Ok("HTTP 204".into()),
            200 => {
                let resource = Self::parse_resource(&exchange, "delete")?;
                if resource.effective_status().is_terminal() {
                    return Ok(format!("HTTP 200, status {}", resource.effective_status()));
                }
                // RELO delete: done when get answers 404.
                let started = Instant::now();
                let mut polls = 0;
                loop {
                    if started.elapsed() > self.options.operation_timeout {
                        return Err("delete: the resource was still there after the timeout".into());
                    }
                    self.sleep_before_poll(1).await;
                    let got = self.send(Operation::Get, &reference).await?;
                    polls += 1;
                    match got.status() {
                        404 => break,
                        200 => {
                            let resource = Self::parse_resource(&got, "delete")?;
                            if resource.effective_status().is_failed() {
                                return Err("delete: the resource reports Failed".into());
                            }
                        }
                        _ => {
                            return Err(format!(
                                "delete: polling get answered {}",
                                describe_error(&got)
                            ));
                        }
                    }
                }
                self.long_running
                    .relo
                    .push(format!("delete: {polls} get poll(s) to 404"));
                Ok(format!("HTTP 200 (RELO), gone after {polls} poll(s)"))
            }
            202 => {
                self.wait_for_operation(&exchange, "delete").await?;
                Ok("HTTP 202 (LRO), succeeded".into())
            }
            _ => Err(format!("delete: {}", describe_error(&exchange))),
        }
    }

    async fn run_all(&mut self) {
        self.check_unknown_version().await;
        let error_exchange = self.check_unknown_type().await;
        self.check_error_shape().await;
        self.check_preview().await;
        self.check_preview_unevaluated().await;

        let created = self.apply(&self.profile.properties.clone(), "create").await;
        self.record_step("create", &created, |(resource, exchange)| {
            format!(
                "HTTP {}, identifiers {}",
                exchange.status(),
                resource.identifiers
            )
        });
        let Ok((resource, exchange)) = created else {
            for name in [
                "header-echo",
                "config-echo",
                "get",
                "idempotent-repeat",
                "configId-stability",
                "configId-mismatch",
                "update",
                "delete",
                "get-after-delete",
                "delete-missing",
            ] {
                self.record(name, Outcome::Skip, "create failed");
            }
            self.check_long_running();
            return;
        };
        let mut exchanges = vec![("create", &exchange)];
        if let Some(error) = &error_exchange {
            exchanges.push(("error", error));
        }
        self.check_headers(&exchanges);
        self.check_config_echo(&resource);

        let identifiers = resource.identifiers.clone();
        let got = self
            .get_matching(&identifiers, &self.profile.properties.clone(), "get")
            .await;
        self.record_step("get", &got, |r| {
            format!(
                "HTTP 200, properties match ({} keys)",
                r.properties.as_object().map_or(0, Map::len)
            )
        });

        let repeated = self.apply(&self.profile.properties.clone(), "repeat").await;
        let repeat_check = match &repeated {
            Ok((again, _)) if again.identifiers != identifiers => Err(format!(
                "repeat: identifiers changed from {identifiers} to {}",
                again.identifiers
            )),
            Ok((again, _)) => self
                .get_matching(
                    &again.identifiers,
                    &self.profile.properties.clone(),
                    "repeat",
                )
                .await
                .map(|_| ()),
            Err(message) => Err(message.clone()),
        };
        self.record_step("idempotent-repeat", &repeat_check, |()| {
            "same identifiers, same state".into()
        });

        let mut config_ids = vec![("create", resource.config_id.clone())];
        if let Ok(got) = &got {
            config_ids.push(("get", got.config_id.clone()));
        }
        if let Ok((again, _)) = &repeated {
            config_ids.push(("repeat", again.config_id.clone()));
        }
        self.check_config_id_stability(&config_ids);
        self.check_config_id_mismatch(&identifiers, resource.config_id.as_deref())
            .await;

        match self.profile.updated_properties.clone() {
            Some(updated) => {
                let step = match self.apply(&updated, "update").await {
                    Ok((after, _)) if after.identifiers != identifiers => Err(format!(
                        "update: identifiers changed to {}",
                        after.identifiers
                    )),
                    Ok(_) => self
                        .get_matching(&identifiers, &updated, "update")
                        .await
                        .map(|_| ()),
                    Err(message) => Err(message),
                };
                self.record_step("update", &step, |()| {
                    "get reflects the updated properties".into()
                });
            }
            None => self.record(
                "update",
                Outcome::Skip,
                "the profile has no updatedProperties",
            ),
        }

        let deleted = self
            .delete(&identifiers, resource.config_id.as_deref())
            .await;
        self.record_step("delete", &deleted, Clone::clone);

        let after = self
            .send(
                Operation::Get,
                &self.reference(&identifiers, resource.config_id.as_deref()),
            )
            .await;
        let after_check = after.and_then(|exchange| {
            if exchange.status() != 404 {
                return Err(format!("expected 404, got {}", describe_error(&exchange)));
            }
            let detail = Self::expect_client_error(&exchange, "get after delete")?;
            let code = exchange
                .json()
                .and_then(|body| body["error"]["code"].as_str().map(str::to_owned))
                .unwrap_or_default();
            Ok(if code == codes::RESOURCE_NOT_FOUND {
                detail
            } else {
                format!("{detail} (ResourceNotFound is the usual code)")
            })
        });
        self.record_step("get-after-delete", &after_check, Clone::clone);

        let again = self
            .send(
                Operation::Delete,
                &self.reference(&identifiers, resource.config_id.as_deref()),
            )
            .await;
        let again_check = again.and_then(|exchange| match exchange.status() {
            204 => Ok("HTTP 204".to_owned()),
            _ => Err(format!(
                "deleting a missing resource must answer 204, got {}",
                describe_error(&exchange)
            )),
        });
        self.record_step("delete-missing", &again_check, Clone::clone);

        self.check_long_running();
    }

    async fn get_matching(
        &mut self,
        identifiers: &Value,
        expected: &Value,
        what: &str,
    ) -> Step<Resource> {
        let exchange = self
            .send(Operation::Get, &self.reference(identifiers, None))
            .await?;
        if exchange.status() != 200 {
            return Err(format!(
                "{what}: get answered {}",
                describe_error(&exchange)
            ));
        }
        let resource = Self::parse_resource(&exchange, what)?;
        if resource.identifiers != *identifiers {
            return Err(format!(
                "{what}: get answered identifiers {} for {identifiers}",
                resource.identifiers
            ));
        }
        if !contains(&resource.properties, expected) {
            return Err(format!(
                "{what}: get's properties do not contain the properties that were set"
            ));
        }
        Ok(resource)
    }

    async fn check_unknown_version(&mut self) {
        if !self.http() {
            self.record(
                "unknown-version",
                Outcome::Skip,
                "gRPC carries no extension version",
            );
            return;
        }
        let body = self.reference(&json!({}), None);
        let step = match self
            .send_version("0.0.0-cairn-conformance-unknown", Operation::Get, &body)
            .await
        {
            Ok(exchange) => Self::expect_client_error(&exchange, "unknown version"),
            Err(message) => Err(message),
        };
        self.record_step("unknown-version", &step, Clone::clone);
    }

    /// Returns the error exchange, so that headers on error responses can be checked too.
    async fn check_unknown_type(&mut self) -> Option<Exchange> {
        let mut body = self.reference(&json!({}), None);
        body["type"] = Value::String("Cairn.Conformance/doesNotExist".into());
        let (step, exchange) = match self.send(Operation::Get, &body).await {
            Ok(exchange) => (
                Self::expect_client_error(&exchange, "unknown type"),
                Some(exchange),
            ),
            Err(message) => (Err(message), None),
        };
        self.record_step("unknown-type", &step, Clone::clone);
        exchange
    }

    async fn check_error_shape(&mut self) {
        let invalid = self
            .profile
            .invalid_properties
            .clone()
            .unwrap_or_else(|| json!("cairn-conformance: not an object"));
        let step = match self
            .send(Operation::CreateOrUpdate, &self.specification(&invalid))
            .await
        {
            Ok(exchange) => Self::expect_client_error(&exchange, "invalid properties"),
            Err(message) => Err(message),
        };
        self.record_step("error-shape", &step, Clone::clone);
    }

    async fn check_preview(&mut self) {
        let step = match self
            .send(
                Operation::Preview,
                &self.specification(&self.profile.properties.clone()),
            )
            .await
        {
            Ok(exchange) if exchange.status() == 200 => {
                validate::parse_resource_preview(&exchange.response.body)
                    .map_err(|violation| format!("preview: {violation}"))
                    .and_then(|preview: ResourcePreview| {
                        if contains(&preview.properties, &self.profile.properties) {
                            Ok(format!("HTTP 200, identifiers {}", preview.identifiers))
                        } else {
                            Err("preview: the predicted properties do not contain the input".into())
                        }
                    })
            }
            Ok(exchange) => {
                let code = exchange
                    .json()
                    .and_then(|b| b["error"]["code"].as_str().map(str::to_owned));
                if matches!(exchange.status(), 400 | 422)
                    && code.as_deref() == Some(codes::PREVIEW_NOT_SUPPORTED)
                {
                    Ok(format!(
                        "HTTP {} PreviewNotSupported (allowed)",
                        exchange.status()
                    ))
                } else {
                    Err(format!("preview: {}", describe_error(&exchange)))
                }
            }
            Err(message) => Err(message),
        };
        self.record_step("preview", &step, Clone::clone);
    }

    /// Every response, errors included, must echo the client request id and carry `Date`.
    fn check_headers(&mut self, exchanges: &[(&str, &Exchange)]) {
        if !self.http() {
            self.record("header-echo", Outcome::Skip, "gRPC carries no HTTP headers");
            return;
        }
        let mut problems = Vec::new();
        for (what, exchange) in exchanges {
            match exchange.response.header(headers::REQUEST_ID) {
                None => problems.push(format!("{what}: no x-ms-request-id header")),
                Some(id) if id != exchange.request_id => problems.push(format!(
                    "{what}: x-ms-request-id differs from x-ms-client-request-id"
                )),
                Some(_) => {}
            }
            if exchange.response.header("date").is_none() {
                problems.push(format!("{what}: no Date header"));
            }
        }
        if problems.is_empty() {
            let names: Vec<&str> = exchanges.iter().map(|(what, _)| *what).collect();
            self.record(
                "header-echo",
                Outcome::Pass,
                format!(
                    "x-ms-request-id echoes the client request id and Date is present ({})",
                    names.join(", ")
                ),
            );
        } else {
            self.record("header-echo", Outcome::Fail, problems.join("; "));
        }
    }

    /// Preview with one property replaced by an unevaluated expression: it must not be validated and must
    /// come back unchanged (or the extension answers `PreviewNotSupported`).
    async fn check_preview_unevaluated(&mut self) {
        let Value::Object(properties) = &self.profile.properties else {
            self.record(
                "preview-unevaluated",
                Outcome::Skip,
                "the sample properties are not an object",
            );
            return;
        };
        let Some(key) = properties
            .iter()
            .find(|(_, value)| value.is_string())
            .map(|(key, _)| key.clone())
        else {
            self.record(
                "preview-unevaluated",
                Outcome::Skip,
                "the sample has no string property to replace",
            );
            return;
        };
        let expression = "[parameters('cairnConformance')]";
        let pointer = format!("/properties/{}", key.replace('~', "~0").replace('/', "~1"));
        let mut changed = properties.clone();
        changed.insert(key.clone(), Value::String(expression.to_owned()));
        let mut body = self.specification(&Value::Object(changed));
        body["metadata"] = json!({ "unevaluated": [pointer] });
        let step = match self.send(Operation::Preview, &body).await {
            Ok(exchange) if exchange.status() == 200 => {
                validate::parse_resource_preview(&exchange.response.body)
                    .map_err(|violation| format!("preview: {violation}"))
                    .and_then(|preview| {
                        if preview.properties.get(&key)
                            == Some(&Value::String(expression.to_owned()))
                        {
                            Ok(format!("HTTP 200, '{key}' echoed unevaluated"))
                        } else {
                            Err(format!("the unevaluated '{key}' was not echoed unchanged"))
                        }
                    })
            }
            Ok(exchange) => {
                let code = exchange
                    .json()
                    .and_then(|b| b["error"]["code"].as_str().map(str::to_owned));
                if matches!(exchange.status(), 400 | 422)
                    && code.as_deref() == Some(codes::PREVIEW_NOT_SUPPORTED)
                {
                    Ok(format!(
                        "HTTP {} PreviewNotSupported (allowed)",
                        exchange.status()
                    ))
                } else {
                    Err(format!(
                        "an unevaluated '{key}' was rejected: {}",
                        describe_error(&exchange)
                    ))
                }
            }
            Err(message) => Err(message),
        };
        self.record_step("preview-unevaluated", &step, Clone::clone);
    }

    fn check_config_echo(&mut self, resource: &Resource) {
        let Some(Value::Object(sent)) = &self.profile.config else {
            self.record("config-echo", Outcome::Skip, "the profile sends no config");
            return;
        };
        if !self.http() {
            self.record("config-echo", Outcome::Skip, "gRPC has no config echo");
            return;
        }
        let Some(echo) = &resource.config else {
            self.record(
                "config-echo",
                Outcome::Pass,
                "no config echoed (all of it is treated as secret)",
            );
            return;
        };
        let Value::Object(echo) = echo else {
            self.record(
                "config-echo",
                Outcome::Fail,
                "the echoed config is not an object",
            );
            return;
        };
        let leaked: Vec<&str> = self
            .profile
            .secret_config_properties
            .iter()
            .filter(|secret| echo.contains_key(secret.as_str()))
            .map(String::as_str)
            .collect();
        let altered: Vec<&str> = echo
            .iter()
            .filter(|(key, value)| sent.get(*key) != Some(*value))
            .map(|(key, _)| key.as_str())
            .collect();
        if !leaked.is_empty() {
            self.record(
                "config-echo",
                Outcome::Fail,
                format!("secret config properties echoed: {}", leaked.join(", ")),
            );
        } else if !altered.is_empty() {
            self.record(
                "config-echo",
                Outcome::Fail,
                format!(
                    "echoed config properties not sent as such: {}",
                    altered.join(", ")
                ),
            );
        } else {
            self.record(
                "config-echo",
                Outcome::Pass,
                format!(
                    "{} of {} properties echoed, no secrets",
                    echo.len(),
                    sent.len()
                ),
            );
        }
    }

    fn check_config_id_stability(&mut self, ids: &[(&str, Option<String>)]) {
        if self.profile.config.is_none() {
            self.record(
                "configId-stability",
                Outcome::Skip,
                "the profile sends no config",
            );
            return;
        }
        // Bicep's gRPC messages have no configId; cairn's extensions send it in a field of cairn's. An
        // extension that sends none over gRPC is not at fault; one that sends some is held to the HTTP rule.
        if !self.http() && ids.iter().all(|(_, id)| id.is_none()) {
            self.record(
                "configId-stability",
                Outcome::Skip,
                "no configId over gRPC (Bicep's messages have no field for it)",
            );
            return;
        }
        let missing: Vec<&str> = ids
            .iter()
            .filter(|(_, id)| id.is_none())
            .map(|(what, _)| *what)
            .collect();
        if !missing.is_empty() {
            self.record(
                "configId-stability",
                Outcome::Fail,
                format!(
                    "a config was sent but no configId came back from: {}",
                    missing.join(", ")
                ),
            );
            return;
        }
        let first = &ids[0].1;
        if ids.iter().all(|(_, id)| id == first) {
            self.record(
                "configId-stability",
                Outcome::Pass,
                format!("same configId from {} responses", ids.len()),
            );
        } else {
            self.record(
                "configId-stability",
                Outcome::Fail,
                "configId differs between responses for the same config",
            );
        }
    }

    async fn check_config_id_mismatch(&mut self, identifiers: &Value, config_id: Option<&str>) {
        if config_id.is_none() {
            self.record(
                "configId-mismatch",
                Outcome::Skip,
                "no configId to contradict",
            );
            return;
        }
        let wrong = format!(
            "{}-cairn-conformance-mismatch",
            config_id.unwrap_or_default()
        );
        let step = match self
            .send(Operation::Get, &self.reference(identifiers, Some(&wrong)))
            .await
        {
            Ok(exchange) => Self::expect_client_error(&exchange, "get with a mismatched configId"),
            Err(message) => Err(message),
        };
        self.record_step("configId-mismatch", &step, Clone::clone);
    }

    fn check_long_running(&mut self) {
        let LongRunning { relo, lro } = std::mem::take(&mut self.long_running);
        if relo.is_empty() && lro.is_empty() {
            self.record(
                "long-running",
                Outcome::Skip,
                "every operation completed synchronously",
            );
        } else {
            let mut seen = Vec::new();
            if !relo.is_empty() {
                seen.push(format!("RELO [{}]", relo.join("; ")));
            }
            if !lro.is_empty() {
                seen.push(format!("LRO [{}]", lro.join("; ")));
            }
            self.record("long-running", Outcome::Pass, seen.join(" "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_compares_objects_by_subset() {
        assert!(contains(
            &json!({ "a": 1, "b": { "c": 2, "d": 3 } }),
            &json!({ "b": { "c": 2 } })
        ));
        assert!(!contains(&json!({ "a": 1 }), &json!({ "a": 2 })));
        assert!(!contains(&json!({ "a": [1, 2] }), &json!({ "a": [1] })));
        assert!(contains(&json!("x"), &json!("x")));
    }

    #[test]
    fn table_lists_every_check_and_a_summary() {
        let report = Report {
            results: vec![
                CheckResult {
                    name: "create",
                    outcome: Outcome::Pass,
                    detail: "ok".into(),
                },
                CheckResult {
                    name: "get-after-delete",
                    outcome: Outcome::Fail,
                    detail: "200".into(),
                },
                CheckResult {
                    name: "update",
                    outcome: Outcome::Skip,
                    detail: "-".into(),
                },
            ],
        };
        let table = report.render_table();
        assert!(table.contains("get-after-delete  FAIL    200"), "{table}");
        assert!(
            table.ends_with("1 passed, 1 failed, 1 skipped\n"),
            "{table}"
        );
        assert!(!report.passed());
        assert_eq!(report.failures().len(), 1);
    }
}
