//! The route classifier: from an HTTP method, a URL path and its query string, what the request addresses
//! (a resource group, a deployment, one of its actions, a stack, a generic resource, ...) or the ARM error
//! for a path or method cairn does not serve.
//!
//! ARM paths have arbitrary depth and match ignoring case, so the server routes one catch-all to
//! [`classify`] instead of encoding ARM routes in its router. Path segments are percent-decoded here.
//!
//! Routes of cairn's own choosing (ARM does not document them): `.../deploymentStacks/{name}/operationStatuses/{id}`
//! and `.../deploymentStacksWhatIfResults/{name}/operationStatuses/{id}` for stack LRO polling,
//! `/subscriptions/{sub}/operationresults/{id}` for `Location` polling of resource group deletes, and stack drift
//! detection: `POST .../deploymentStacks/{name}/detectDrift` and its results
//! `.../deploymentStacks/{name}/driftDetectionResults[/{id}]`.

use percent_encoding::percent_decode_str;

use crate::api_version::{self, ApiKind};
use crate::error::ArmError;
use crate::id::{ResourceId, ResourceIdKind};
use crate::query::Query;
use crate::wire::eq_ignore_case;

const RESOURCES_NAMESPACE: &str = "Microsoft.Resources";

/// The HTTP methods ARM uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Head,
    Put,
    Patch,
    Post,
    Delete,
}

impl Method {
    /// Reads an HTTP method name (ignoring case); `None` for methods ARM does not use.
    pub fn parse(method: &str) -> Option<Self> {
        const METHODS: [(&str, Method); 6] = [
            ("GET", Method::Get),
            ("HEAD", Method::Head),
            ("PUT", Method::Put),
            ("PATCH", Method::Patch),
            ("POST", Method::Post),
            ("DELETE", Method::Delete),
        ];
        METHODS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(method))
            .map(|(_, m)| *m)
    }

    /// The upper-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

/// POST actions on a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeploymentAction {
    Validate,
    /// Only at tenant, management group, subscription and resource group scope.
    WhatIf,
    Cancel,
    ExportTemplate,
}

/// POST actions on a deployment stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StackAction {
    Validate,
    ExportTemplate,
    /// cairn's drift detection (a long-running operation).
    DetectDrift,
    /// cairn's: stop the running operation at its next safe point.
    Cancel,
}

/// What a request addresses. Deployment and stack IDs include their scope (`id.scope_id()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `/subscriptions` (GET).
    Subscriptions,
    /// `/subscriptions/{sub}` (GET).
    Subscription { subscription: String },
    /// `/subscriptions/{sub}/resourcegroups` (GET list).
    ResourceGroups { subscription: String },
    /// `/subscriptions/{sub}/resourcegroups/{rg}` (GET, HEAD, PUT, PATCH, DELETE).
    ResourceGroup { id: ResourceId },
    /// `/subscriptions/{sub}/operationresults/{id}` (GET; `Location` polling).
    OperationResult {
        subscription: String,
        operation_id: String,
    },
    /// `/providers/Microsoft.Resources/calculateTemplateHash` (POST).
    CalculateTemplateHash,
    /// `{scope}/providers/Microsoft.Resources/deployments` (GET list).
    Deployments { scope: ResourceId },
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}` (GET, HEAD, PUT, DELETE).
    Deployment { id: ResourceId },
    /// `.../deployments/{name}/{validate|whatIf|cancel|exportTemplate}` (POST).
    DeploymentAction {
        id: ResourceId,
        action: DeploymentAction,
    },
    /// `.../deployments/{name}/operations` (GET list).
    DeploymentOperations { deployment: ResourceId },
    /// `.../deployments/{name}/operations/{operationId}` (GET).
    DeploymentOperation {
        deployment: ResourceId,
        operation_id: String,
    },
    /// `.../deployments/{name}/operationStatuses/{id}` (GET; `Azure-AsyncOperation` polling).
    DeploymentOperationStatus {
        deployment: ResourceId,
        operation_id: String,
    },
    /// `{rg|sub|mg}/providers/Microsoft.Resources/deploymentStacks` (GET list).
    DeploymentStacks { scope: ResourceId },
    /// `.../deploymentStacks/{name}` (GET, PUT, DELETE).
    DeploymentStack { id: ResourceId },
    /// `.../deploymentStacks/{name}/{validate|exportTemplate|detectDrift}` (POST).
    DeploymentStackAction { id: ResourceId, action: StackAction },
    /// `.../deploymentStacks/{name}/operationStatuses/{id}` (GET; cairn's stack LRO status).
    DeploymentStackOperationStatus {
        stack: ResourceId,
        operation_id: String,
    },
    /// `.../deploymentStacks/{name}/driftDetectionResults` (GET list; cairn's drift detection).
    DeploymentStackDriftResults { stack: ResourceId },
    /// `.../deploymentStacks/{name}/driftDetectionResults/{id}` (GET; the `Location` of a drift detection).
    DeploymentStackDriftResult { stack: ResourceId, result: String },
    /// `{rg|sub|mg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults` (GET list).
    DeploymentStacksWhatIfResults { scope: ResourceId },
    /// `.../deploymentStacksWhatIfResults/{name}` (GET, PUT, DELETE).
    DeploymentStacksWhatIfResult { id: ResourceId },
    /// `.../deploymentStacksWhatIfResults/{name}/whatIf` (POST).
    DeploymentStacksWhatIfResultAction { id: ResourceId },
    /// `.../deploymentStacksWhatIfResults/{name}/operationStatuses/{id}` (GET).
    DeploymentStacksWhatIfResultOperationStatus {
        result: ResourceId,
        operation_id: String,
    },
    /// Any other resource (GET, HEAD, PUT, PATCH, DELETE).
    Resource { id: ResourceId },
    /// A collection of a resource type at a scope or under a parent resource (GET list), e.g.
    /// `{rg}/providers/Microsoft.Storage/storageAccounts` or `{vnet}/subnets`.
    Resources {
        parent: ResourceId,
        resource_type: String,
    },
    /// A POST action on a resource, e.g. `{storageAccount}/listKeys`.
    ResourceAction { id: ResourceId, action: String },
}

impl Target {
    /// The methods this target answers.
    pub fn allowed_methods(&self) -> &'static [Method] {
        use Method::*;
        match self {
            Target::Subscriptions
            | Target::Subscription { .. }
            | Target::ResourceGroups { .. }
            | Target::OperationResult { .. }
            | Target::Deployments { .. }
            | Target::DeploymentOperations { .. }
            | Target::DeploymentOperation { .. }
            | Target::DeploymentOperationStatus { .. }
            | Target::DeploymentStacks { .. }
            | Target::DeploymentStackOperationStatus { .. }
            | Target::DeploymentStackDriftResults { .. }
            | Target::DeploymentStackDriftResult { .. }
            | Target::DeploymentStacksWhatIfResults { .. }
            | Target::DeploymentStacksWhatIfResultOperationStatus { .. }
            | Target::Resources { .. } => &[Get],
            Target::ResourceGroup { .. } | Target::Resource { .. } => {
                &[Get, Head, Put, Patch, Delete]
            }
            Target::Deployment { .. } => &[Get, Head, Put, Delete],
            Target::DeploymentStack { .. } | Target::DeploymentStacksWhatIfResult { .. } => {
                &[Get, Put, Delete]
            }
            Target::CalculateTemplateHash
            | Target::DeploymentAction { .. }
            | Target::DeploymentStackAction { .. }
            | Target::DeploymentStacksWhatIfResultAction { .. }
            | Target::ResourceAction { .. } => &[Post],
        }
    }

    /// Which api-version list applies; `None` for generic resources, whose versions belong to their provider.
    pub fn api_kind(&self) -> Option<ApiKind> {
        match self {
            Target::Subscriptions
            | Target::Subscription { .. }
            | Target::ResourceGroups { .. }
            | Target::ResourceGroup { .. }
            | Target::OperationResult { .. } => Some(ApiKind::ResourceGroups),
            Target::CalculateTemplateHash
            | Target::Deployments { .. }
            | Target::Deployment { .. }
            | Target::DeploymentAction { .. }
            | Target::DeploymentOperations { .. }
            | Target::DeploymentOperation { .. }
            | Target::DeploymentOperationStatus { .. } => Some(ApiKind::Deployments),
            Target::DeploymentStacks { .. }
            | Target::DeploymentStack { .. }
            | Target::DeploymentStackAction { .. }
            | Target::DeploymentStackOperationStatus { .. }
            | Target::DeploymentStackDriftResults { .. }
            | Target::DeploymentStackDriftResult { .. } => Some(ApiKind::DeploymentStacks),
            Target::DeploymentStacksWhatIfResults { .. }
            | Target::DeploymentStacksWhatIfResult { .. }
            | Target::DeploymentStacksWhatIfResultAction { .. }
            | Target::DeploymentStacksWhatIfResultOperationStatus { .. } => {
                Some(ApiKind::DeploymentStacksWhatIf)
            }
            Target::Resource { .. } | Target::Resources { .. } | Target::ResourceAction { .. } => {
                None
            }
        }
    }
}

/// A classified request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub target: Target,
    pub query: Query,
}

impl Route {
    /// The `api-version` query value.
    pub fn api_version(&self) -> Option<&str> {
        self.query.api_version()
    }

    /// Checks the `api-version` against the target's list. Generic resources only need one to be present.
    pub fn check_api_version(&self) -> Result<(), ArmError> {
        match self.target.api_kind() {
            Some(kind) => api_version::check(kind, self.api_version()),
            None if self.api_version().is_some_and(|v| !v.trim().is_empty()) => Ok(()),
            None => Err(ArmError::missing_api_version()),
        }
    }
}

/// Classifies a request. `path` is the raw (percent-encoded) URL path, `query` the raw query string
/// (with or without `?`). Errors: 400 `InvalidResourceId` for malformed paths, 404 `NotFound` for paths
/// cairn does not serve, 405 `MethodNotAllowed` for a method the target does not answer. The api-version is
/// not checked here (see [`Route::check_api_version`]).
pub fn classify(method: &str, path: &str, query: Option<&str>) -> Result<Route, ArmError> {
    let parsed_method =
        Method::parse(method).ok_or_else(|| ArmError::method_not_allowed(method))?;
    let target = classify_target(parsed_method, path)?;
    if !target.allowed_methods().contains(&parsed_method) {
        return Err(ArmError::method_not_allowed(parsed_method.as_str()));
    }
    Ok(Route {
        method: parsed_method,
        target,
        query: Query::parse(query.unwrap_or("")),
    })
}

/// Classifies a path. The method only matters for `{resource}/{segment}`, which lists a child type on GET
/// and runs an action on POST; it is not checked against the target here.
fn classify_target(method: Method, path: &str) -> Result<Target, ArmError> {
    let segments = decode_segments(path)?;
    let seg = |i: usize| segments.get(i).map(String::as_str);
    let is = |i: usize, keyword: &str| seg(i).is_some_and(|s| eq_ignore_case(s, keyword));

    match segments.len() {
        0 => return Err(ArmError::route_not_found(path)),
        1 if is(0, "subscriptions") => return Ok(Target::Subscriptions),
        2 if is(0, "subscriptions") => {
            return Ok(Target::Subscription {
                subscription: segments[1].clone(),
            });
        }
        3 if is(0, "subscriptions") && is(2, "resourceGroups") => {
            return Ok(Target::ResourceGroups {
                subscription: segments[1].clone(),
            });
        }
        4 if is(0, "subscriptions") && is(2, "resourceGroups") => {
            let id = ResourceId::resource_group(&segments[1], &segments[3])
                .map_err(|e| e.to_arm_error(path))?;
            return Ok(Target::ResourceGroup { id });
        }
        4 if is(0, "subscriptions") && is(2, "operationresults") => {
            return Ok(Target::OperationResult {
                subscription: segments[1].clone(),
                operation_id: segments[3].clone(),
            });
        }
        3 if is(0, "providers") && is(1, RESOURCES_NAMESPACE) && is(2, "calculateTemplateHash") => {
            return Ok(Target::CalculateTemplateHash);
        }
        _ => {}
    }

    if let Some(target) = classify_resources_route(path, &segments)? {
        return Ok(target);
    }
    classify_generic(method, path, &segments)
}

fn decode_segments(path: &str) -> Result<Vec<String>, ArmError> {
    let invalid = |reason: &str| ArmError::invalid_resource_id(path, reason);
    let Some(rest) = path.strip_prefix('/') else {
        return Err(invalid("the path must start with '/'"));
    };
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    rest.split('/')
        .map(|raw| {
            let decoded = percent_decode_str(raw)
                .decode_utf8()
                .map_err(|_| invalid("a path segment is not valid UTF-8"))?;
            if decoded.is_empty() {
                return Err(invalid("the path contains an empty segment"));
            }
            if decoded.contains('/') {
                return Err(invalid("a path segment contains an encoded '/'"));
            }
            // Every HTTP client removes dot segments (RFC 3986 §5.2.4), so a resource named `.` or `..` could be
            // created but never addressed again: its `Location` and `Azure-AsyncOperation` URLs would resolve
            // to another path.
            if decoded == "." || decoded == ".." {
                return Err(invalid("a path segment is '.' or '..'"));
            }
            if decoded.chars().any(char::is_control) {
                return Err(invalid("a path segment contains a control character"));
            }
            Ok(decoded.into_owned())
        })
        .collect()
}

#[derive(Clone, Copy)]
enum ResourcesType {
    Deployments,
    DeploymentStacks,
    DeploymentStacksWhatIfResults,
}

/// Finds the last `{scope}/providers/Microsoft.Resources/{deployments|deploymentStacks|...}` in the path
/// whose `{scope}` is a valid ID (which also makes sure `providers` sits where a type would), and
/// classifies what follows it.
fn classify_resources_route(path: &str, segments: &[String]) -> Result<Option<Target>, ArmError> {
    let is = |i: usize, keyword: &str| segments.get(i).is_some_and(|s| eq_ignore_case(s, keyword));
    for start in (0..segments.len()).rev() {
        if !(is(start, "providers") && is(start + 1, RESOURCES_NAMESPACE)) {
            continue;
        }
        let kind = if is(start + 2, "deployments") {
            ResourcesType::Deployments
        } else if is(start + 2, "deploymentStacks") {
            ResourcesType::DeploymentStacks
        } else if is(start + 2, "deploymentStacksWhatIfResults") {
            ResourcesType::DeploymentStacksWhatIfResults
        } else {
            continue;
        };
        let Ok(scope) = ResourceId::from_segments(&segments[..start]) else {
            continue;
        };
        let tail = &segments[start + 3..];
        // `.../deployments/{name}/providers/...` is an extension resource on the deployment: generic.
        if tail.get(1).is_some_and(|s| eq_ignore_case(s, "providers")) {
            continue;
        }
        let target = match kind {
            ResourcesType::Deployments => deployments_target(scope, tail),
            ResourcesType::DeploymentStacks => stacks_target(scope, tail),
            ResourcesType::DeploymentStacksWhatIfResults => what_if_results_target(scope, tail),
        };
        return target
            .map(Some)
            .ok_or_else(|| ArmError::route_not_found(path));
    }
    Ok(None)
}

fn child_id(scope: &ResourceId, resource_type: &str, name: &str) -> Option<ResourceId> {
    scope
        .provider(RESOURCES_NAMESPACE, resource_type, name)
        .ok()
}

fn deployments_target(scope: ResourceId, tail: &[String]) -> Option<Target> {
    let kw = |s: &String, k: &str| eq_ignore_case(s, k);
    Some(match tail {
        [] => Target::Deployments { scope },
        [name] => Target::Deployment {
            id: child_id(&scope, "deployments", name)?,
        },
        [name, op] if kw(op, "operations") => Target::DeploymentOperations {
            deployment: child_id(&scope, "deployments", name)?,
        },
        [name, action] => {
            let action = if kw(action, "validate") {
                DeploymentAction::Validate
            } else if kw(action, "whatIf") {
                // What-if is defined for the four classic scopes only.
                if scope.kind() == ResourceIdKind::Resource
                    || scope.kind() == ResourceIdKind::ExtensionResource
                {
                    return None;
                }
                DeploymentAction::WhatIf
            } else if kw(action, "cancel") {
                DeploymentAction::Cancel
            } else if kw(action, "exportTemplate") {
                DeploymentAction::ExportTemplate
            } else {
                return None;
            };
            Target::DeploymentAction {
                id: child_id(&scope, "deployments", name)?,
                action,
            }
        }
        [name, op, operation_id] if kw(op, "operations") => Target::DeploymentOperation {
            deployment: child_id(&scope, "deployments", name)?,
            operation_id: operation_id.clone(),
        },
        [name, op, operation_id] if kw(op, "operationStatuses") => {
            Target::DeploymentOperationStatus {
                deployment: child_id(&scope, "deployments", name)?,
                operation_id: operation_id.clone(),
            }
        }
        _ => return None,
    })
}

fn is_stack_scope(scope: &ResourceId) -> bool {
    matches!(
        scope.kind(),
        ResourceIdKind::ResourceGroup
            | ResourceIdKind::Subscription
            | ResourceIdKind::ManagementGroup
    )
}

fn stacks_target(scope: ResourceId, tail: &[String]) -> Option<Target> {
    if !is_stack_scope(&scope) {
        return None;
    }
    let kw = |s: &String, k: &str| eq_ignore_case(s, k);
    Some(match tail {
        [] => Target::DeploymentStacks { scope },
        [name] => Target::DeploymentStack {
            id: child_id(&scope, "deploymentStacks", name)?,
        },
        [name, action] => {
            if kw(action, "driftDetectionResults") {
                return Some(Target::DeploymentStackDriftResults {
                    stack: child_id(&scope, "deploymentStacks", name)?,
                });
            }
            let action = if kw(action, "validate") {
                StackAction::Validate
            } else if kw(action, "exportTemplate") {
                StackAction::ExportTemplate
            } else if kw(action, "detectDrift") {
                StackAction::DetectDrift
            } else if kw(action, "cancel") {
                StackAction::Cancel
            } else {
                return None;
            };
            Target::DeploymentStackAction {
                id: child_id(&scope, "deploymentStacks", name)?,
                action,
            }
        }
        [name, op, operation_id] if kw(op, "operationStatuses") => {
            Target::DeploymentStackOperationStatus {
                stack: child_id(&scope, "deploymentStacks", name)?,
                operation_id: operation_id.clone(),
            }
        }
        [name, results, result] if kw(results, "driftDetectionResults") => {
            Target::DeploymentStackDriftResult {
                stack: child_id(&scope, "deploymentStacks", name)?,
                result: result.clone(),
            }
        }
        _ => return None,
    })
}

fn what_if_results_target(scope: ResourceId, tail: &[String]) -> Option<Target> {
    if !is_stack_scope(&scope) {
        return None;
    }
    let kw = |s: &String, k: &str| eq_ignore_case(s, k);
    const TYPE: &str = "deploymentStacksWhatIfResults";
    Some(match tail {
        [] => Target::DeploymentStacksWhatIfResults { scope },
        [name] => Target::DeploymentStacksWhatIfResult {
            id: child_id(&scope, TYPE, name)?,
        },
        [name, action] if kw(action, "whatIf") => Target::DeploymentStacksWhatIfResultAction {
            id: child_id(&scope, TYPE, name)?,
        },
        [name, op, operation_id] if kw(op, "operationStatuses") => {
            Target::DeploymentStacksWhatIfResultOperationStatus {
                result: child_id(&scope, TYPE, name)?,
                operation_id: operation_id.clone(),
            }
        }
        _ => return None,
    })
}

/// Generic resources: the path is a resource ID, a collection under a resource or scope, or an action.
fn classify_generic(method: Method, path: &str, segments: &[String]) -> Result<Target, ArmError> {
    let whole = ResourceId::from_segments(segments);
    if let Ok(id) = &whole {
        return match id.kind() {
            ResourceIdKind::Tenant => Err(ArmError::route_not_found(path)),
            _ => Ok(Target::Resource { id: id.clone() }),
        };
    }

    let (last, init) = match segments.split_last() {
        Some(split) => split,
        None => return Err(ArmError::route_not_found(path)),
    };
    // `{resource}/{childType}` (a child collection, or an action when POSTed).
    if let Ok(parent) = ResourceId::from_segments(init)
        && matches!(
            parent.kind(),
            ResourceIdKind::Resource | ResourceIdKind::ExtensionResource
        )
        && !eq_ignore_case(last, "providers")
    {
        return Ok(if method == Method::Post {
            Target::ResourceAction {
                id: parent,
                action: last.clone(),
            }
        } else {
            let resource_type = format!("{}/{last}", parent.resource_type());
            Target::Resources {
                parent,
                resource_type,
            }
        });
    }
    // `{scope}/providers/{namespace}/{type}` (a top-level collection).
    if let [scope @ .., providers, namespace, resource_type] = segments
        && eq_ignore_case(providers, "providers")
        && !eq_ignore_case(resource_type, "providers")
        && let Ok(parent) = ResourceId::from_segments(scope)
    {
        return Ok(Target::Resources {
            parent,
            resource_type: format!("{namespace}/{resource_type}"),
        });
    }
    match whole {
        Err(e) if is(segments, 0, "subscriptions") || is(segments, 0, "providers") => {
            Err(e.to_arm_error(path))
        }
        _ => Err(ArmError::route_not_found(path)),
    }
}

fn is(segments: &[String], i: usize, keyword: &str) -> bool {
    segments.get(i).is_some_and(|s| eq_ignore_case(s, keyword))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;

    fn target(path: &str) -> Target {
        classify_path(path).unwrap()
    }

    fn classify_path(path: &str) -> Result<Target, ArmError> {
        let method = if path.ends_with("validate") || path.ends_with("listKeys") {
            Method::Post
        } else {
            Method::Get
        };
        classify_target(method, path)
    }

    fn id(s: &str) -> ResourceId {
        ResourceId::parse(s).unwrap()
    }

    #[test]
    fn resource_group_routes() {
        assert_eq!(
            target("/subscriptions/s/resourcegroups"),
            Target::ResourceGroups {
                subscription: "s".into()
            }
        );
        assert_eq!(
            target("/subscriptions/s/resourceGroups/my%20rg"),
            Target::ResourceGroup {
                id: id("/subscriptions/s/resourceGroups/my rg")
            }
        );
        assert_eq!(
            target("/subscriptions/s"),
            Target::Subscription {
                subscription: "s".into()
            }
        );
        assert_eq!(target("/subscriptions"), Target::Subscriptions);
        assert_eq!(
            target("/subscriptions/s/operationresults/abc"),
            Target::OperationResult {
                subscription: "s".into(),
                operation_id: "abc".into()
            }
        );
    }

    #[test]
    fn deployment_routes_at_every_scope() {
        let scopes = [
            "",
            "/providers/Microsoft.Management/managementGroups/mg",
            "/subscriptions/s",
            "/subscriptions/s/resourcegroups/rg",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa",
        ];
        for scope in scopes {
            let scope_id = if scope.is_empty() {
                ResourceId::tenant()
            } else {
                id(scope)
            };
            let d = scope_id
                .provider("Microsoft.Resources", "deployments", "d1")
                .unwrap();
            let base = format!("{scope}/providers/Microsoft.Resources/deployments");
            assert_eq!(
                target(&base),
                Target::Deployments {
                    scope: scope_id.clone()
                },
                "{base}"
            );
            assert_eq!(
                target(&format!("{base}/d1")),
                Target::Deployment { id: d.clone() }
            );
            assert_eq!(
                target(&format!("{base}/d1/VALIDATE")),
                Target::DeploymentAction {
                    id: d.clone(),
                    action: DeploymentAction::Validate
                }
            );
            assert_eq!(
                target(&format!("{base}/d1/cancel")),
                Target::DeploymentAction {
                    id: d.clone(),
                    action: DeploymentAction::Cancel
                }
            );
            assert_eq!(
                target(&format!("{base}/d1/exportTemplate")),
                Target::DeploymentAction {
                    id: d.clone(),
                    action: DeploymentAction::ExportTemplate
                }
            );
            assert_eq!(
                target(&format!("{base}/d1/operations")),
                Target::DeploymentOperations {
                    deployment: d.clone()
                }
            );
            assert_eq!(
                target(&format!("{base}/d1/operations/op1")),
                Target::DeploymentOperation {
                    deployment: d.clone(),
                    operation_id: "op1".into()
                }
            );
            assert_eq!(
                target(&format!("{base}/d1/operationStatuses/x")),
                Target::DeploymentOperationStatus {
                    deployment: d.clone(),
                    operation_id: "x".into()
                }
            );
        }
    }

    #[test]
    fn what_if_is_not_served_at_extension_scope() {
        let rg =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d/whatIf";
        assert!(matches!(
            target(rg),
            Target::DeploymentAction {
                action: DeploymentAction::WhatIf,
                ..
            }
        ));
        let ext = "/subscriptions/s/resourceGroups/rg/providers/A.B/t/n/providers/Microsoft.Resources/deployments/d/whatIf";
        assert_eq!(classify_path(ext).unwrap_err().status(), 404);
    }

    #[test]
    fn stack_routes() {
        let base =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks";
        let stack = id(&format!("{base}/st"));
        assert!(matches!(target(base), Target::DeploymentStacks { .. }));
        assert_eq!(
            target(&format!("{base}/st")),
            Target::DeploymentStack { id: stack.clone() }
        );
        assert_eq!(
            target(&format!("{base}/st/validate")),
            Target::DeploymentStackAction {
                id: stack.clone(),
                action: StackAction::Validate
            }
        );
        assert_eq!(
            target(&format!("{base}/st/exportTemplate")),
            Target::DeploymentStackAction {
                id: stack.clone(),
                action: StackAction::ExportTemplate
            }
        );
        assert_eq!(
            target(&format!("{base}/st/operationStatuses/o")),
            Target::DeploymentStackOperationStatus {
                stack: stack.clone(),
                operation_id: "o".into()
            }
        );
        assert_eq!(
            target(&format!("{base}/st/DETECTDRIFT")),
            Target::DeploymentStackAction {
                id: stack.clone(),
                action: StackAction::DetectDrift
            }
        );
        assert_eq!(
            target(&format!("{base}/st/driftDetectionResults")),
            Target::DeploymentStackDriftResults {
                stack: stack.clone()
            }
        );
        assert_eq!(
            target(&format!("{base}/st/driftDetectionResults/d1")),
            Target::DeploymentStackDriftResult {
                stack,
                result: "d1".into()
            }
        );
        let mg = "/providers/Microsoft.Management/managementGroups/mg/providers/Microsoft.Resources/deploymentStacks/st";
        assert!(matches!(target(mg), Target::DeploymentStack { .. }));
        // Stacks exist at resource group, subscription and management group scope only.
        let tenant = "/providers/Microsoft.Resources/deploymentStacks/st";
        assert_eq!(classify_path(tenant).unwrap_err().code(), codes::NOT_FOUND);
        assert_eq!(
            target(&format!("{base}/st/cancel")),
            Target::DeploymentStackAction {
                id: ResourceId::parse(&format!("{base}/st")).unwrap(),
                action: StackAction::Cancel
            }
        );
        assert_eq!(
            classify_path(&format!("{base}/st/pause"))
                .unwrap_err()
                .code(),
            codes::NOT_FOUND
        );
    }

    #[test]
    fn stack_what_if_routes() {
        let base = "/subscriptions/s/providers/Microsoft.Resources/deploymentStacksWhatIfResults";
        assert!(matches!(
            target(base),
            Target::DeploymentStacksWhatIfResults { .. }
        ));
        assert!(matches!(
            target(&format!("{base}/w")),
            Target::DeploymentStacksWhatIfResult { .. }
        ));
        assert!(matches!(
            target(&format!("{base}/w/whatif")),
            Target::DeploymentStacksWhatIfResultAction { .. }
        ));
        assert!(matches!(
            target(&format!("{base}/w/operationStatuses/o")),
            Target::DeploymentStacksWhatIfResultOperationStatus { .. }
        ));
    }

    #[test]
    fn generic_resources() {
        let sa =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/sa";
        assert_eq!(target(sa), Target::Resource { id: id(sa) });
        assert_eq!(
            target(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts"
            ),
            Target::Resources {
                parent: id("/subscriptions/s/resourceGroups/rg"),
                resource_type: "Microsoft.Storage/storageAccounts".into()
            }
        );
        assert_eq!(
            target(&format!("{sa}/listKeys")),
            Target::ResourceAction {
                id: id(sa),
                action: "listKeys".into()
            }
        );
        // An extension resource on a deployment is a generic resource.
        let lock = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d/providers/Microsoft.Authorization/locks/l";
        assert_eq!(target(lock), Target::Resource { id: id(lock) });
        // A deployment named like a keyword is still a deployment.
        let odd = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/providers";
        assert!(matches!(target(odd), Target::Deployment { .. }));
    }

    #[test]
    fn child_collections_read_as_resources_for_get() {
        let vnet =
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v";
        let route = classify(
            "GET",
            &format!("{vnet}/subnets"),
            Some("api-version=2024-01-01"),
        )
        .unwrap();
        assert_eq!(
            route.target,
            Target::Resources {
                parent: id(vnet),
                resource_type: "Microsoft.Network/virtualNetworks/subnets".into()
            }
        );
        let route = classify("POST", &format!("{vnet}/subnets"), None).unwrap();
        assert!(matches!(route.target, Target::ResourceAction { .. }));
    }

    #[test]
    fn method_and_path_errors_are_arm_shaped() {
        let d = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deployments/d";
        assert_eq!(classify("PATCH", d, None).unwrap_err().status(), 405);
        assert_eq!(classify("TRACE", d, None).unwrap_err().status(), 405);
        assert_eq!(
            classify("GET", &format!("{d}/validate"), None)
                .unwrap_err()
                .status(),
            405
        );
        assert_eq!(classify("GET", "/", None).unwrap_err().status(), 404);
        assert_eq!(
            classify("GET", "/foo/bar", None).unwrap_err().code(),
            codes::NOT_FOUND
        );
        assert_eq!(
            classify("GET", "no-slash", None).unwrap_err().code(),
            codes::INVALID_RESOURCE_ID
        );
        assert_eq!(
            classify("GET", "/subscriptions/s//x", None)
                .unwrap_err()
                .code(),
            codes::INVALID_RESOURCE_ID
        );
        assert_eq!(
            classify("GET", "/subscriptions/s/locations/x", None)
                .unwrap_err()
                .code(),
            codes::INVALID_RESOURCE_ID
        );
        assert_eq!(
            classify("GET", "/subscriptions/s/resourceGroups/a%2Fb", None)
                .unwrap_err()
                .code(),
            codes::INVALID_RESOURCE_ID
        );
        assert_eq!(
            classify("GET", "/subscriptions/%FF", None)
                .unwrap_err()
                .code(),
            codes::INVALID_RESOURCE_ID
        );
    }

    #[test]
    fn dot_segments_and_control_characters_are_not_names() {
        let deployments =
            "/subscriptions/s/resourcegroups/rg/providers/Microsoft.Resources/deployments";
        for path in [
            format!("{deployments}/.."),
            format!("{deployments}/%2e%2E"),
            format!("{deployments}/."),
            "/subscriptions/../resourcegroups/rg".to_string(),
            "/subscriptions/s/resourcegroups/%2e".to_string(),
            "/subscriptions/%00/resourcegroups/rg".to_string(),
            format!("{deployments}/a%0Ab"),
        ] {
            let error = classify("PUT", &path, Some("api-version=2025-04-01")).unwrap_err();
            assert_eq!(error.code(), codes::INVALID_RESOURCE_ID, "{path}");
        }
        for name in ["...", ".a", "a..b", "a."] {
            assert!(
                classify("PUT", &format!("{deployments}/{name}"), None).is_ok(),
                "{name} is a name, not a dot segment"
            );
        }
    }

    #[test]
    fn api_versions_are_checked_per_target() {
        let stack = "/subscriptions/s/providers/Microsoft.Resources/deploymentStacks/st";
        let ok = classify("PUT", stack, Some("?api-version=2024-03-01")).unwrap();
        assert!(ok.check_api_version().is_ok());
        let wrong = classify("PUT", stack, Some("api-version=2025-04-01")).unwrap();
        assert_eq!(
            wrong.check_api_version().unwrap_err().code(),
            codes::INVALID_API_VERSION_PARAMETER
        );
        let missing = classify("GET", "/subscriptions/s/resourcegroups/rg", None).unwrap();
        assert_eq!(
            missing.check_api_version().unwrap_err().code(),
            codes::MISSING_API_VERSION_PARAMETER
        );
        let generic = classify(
            "GET",
            "/subscriptions/s/resourceGroups/rg/providers/A.B/t/n",
            Some("api-version=1999-01-01"),
        )
        .unwrap();
        assert!(generic.check_api_version().is_ok());
    }
}
