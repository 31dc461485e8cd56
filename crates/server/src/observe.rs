//! What operators watch: liveness (`/healthz`), readiness (`/readyz`: the store reachable and its schema current),
//! the Prometheus metrics (`/metrics`), and the layer that counts every request by method, route template and
//! status. Route templates replace every id and name of a path with a placeholder (`{deploymentName}`), so the
//! number of series stays bounded whatever paths clients send.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_arm::route::{DeploymentAction, StackAction, Target};
use cairn_arm::{ArmError, ResourceId, ResourceIdKind};
use cairn_metrics::Metrics;

use crate::response::{error_response, json_response};
use crate::stack_what_if::{BulkDeletePath, bulk_delete_path};
use crate::state::AppState;

use crate::auth::HEALTH_PATH;

/// The unauthenticated readiness endpoint.
pub const READY_PATH: &str = "/readyz";
/// The Prometheus metrics (authenticated like the API unless `--metrics-auth none`).
pub const METRICS_PATH: &str = "/metrics";

/// How long the store may take to answer a readiness check before the server reports itself not ready.
const READINESS_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /healthz`: the process is up and serving HTTP (it checks nothing else, so an orchestrator restarts the
/// process only when it is truly stuck).
pub(crate) async fn health() -> Response {
    json_response(StatusCode::OK, &serde_json::json!({ "status": "Healthy" }))
}

/// `GET /readyz`: 200 `{"status":"Ready"}` when the store answers and its schema is this build's; otherwise 503
/// in ARM's error shape, the code and message naming the problem (`StoreUnavailable`, `StoreNotReady`).
pub(crate) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let error = match tokio::time::timeout(READINESS_TIMEOUT, state.store.readiness()).await {
        Ok(Ok(())) => {
            return json_response(StatusCode::OK, &serde_json::json!({ "status": "Ready" }));
        }
        Ok(Err(error)) => ArmError::new(
            503,
            error.arm_code(),
            format!("The store is not ready: failed to {error}."),
        ),
        Err(_) => ArmError::new(
            503,
            "StoreUnavailable",
            format!(
                "The store did not answer the readiness check within {} seconds.",
                READINESS_TIMEOUT.as_secs()
            ),
        ),
    };
    tracing::warn!(
        code = error.detail().code(),
        message = error.detail().message(),
        "not ready"
    );
    error_response(&error)
}

/// `GET /metrics`: every metric in the OpenMetrics text format.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, cairn_metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
        .into_response()
}

/// Counts the request in `cairn_http_requests_total` and times it in `cairn_http_request_duration_seconds`,
/// whatever answers it (a handler, authentication, the size limit).
pub async fn count_request(
    State(metrics): State<Metrics>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = route_template(request.method().as_str(), request.uri().path());
    let response = next.run(request).await;
    metrics.http_request(
        method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Standard methods by name; anything else (clients may send any token) as `other`.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The route template of a request path: the ARM route `cairn_arm::route::classify` finds, with every id and
/// name replaced by a placeholder; `unmatched` for a path no route serves.
pub fn route_template(method: &str, path: &str) -> String {
    match path {
        HEALTH_PATH | READY_PATH | METRICS_PATH => return path.to_owned(),
        _ => {}
    }
    if path == crate::ui::UI_PATH || path.starts_with("/ui/") {
        return crate::ui::UI_PATH.to_owned();
    }
    if path.starts_with(crate::EXTENSIBILITY_PREFIX) {
        return format!("{}/...", crate::EXTENSIBILITY_PREFIX);
    }
    match bulk_delete_path(path) {
        Some(BulkDeletePath::Action { .. }) => {
            return format!("{SUBSCRIPTION}/providers/Microsoft.Resources/bulkDelete");
        }
        Some(BulkDeletePath::Status { .. }) => {
            return format!(
                "{SUBSCRIPTION}/providers/Microsoft.Resources/bulkDelete/operationStatuses/{{operationId}}"
            );
        }
        None => {}
    }
    // The method only matters where a GET lists and a POST acts; an unknown method still has a path shape.
    let route = cairn_arm::classify(method, path, None)
        .or_else(|_| cairn_arm::classify("GET", path, None))
        .or_else(|_| cairn_arm::classify("POST", path, None));
    match route {
        Ok(route) => target_template(&route.target),
        Err(_) => "unmatched".to_owned(),
    }
}

const SUBSCRIPTION: &str = "/subscriptions/{subscriptionId}";
const DEPLOYMENTS: &str = "/providers/Microsoft.Resources/deployments";
const STACKS: &str = "/providers/Microsoft.Resources/deploymentStacks";
const STACK_WHAT_IFS: &str = "/providers/Microsoft.Resources/deploymentStacksWhatIfResults";

/// How a scope shows in a template.
fn scope_template(kind: ResourceIdKind) -> &'static str {
    match kind {
        ResourceIdKind::Tenant => "",
        ResourceIdKind::ManagementGroup => {
            "/providers/Microsoft.Management/managementGroups/{managementGroupId}"
        }
        ResourceIdKind::Subscription => SUBSCRIPTION,
        ResourceIdKind::ResourceGroup => {
            "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}"
        }
        ResourceIdKind::Resource | ResourceIdKind::ExtensionResource => "{resourceId}",
    }
}

/// The template of the scope a deployment, stack or what-if result lives at.
fn scope_of(id: &ResourceId) -> &'static str {
    id.scope_id()
        .map_or("", |scope| scope_template(scope.kind()))
}

fn target_template(target: &Target) -> String {
    match target {
        Target::Subscriptions => "/subscriptions".to_owned(),
        Target::Subscription { .. } => SUBSCRIPTION.to_owned(),
        Target::ResourceGroups { .. } => format!("{SUBSCRIPTION}/resourceGroups"),
        Target::ResourceGroup { .. } => scope_template(ResourceIdKind::ResourceGroup).to_owned(),
        Target::OperationResult { .. } => {
            format!("{SUBSCRIPTION}/operationResults/{{operationId}}")
        }
        Target::CalculateTemplateHash => {
            "/providers/Microsoft.Resources/calculateTemplateHash".to_owned()
        }
        Target::Deployments { scope } => format!("{}{DEPLOYMENTS}", scope_template(scope.kind())),
        Target::Deployment { id } => format!("{}{DEPLOYMENTS}/{{deploymentName}}", scope_of(id)),
        Target::DeploymentAction { id, action } => format!(
            "{}{DEPLOYMENTS}/{{deploymentName}}/{}",
            scope_of(id),
            match action {
                DeploymentAction::Validate => "validate",
                DeploymentAction::WhatIf => "whatIf",
                DeploymentAction::Cancel => "cancel",
                DeploymentAction::ExportTemplate => "exportTemplate",
            }
        ),
        Target::DeploymentOperations { deployment } => format!(
            "{}{DEPLOYMENTS}/{{deploymentName}}/operations",
            scope_of(deployment)
        ),
        Target::DeploymentOperation { deployment, .. } => format!(
            "{}{DEPLOYMENTS}/{{deploymentName}}/operations/{{operationId}}",
            scope_of(deployment)
        ),
        Target::DeploymentOperationStatus { deployment, .. } => format!(
            "{}{DEPLOYMENTS}/{{deploymentName}}/operationStatuses/{{operationId}}",
            scope_of(deployment)
        ),
        Target::DeploymentStacks { scope } => format!("{}{STACKS}", scope_template(scope.kind())),
        Target::DeploymentStack { id } => format!("{}{STACKS}/{{stackName}}", scope_of(id)),
        Target::DeploymentStackAction { id, action } => format!(
            "{}{STACKS}/{{stackName}}/{}",
            scope_of(id),
            match action {
                StackAction::Validate => "validate",
                StackAction::ExportTemplate => "exportTemplate",
                StackAction::DetectDrift => "detectDrift",
                StackAction::Cancel => "cancel",
            }
        ),
        Target::DeploymentStackOperationStatus { stack, .. } => format!(
            "{}{STACKS}/{{stackName}}/operationStatuses/{{operationId}}",
            scope_of(stack)
        ),
        Target::DeploymentStackDriftResults { stack } => {
            format!(
                "{}{STACKS}/{{stackName}}/driftDetectionResults",
                scope_of(stack)
            )
        }
        Target::DeploymentStackDriftResult { stack, .. } => format!(
            "{}{STACKS}/{{stackName}}/driftDetectionResults/{{driftResultName}}",
            scope_of(stack)
        ),
        Target::DeploymentStacksWhatIfResults { scope } => {
            format!("{}{STACK_WHAT_IFS}", scope_template(scope.kind()))
        }
        Target::DeploymentStacksWhatIfResult { id } => {
            format!("{}{STACK_WHAT_IFS}/{{whatIfResultName}}", scope_of(id))
        }
        Target::DeploymentStacksWhatIfResultAction { id } => {
            format!(
                "{}{STACK_WHAT_IFS}/{{whatIfResultName}}/whatIf",
                scope_of(id)
            )
        }
        Target::DeploymentStacksWhatIfResultOperationStatus { result, .. } => format!(
            "{}{STACK_WHAT_IFS}/{{whatIfResultName}}/operationStatuses/{{operationId}}",
            scope_of(result)
        ),
        // Resource types and action names come from the client: they stay out of the labels.
        Target::Resource { .. } => "{resourceId}".to_owned(),
        Target::Resources { .. } => "{resourceId}/{collection}".to_owned(),
        Target::ResourceAction { .. } => "{resourceId}/{action}".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_the_route_without_ids() {
        for (method, path, template) in [
            ("GET", "/healthz", "/healthz"),
            ("GET", "/metrics", "/metrics"),
            (
                "PUT",
                "/subscriptions/0000-1/resourcegroups/rg-secret-name",
                "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}",
            ),
            (
                "PUT",
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/my-app",
                "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.Resources/deployments/{deploymentName}",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Resources/deployments/d/operationStatuses/08584",
                "/subscriptions/{subscriptionId}/providers/Microsoft.Resources/deployments/{deploymentName}/operationStatuses/{operationId}",
            ),
            (
                "POST",
                "/providers/Microsoft.Management/managementGroups/mg/providers/Microsoft.Resources/deployments/d/whatIf",
                "/providers/Microsoft.Management/managementGroups/{managementGroupId}/providers/Microsoft.Resources/deployments/{deploymentName}/whatIf",
            ),
            (
                "GET",
                "/providers/Microsoft.Resources/deployments/tenant-one",
                "/providers/Microsoft.Resources/deployments/{deploymentName}",
            ),
            (
                "DELETE",
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st",
                "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.Resources/deploymentStacks/{stackName}",
            ),
            (
                "POST",
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/st/detectDrift",
                "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.Resources/deploymentStacks/{stackName}/detectDrift",
            ),
            (
                "GET",
                "/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st/driftDetectionResults/r-1",
                "/subscriptions/{subscriptionId}/providers/Microsoft.Resources/deploymentStacks/{stackName}/driftDetectionResults/{driftResultName}",
            ),
            (
                "POST",
                "/subscriptions/s/providers/Microsoft.Resources/bulkDelete",
                "/subscriptions/{subscriptionId}/providers/Microsoft.Resources/bulkDelete",
            ),
            (
                "PUT",
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv/secrets/password",
                "{resourceId}",
            ),
            (
                "GET",
                "/providers/Cairn.Extensibility/extensions",
                "/providers/Cairn.Extensibility/...",
            ),
            ("GET", "/ui", "/ui"),
            ("GET", "/ui/assets/app.js", "/ui"),
            ("GET", "/ui/any/client/chosen/path", "/ui"),
            ("GET", "/no/such/thing", "unmatched"),
            (
                "BREW",
                "/subscriptions/s/resourcegroups/rg",
                "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}",
            ),
        ] {
            assert_eq!(route_template(method, path), template, "{method} {path}");
        }
    }
}
