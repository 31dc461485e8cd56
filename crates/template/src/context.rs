//! The deployment context: who and where a deployment runs (tenant, subscription, resource group, location,
//! deployment name, clock) — the facts scope functions return. Read from `--context ctx.json` or built by callers.

use cairn_eval::{DeploymentFacts, EvalLimits, Object, ScopeKind, SharedBudget, Value, ids};
use serde::Deserialize;

const ZERO_GUID: &str = "00000000-0000-0000-0000-000000000000";

/// Deployment facts as callers supply them. Field names follow the conformance corpus' `context` objects.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeploymentContext {
    pub tenant_id: String,
    pub subscription_id: String,
    pub subscription_display_name: Option<String>,
    pub resource_group: String,
    pub resource_group_location: String,
    /// The deployment's location (subscription, management group and tenant deployments).
    pub location: Option<String>,
    pub management_group: Option<String>,
    pub deployment_name: String,
    /// The cloud name (`AzureCloud`).
    pub environment: Option<String>,
    /// Pinned clock, RFC 3339.
    pub utc_now: Option<String>,
    pub new_guids: Vec<String>,
    pub resource_group_object: Option<serde_json::Value>,
    pub tenant_object: Option<serde_json::Value>,
    pub management_group_object: Option<serde_json::Value>,
    pub subscription_object: Option<serde_json::Value>,
    pub deployer: Option<serde_json::Value>,
    pub availability_zones: Option<serde_json::Value>,
    /// Answers for `reference()` on resources outside the template: id → `{ apiVersion, properties }`.
    pub references: Option<serde_json::Map<String, serde_json::Value>>,
    /// Answers for `list*()`: `"{id}|{function}"` (lower-case function name) → response.
    pub list_responses: Option<serde_json::Map<String, serde_json::Value>>,
    /// The mock provider returns a deployed resource's declared properties as its runtime state.
    pub echo_provider: bool,
    /// Values for `externalInputs('key')` in parameters files.
    pub external_inputs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Budgets of the expansion (nested deployments share their parent's); set by the caller, not read from
    /// context files.
    #[serde(skip)]
    pub eval_limits: EvalLimits,
    /// The budget every evaluation of the process draws on together (a server's); set by the caller.
    #[serde(skip)]
    pub shared_budget: Option<std::sync::Arc<SharedBudget>>,
}

impl DeploymentContext {
    /// The facts of a nested deployment named `name`: these, with the `subscriptionId`, `resourceGroup`,
    /// `location` and `scope` its deployment resource gives (`property` reads a string property of its body).
    pub fn for_nested(
        &self,
        name: String,
        property: impl Fn(&str) -> Option<String>,
    ) -> DeploymentContext {
        let mut ctx = self.clone();
        ctx.deployment_name = name;
        if let Some(s) = property("subscriptionId") {
            ctx.subscription_id = s;
            ctx.subscription_object = None;
        }
        if let Some(rg) = property("resourceGroup")
            && !rg.eq_ignore_ascii_case(&ctx.resource_group)
        {
            ctx.resource_group = rg;
            ctx.resource_group_object = None;
        }
        if let Some(l) = property("location") {
            ctx.location = Some(l);
        }
        if let Some(scope) = property("scope") {
            let scope = normalize_scope(&scope);
            let lower = scope.to_ascii_lowercase();
            if let Some(mg) =
                lower.strip_prefix("/providers/microsoft.management/managementgroups/")
            {
                ctx.management_group = Some(scope[scope.len() - mg.len()..].to_string());
                ctx.management_group_object = None;
            }
        }
        ctx
    }
}

/// A `scope` value as an absolute scope ID: `/` is the tenant; a relative ID such as
/// `Microsoft.Management/managementGroups/mg` (what Bicep emits for module scopes) is under `/providers/`.
pub(crate) fn normalize_scope(scope: &str) -> String {
    let trimmed = scope.trim_end_matches('/');
    if trimmed.is_empty() {
        return String::new();
    }
    if trimmed.starts_with('/') {
        return trimmed.to_string();
    }
    let lower = trimmed.to_ascii_lowercase();
    if lower.starts_with("subscriptions/") || lower.starts_with("providers/") {
        return format!("/{trimmed}");
    }
    format!("/providers/{trimmed}")
}

impl Default for DeploymentContext {
    fn default() -> DeploymentContext {
        DeploymentContext {
            tenant_id: ZERO_GUID.into(),
            subscription_id: ZERO_GUID.into(),
            subscription_display_name: None,
            resource_group: "DummyResourceGroup".into(),
            resource_group_location: "Dummy Location".into(),
            location: None,
            management_group: None,
            deployment_name: "deployment".into(),
            environment: None,
            utc_now: None,
            new_guids: Vec::new(),
            resource_group_object: None,
            tenant_object: None,
            management_group_object: None,
            subscription_object: None,
            deployer: None,
            availability_zones: None,
            references: None,
            list_responses: None,
            echo_provider: false,
            external_inputs: None,
            eval_limits: EvalLimits::default(),
            shared_budget: None,
        }
    }
}

fn obj(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

impl DeploymentContext {
    /// The scope-function values for a deployment at `scope`.
    pub fn facts(&self, scope: ScopeKind) -> DeploymentFacts {
        let tenant = self
            .tenant_object
            .as_ref()
            .map(Value::from_json)
            .unwrap_or_else(|| {
                obj(vec![
                    ("countryCode", Value::from("US")),
                    ("displayName", Value::from("Default Directory")),
                    ("id", Value::from(format!("/tenants/{}", self.tenant_id))),
                    ("tenantId", Value::from(self.tenant_id.as_str())),
                ])
            });
        let has_subscription = matches!(
            scope,
            ScopeKind::Subscription | ScopeKind::ResourceGroup | ScopeKind::Local
        );
        let subscription = if has_subscription {
            self.subscription_object
                .as_ref()
                .map(Value::from_json)
                .unwrap_or_else(|| {
                    obj(vec![
                        (
                            "id",
                            Value::from(ids::subscription_scope(&self.subscription_id)),
                        ),
                        ("subscriptionId", Value::from(self.subscription_id.as_str())),
                        ("tenantId", Value::from(self.tenant_id.as_str())),
                        (
                            "displayName",
                            Value::from(
                                self.subscription_display_name
                                    .clone()
                                    .unwrap_or_else(|| "Subscription".into()),
                            ),
                        ),
                    ])
                })
        } else {
            Value::Null
        };
        let has_rg = matches!(scope, ScopeKind::ResourceGroup | ScopeKind::Local);
        let resource_group_object = if has_rg {
            self.resource_group_object
                .as_ref()
                .map(Value::from_json)
                .unwrap_or_else(|| {
                    obj(vec![
                        (
                            "id",
                            Value::from(ids::resource_group_scope(
                                &self.subscription_id,
                                &self.resource_group,
                            )),
                        ),
                        ("name", Value::from(self.resource_group.as_str())),
                        ("type", Value::from("Microsoft.Resources/resourceGroups")),
                        (
                            "location",
                            Value::from(self.resource_group_location.as_str()),
                        ),
                        (
                            "properties",
                            obj(vec![("provisioningState", Value::from("Succeeded"))]),
                        ),
                    ])
                })
        } else {
            Value::Null
        };
        let management_group = self.management_group.clone();
        let management_group_object = match (&self.management_group_object, &management_group) {
            (Some(o), _) => Value::from_json(o),
            (None, Some(mg)) if scope == ScopeKind::ManagementGroup => obj(vec![
                ("id", Value::from(ids::management_group_scope(mg))),
                ("name", Value::from(mg.as_str())),
                ("type", Value::from("Microsoft.Management/managementGroups")),
                (
                    "properties",
                    obj(vec![
                        ("displayName", Value::from(mg.as_str())),
                        ("tenantId", Value::from(self.tenant_id.as_str())),
                    ]),
                ),
            ]),
            _ => Value::Null,
        };
        let deployer = self
            .deployer
            .as_ref()
            .map(Value::from_json)
            .unwrap_or_else(|| {
                obj(vec![
                    ("objectId", Value::from(ZERO_GUID)),
                    ("tenantId", Value::from(self.tenant_id.as_str())),
                    ("userPrincipalName", Value::from("cairn@localhost")),
                ])
            });
        let zones = match self.availability_zones.as_ref().map(Value::from_json) {
            Some(Value::Object(o)) => o,
            _ => Object::new(),
        };
        DeploymentFacts {
            scope,
            tenant_id: self.tenant_id.clone(),
            subscription_id: has_subscription.then(|| self.subscription_id.clone()),
            resource_group: has_rg.then(|| self.resource_group.clone()),
            management_group: if scope == ScopeKind::ManagementGroup {
                management_group
            } else {
                None
            },
            tenant,
            subscription,
            resource_group_object,
            management_group_object,
            deployment: Value::Null,
            environment: environment(self.environment.as_deref().unwrap_or("AzureCloud")),
            deployer,
            utc_now: self
                .utc_now
                .clone()
                .unwrap_or_else(|| "2024-01-01T00:00:00Z".into()),
            new_guids: self.new_guids.clone(),
            availability_zones: zones,
        }
    }

    /// The scope ID resources of a template at `scope` live under.
    pub fn scope_id(&self, scope: ScopeKind) -> String {
        match scope {
            ScopeKind::ResourceGroup | ScopeKind::Local => {
                ids::resource_group_scope(&self.subscription_id, &self.resource_group)
            }
            ScopeKind::Subscription => ids::subscription_scope(&self.subscription_id),
            ScopeKind::ManagementGroup => {
                ids::management_group_scope(self.management_group.as_deref().unwrap_or(ZERO_GUID))
            }
            ScopeKind::Tenant => String::new(),
        }
    }
}

/// `environment()` for the public cloud (values from the ARM docs).
fn environment(name: &str) -> Value {
    let s = |x: &str| Value::from(x);
    obj(vec![
        ("name", s(name)),
        ("gallery", s("https://gallery.azure.com/")),
        ("graph", s("https://graph.windows.net/")),
        ("portal", s("https://portal.azure.com")),
        ("graphAudience", s("https://graph.windows.net/")),
        ("activeDirectoryDataLake", s("https://datalake.azure.net/")),
        ("batch", s("https://batch.core.windows.net/")),
        ("media", s("https://rest.media.azure.net")),
        (
            "sqlManagement",
            s("https://management.core.windows.net:8443/"),
        ),
        (
            "vmImageAliasDoc",
            s(
                "https://raw.githubusercontent.com/Azure/azure-rest-api-specs/master/arm-compute/quickstart-templates/aliases.json",
            ),
        ),
        ("resourceManager", s("https://management.azure.com/")),
        (
            "authentication",
            obj(vec![
                ("loginEndpoint", s("https://login.microsoftonline.com/")),
                (
                    "audiences",
                    Value::Array(vec![
                        s("https://management.core.windows.net/"),
                        s("https://management.azure.com/"),
                    ]),
                ),
                ("tenant", s("common")),
                ("identityProvider", s("AAD")),
            ]),
        ),
        (
            "suffixes",
            obj(vec![
                ("acrLoginServer", s(".azurecr.io")),
                (
                    "azureDatalakeAnalyticsCatalogAndJob",
                    s("azuredatalakeanalytics.net"),
                ),
                ("azureDatalakeStoreFileSystem", s("azuredatalakestore.net")),
                ("azureFrontDoorEndpointSuffix", s("azurefd.net")),
                ("keyvaultDns", s(".vault.azure.net")),
                ("sqlServerHostname", s(".database.windows.net")),
                ("storage", s("core.windows.net")),
            ]),
        ),
    ])
}
