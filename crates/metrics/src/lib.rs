//! cairn's Prometheus metrics: one [`Metrics`] handle per process that the server (requests), the engine
//! (deployment durations, deployments in flight, takeovers), the stack service (operation durations, takeovers) and
//! the extension host (call latency) record into, and [`Metrics::render`], the text exposition `/metrics` serves.
//!
//! Labels never carry an id, a name chosen by a client or a value: routes are templates (`{name}` where the path had
//! a name), extensions are the registry's names, statuses and outcomes come from small fixed sets, so the number of
//! series stays bounded whatever clients send. See `docs/operations.md` for every metric.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::render`]'s text (OpenMetrics 1.0, which Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StackOperationLabels {
    operation: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TakeoverLabels {
    kind: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExtensionCallLabels {
    extension: String,
    operation: String,
    outcome: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Request latencies: 1 ms to about 16 s.
fn request_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Deployment and stack operations: 50 ms to about 55 min.
fn operation_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 17))
}

/// Extension calls: 1 ms to about 65 s (the contract's per-request timeout is 60 s).
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

struct Inner {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Histograms<RouteLabels>,
    deployment_duration: Histograms<StatusLabels>,
    deployments_in_flight: Gauge,
    stack_operation_duration: Histograms<StackOperationLabels>,
    takeovers: Family<TakeoverLabels, Counter>,
    extension_calls: Histograms<ExtensionCallLabels>,
}

/// The process's metrics. Cheap to clone (one shared registry); [`Metrics::default`] makes a fresh, independent
/// set, which is what a component not wired to a server records into.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Which kind of work recovery took over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeoverKind {
    Deployment,
    Stack,
}

impl TakeoverKind {
    fn as_str(self) -> &'static str {
        match self {
            TakeoverKind::Deployment => "deployment",
            TakeoverKind::Stack => "stack",
        }
    }
}

impl Metrics {
    /// A fresh set of metrics, every series empty.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "cairn_http_requests",
            "HTTP requests answered, by method, route template and status code",
            requests.clone(),
        );
        let request_duration = Histograms::<RouteLabels>::new_with_constructor(request_buckets);
        registry.register(
            "cairn_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template",
            request_duration.clone(),
        );
        let deployment_duration =
            Histograms::<StatusLabels>::new_with_constructor(operation_buckets);
        registry.register(
            "cairn_deployment_duration_seconds",
            "Run time of root deployments that ended, by final provisioning state",
            deployment_duration.clone(),
        );
        let deployments_in_flight = Gauge::default();
        registry.register(
            "cairn_deployments_in_flight",
            "Root deployments running in this process",
            deployments_in_flight.clone(),
        );
        let stack_operation_duration =
            Histograms::<StackOperationLabels>::new_with_constructor(operation_buckets);
        registry.register(
            "cairn_stack_operation_duration_seconds",
            "Run time of deployment stack operations that ended, by operation and final provisioning state",
            stack_operation_duration.clone(),
        );
        let takeovers = Family::<TakeoverLabels, Counter>::default();
        registry.register(
            "cairn_takeovers",
            "Interrupted deployments and stack operations this process took over after their claim or lease \
             expired or was handed over, by kind and outcome",
            takeovers.clone(),
        );
        let extension_calls = Histograms::<ExtensionCallLabels>::new_with_constructor(call_buckets);
        registry.register(
            "cairn_extension_call_duration_seconds",
            "Latency of extension calls (retries included), by extension, operation and outcome",
            extension_calls.clone(),
        );
        Metrics {
            inner: Arc::new(Inner {
                registry,
                requests,
                request_duration,
                deployment_duration,
                deployments_in_flight,
                stack_operation_duration,
                takeovers,
                extension_calls,
            }),
        }
    }

    /// An HTTP request was answered. `route` is a template without ids (e.g.
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}`).
    pub fn http_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        self.inner
            .requests
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status: status.to_string(),
            })
            .inc();
        self.inner
            .request_duration
            .get_or_create(&RouteLabels {
                method: method.to_owned(),
                route: route.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A root deployment starts running here; it counts as in flight until the returned guard is dropped.
    pub fn deployment_running(&self) -> DeploymentInFlight {
        self.inner.deployments_in_flight.inc();
        DeploymentInFlight {
            metrics: self.clone(),
        }
    }

    /// A root deployment ended in `status` (`Succeeded`, `Failed`, `Canceled`) after `elapsed`.
    pub fn deployment_ended(&self, status: &str, elapsed: Duration) {
        self.inner
            .deployment_duration
            .get_or_create(&StatusLabels {
                status: status.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A stack operation (`createOrUpdate`, `delete`) ended in `status` (the stack's provisioning state).
    pub fn stack_operation_ended(&self, operation: &str, status: &str, elapsed: Duration) {
        self.inner
            .stack_operation_duration
            .get_or_create(&StackOperationLabels {
                operation: operation.to_owned(),
                status: status.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Recovery took over interrupted work; `outcome` says what it did (`resumed`, `failed`, ...).
    pub fn takeover(&self, kind: TakeoverKind, outcome: &str) {
        self.inner
            .takeovers
            .get_or_create(&TakeoverLabels {
                kind: kind.as_str().to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// A call to `extension` (its registered name) ended with `outcome` after `elapsed`, retries included.
    pub fn extension_call(
        &self,
        extension: &str,
        operation: &str,
        outcome: CallOutcome,
        elapsed: Duration,
    ) {
        self.inner
            .extension_calls
            .get_or_create(&ExtensionCallLabels {
                extension: extension.to_owned(),
                operation: operation.to_owned(),
                outcome: outcome.as_str().to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Every metric in the OpenMetrics text format ([`CONTENT_TYPE`]), ending with `# EOF`.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.inner.registry);
        text
    }
}

/// How an extension call ended, as the host saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// An HTTP answer with this status.
    Status(u16),
    /// No answer within the per-request timeout.
    Timeout,
    /// The request could not be sent or its answer not read.
    TransportError,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Status(200..=299) => "2xx",
            CallOutcome::Status(400..=499) => "4xx",
            CallOutcome::Status(500..=599) => "5xx",
            CallOutcome::Status(_) => "other",
            CallOutcome::Timeout => "timeout",
            CallOutcome::TransportError => "transport_error",
        }
    }
}

/// A root deployment counted in `cairn_deployments_in_flight` until dropped.
#[must_use = "the deployment counts as in flight only while this guard lives"]
pub struct DeploymentInFlight {
    metrics: Metrics,
}

impl Drop for DeploymentInFlight {
    fn drop(&mut self) {
        self.metrics.inner.deployments_in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_value(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn renders_every_series_with_its_labels() {
        let metrics = Metrics::new();
        metrics.http_request(
            "PUT",
            "{scope}/providers/Microsoft.Resources/deployments/{name}",
            201,
            Duration::from_millis(3),
        );
        metrics.http_request("GET", "/healthz", 200, Duration::from_millis(1));
        metrics.http_request("GET", "/healthz", 200, Duration::from_millis(1));
        metrics.deployment_ended("Succeeded", Duration::from_secs(2));
        metrics.stack_operation_ended("createOrUpdate", "succeeded", Duration::from_secs(1));
        metrics.takeover(TakeoverKind::Deployment, "resumed");
        metrics.extension_call(
            "Local",
            "createOrUpdate",
            CallOutcome::Status(200),
            Duration::from_millis(5),
        );
        let text = metrics.render();
        assert_eq!(
            line_value(
                &text,
                "cairn_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"}"
            ),
            Some(2.0),
            "{text}"
        );
        assert!(text.contains(
            "cairn_http_request_duration_seconds_count{method=\"PUT\",route=\"{scope}/providers/Microsoft.Resources/deployments/{name}\"} 1"
        ), "{text}");
        assert!(
            text.contains("cairn_deployment_duration_seconds_count{status=\"Succeeded\"} 1"),
            "{text}"
        );
        assert!(text.contains("cairn_stack_operation_duration_seconds_count{operation=\"createOrUpdate\",status=\"succeeded\"} 1"), "{text}");
        assert!(
            text.contains("cairn_takeovers_total{kind=\"deployment\",outcome=\"resumed\"} 1"),
            "{text}"
        );
        assert!(text.contains("cairn_extension_call_duration_seconds_count{extension=\"Local\",operation=\"createOrUpdate\",outcome=\"2xx\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_in_flight_gauge_follows_its_guards() {
        let metrics = Metrics::new();
        let gauge = |m: &Metrics| line_value(&m.render(), "cairn_deployments_in_flight ");
        assert_eq!(gauge(&metrics), Some(0.0));
        let first = metrics.deployment_running();
        let second = metrics.deployment_running();
        assert_eq!(gauge(&metrics), Some(2.0));
        drop(first);
        assert_eq!(gauge(&metrics), Some(1.0));
        drop(second);
        assert_eq!(gauge(&metrics), Some(0.0));
    }

    #[test]
    fn clones_share_one_registry_and_defaults_do_not() {
        let metrics = Metrics::new();
        metrics
            .clone()
            .takeover(TakeoverKind::Stack, "resumed_delete");
        assert!(
            metrics
                .render()
                .contains("cairn_takeovers_total{kind=\"stack\",outcome=\"resumed_delete\"} 1")
        );
        assert!(!Metrics::default().render().contains("resumed_delete"));
    }

    #[test]
    fn outcomes_are_status_classes() {
        assert_eq!(CallOutcome::Status(204).as_str(), "2xx");
        assert_eq!(CallOutcome::Status(429).as_str(), "4xx");
        assert_eq!(CallOutcome::Status(503).as_str(), "5xx");
        assert_eq!(CallOutcome::Status(302).as_str(), "other");
        assert_eq!(CallOutcome::Timeout.as_str(), "timeout");
    }
}
