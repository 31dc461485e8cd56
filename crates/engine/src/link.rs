//! Linked templates: `templateLink` (a template spec version `id`, a `uri`, or a `relativePath` against the
//! parent's link) and `parametersLink`. Templates behind URIs come through a [`TemplateFetcher`]: the
//! [`HttpTemplateFetcher`] by default (size cap, timeout, redirects to http(s) only), an in-process one in tests.
//!
//! Query strings (`templateLink.queryString`, or a URI's own query) are SAS tokens: credentials. They never appear
//! in errors, logs or records; a stored root request keeps its query sealed in the secret store.

use cairn_arm::access::{Access, Action};
use cairn_arm::models::common::{ParametersLink, TemplateLink};
use cairn_arm::models::deployment::DeploymentProperties;
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_arm::{ArmError, ErrorDetail, ResourceId};
use cairn_eval::Value;
use cairn_json::Node;
use cairn_store::{SecretOwner, Store, StoreResult};
use cairn_template::{DeploymentContext, Expansion, NestedTemplate, ResourceIdentity, Template};
use reqwest::Url;
use serde_json::{Map, Value as Json};

use crate::env::EngineEnv;
use crate::fetch::FetchError;
use crate::provider::{SpecVersion, TEMPLATE_SPEC_VERSIONS_TYPE, normalize_path};
use crate::request::template_error;

const INVALID_CONTENT_LINK: &str = "InvalidContentLink";

/// Where a deployment's template came from: what a nested deployment's `relativePath` resolves against.
#[derive(Clone, Default)]
pub(crate) enum TemplateOrigin {
    /// An inline template (or none known): `relativePath` has nothing to resolve against.
    #[default]
    Inline,
    /// A template downloaded from `uri` (without its query); `query` is sent again with relative links.
    Uri { uri: Url, query: Option<String> },
    /// A template spec version's main template (`path` `None`) or one of its linked templates.
    Spec {
        version_id: String,
        path: Option<String>,
    },
}

impl std::fmt::Debug for TemplateOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateOrigin::Inline => f.write_str("Inline"),
            TemplateOrigin::Uri { uri, query } => f
                .debug_struct("Uri")
                .field("uri", &uri.as_str())
                .field("query", &query.as_ref().map(|_| "[REDACTED]"))
                .finish(),
            TemplateOrigin::Spec { version_id, path } => f
                .debug_struct("Spec")
                .field("version_id", version_id)
                .field("path", path)
                .finish(),
        }
    }
}

impl TemplateOrigin {
    /// The origin of a (resolved or stored) request's template, from its `templateLink`.
    pub(crate) fn of(properties: &DeploymentProperties) -> TemplateOrigin {
        let Some(link) = &properties.template_link else {
            return TemplateOrigin::Inline;
        };
        if let Some(id) = non_empty(&link.id) {
            return TemplateOrigin::Spec {
                version_id: id.to_string(),
                path: None,
            };
        }
        if let Some(uri) = non_empty(&link.uri)
            && let Ok((uri, query)) = absolute_uri(uri, link.query_string.as_deref())
        {
            return TemplateOrigin::Uri { uri, query };
        }
        TemplateOrigin::Inline
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A URI for messages: scheme, host and path only (no credentials, no query).
pub(crate) fn display_uri(uri: &Url) -> String {
    let mut shown = uri.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    let _ = shown.set_password(None);
    let _ = shown.set_username("");
    shown.to_string()
}

/// A URI text for messages when it does not parse: everything before `?` or `#`.
pub(crate) fn display_text(uri: &str) -> String {
    let end = uri.find(['?', '#']).unwrap_or(uri.len());
    let head = &uri[..end];
    // Credentials in the authority (`user:pass@host`) are dropped too.
    match (head.find("://"), head.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}{}", &head[..scheme_end + 3], &head[at + 1..])
        }
        _ => head.to_string(),
    }
}

/// Joins two query strings (either may be empty or start with `?`).
fn join_query(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let parts: Vec<&str> = [a, b]
        .into_iter()
        .flatten()
        .map(|q| q.trim_start_matches('?'))
        .filter(|q| !q.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("&"))
}

/// An absolute http(s) URI split into the URI without query and the query to send (its own plus `query_string`).
fn absolute_uri(uri: &str, query_string: Option<&str>) -> Result<(Url, Option<String>), ArmError> {
    let parsed = Url::parse(uri.trim()).map_err(|_| {
        ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!(
                "The template link '{}' is not an absolute URI.",
                display_text(uri)
            ),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!(
                "The template link '{}' must use http or https.",
                display_uri(&parsed)
            ),
        ));
    }
    let query = join_query(parsed.query(), query_string);
    let mut base = parsed;
    base.set_query(None);
    base.set_fragment(None);
    Ok((base, query))
}

fn with_query(uri: &Url, query: Option<&str>) -> Url {
    let mut full = uri.clone();
    full.set_query(query);
    full
}

fn download_error(uri: &Url, reason: &dyn std::fmt::Display) -> ArmError {
    ArmError::new(
        400,
        INVALID_CONTENT_LINK,
        format!(
            "Unable to download deployment content from '{}': {reason}.",
            display_uri(uri)
        ),
    )
}

/// Downloads `uri` (with `query`) and parses it as a JSON object.
async fn fetch_json(env: &EngineEnv, uri: &Url, query: Option<&str>) -> Result<Json, ArmError> {
    let max = env.settings.max_linked_template_bytes;
    let bytes = env
        .fetcher
        .fetch(&with_query(uri, query), max)
        .await
        .map_err(|e| download_error(uri, &e))?;
    if bytes.len() > max {
        return Err(download_error(uri, &FetchError::TooLarge(max)));
    }
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    serde_json::from_slice::<Json>(text)
        .ok()
        .filter(Json::is_object)
        .ok_or_else(|| {
            ArmError::new(
                400,
                INVALID_CONTENT_LINK,
                format!(
                    "The content downloaded from '{}' is not a JSON object.",
                    display_uri(uri)
                ),
            )
        })
}

/// A template spec version by ID, through the registered template spec provider.
async fn spec_version(env: &EngineEnv, access: &Access, id: &str) -> Result<SpecVersion, ArmError> {
    let not_version = || {
        ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!(
                "'{id}' is not a template spec version ID \
                 (/subscriptions/{{s}}/resourceGroups/{{rg}}/providers/Microsoft.Resources/templateSpecs/{{name}}/versions/{{version}})."
            ),
        )
    };
    let parsed = ResourceId::parse(id).map_err(|_| not_version())?;
    if !parsed
        .resource_type()
        .eq_ignore_ascii_case(TEMPLATE_SPEC_VERSIONS_TYPE)
    {
        return Err(not_version());
    }
    access.check(Action::Read, id)?;
    let provider = env
        .providers
        .get(TEMPLATE_SPEC_VERSIONS_TYPE)
        .ok_or_else(|| {
            ArmError::new(
                400,
                "NoRegisteredProviderFound",
                "No provider serves template spec versions.",
            )
        })?;
    let body = provider
        .get(&parsed, "")
        .await
        .map_err(|e| ArmError::from_detail(e.status, *e.error))?;
    let Some(body) = body else {
        return Err(ArmError::new(
            404,
            "TemplateSpecVersionNotFound",
            format!("The template spec version '{id}' could not be found."),
        ));
    };
    SpecVersion::from_body(&body).ok_or_else(|| {
        ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!("The template spec version '{id}' has no main template."),
        )
    })
}

/// A resolved `templateLink`.
pub(crate) struct Linked {
    pub template: Json,
    pub origin: TemplateOrigin,
    /// The link as records show it: `uri` absolute and without query, `id` for template spec links.
    pub shown: Json,
}

fn check_content_version(
    link: &TemplateLink,
    template: &Json,
    source: &str,
) -> Result<(), ArmError> {
    let (Some(wanted), Some(found)) = (
        non_empty(&link.content_version),
        template.get("contentVersion").and_then(Json::as_str),
    ) else {
        return Ok(());
    };
    if wanted == found {
        return Ok(());
    }
    Err(ArmError::new(
        400,
        "InvalidContentVersion",
        format!(
            "The content version '{found}' of the template at '{source}' does not match the link's contentVersion '{wanted}'."
        ),
    ))
}

/// Resolves `link` (from a deployment whose own template came from `parent`).
pub(crate) async fn resolve_link(
    env: &EngineEnv,
    access: &Access,
    link: &TemplateLink,
    parent: &TemplateOrigin,
) -> Result<Linked, ArmError> {
    let id = non_empty(&link.id);
    let uri = non_empty(&link.uri);
    let relative = non_empty(&link.relative_path);
    let given = [id.is_some(), uri.is_some(), relative.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given != 1 {
        return Err(ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            "A templateLink gives exactly one of 'id' (a template spec version), 'uri' or 'relativePath'.",
        ));
    }
    let mut shown = Map::new();
    if let Some(v) = non_empty(&link.content_version) {
        shown.insert("contentVersion".into(), Json::String(v.to_string()));
    }
    if let Some(id) = id {
        let version = spec_version(env, access, id).await?;
        check_content_version(link, &version.main_template, id)?;
        shown.insert("id".into(), Json::String(id.to_string()));
        return Ok(Linked {
            template: version.main_template,
            origin: TemplateOrigin::Spec {
                version_id: id.to_string(),
                path: None,
            },
            shown: Json::Object(shown),
        });
    }
    if let Some(uri) = uri {
        let (uri, query) = absolute_uri(uri, link.query_string.as_deref())?;
        let template = fetch_json(env, &uri, query.as_deref()).await?;
        check_content_version(link, &template, &display_uri(&uri))?;
        shown.insert("uri".into(), Json::String(display_uri(&uri)));
        return Ok(Linked {
            template,
            origin: TemplateOrigin::Uri { uri, query },
            shown: Json::Object(shown),
        });
    }
    let relative = relative.unwrap_or_default();
    shown.insert("relativePath".into(), Json::String(relative.to_string()));
    match parent {
        TemplateOrigin::Inline => Err(ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!(
                "The templateLink relativePath '{relative}' can only be used in a template deployed from a link \
                 (a template spec or a URI)."
            ),
        )),
        TemplateOrigin::Uri { uri: base, query } => {
            let joined = base.join(&relative.replace('\\', "/")).map_err(|_| {
                ArmError::new(
                    400,
                    INVALID_CONTENT_LINK,
                    format!("The templateLink relativePath '{relative}' does not form a URI."),
                )
            })?;
            let (uri, own_query) = absolute_uri(joined.as_str(), None)?;
            // The parent's query (a SAS token for its container) goes with relative links that bring none.
            let query = join_query(own_query.as_deref(), link.query_string.as_deref())
                .or_else(|| query.clone());
            let template = fetch_json(env, &uri, query.as_deref()).await?;
            check_content_version(link, &template, &display_uri(&uri))?;
            shown.insert("uri".into(), Json::String(display_uri(&uri)));
            Ok(Linked {
                template,
                origin: TemplateOrigin::Uri { uri, query },
                shown: Json::Object(shown),
            })
        }
        TemplateOrigin::Spec { version_id, path } => {
            let directory = path
                .as_deref()
                .and_then(|p| p.rsplit_once('/').map(|(dir, _)| dir))
                .unwrap_or("");
            let joined = if directory.is_empty() {
                relative.replace('\\', "/")
            } else {
                format!("{directory}/{}", relative.replace('\\', "/"))
            };
            let outside = || {
                ArmError::new(
                    400,
                    INVALID_CONTENT_LINK,
                    format!(
                        "The templateLink relativePath '{relative}' points outside the template spec version '{version_id}'."
                    ),
                )
            };
            let resolved = normalize_path(&joined).ok_or_else(outside)?;
            let version = spec_version(env, access, version_id).await?;
            let template = version.linked(&resolved).cloned().ok_or_else(|| {
                ArmError::new(
                    400,
                    INVALID_CONTENT_LINK,
                    format!(
                        "The template spec version '{version_id}' has no linked template at '{resolved}' \
                         (relativePath '{relative}')."
                    ),
                )
            })?;
            check_content_version(link, &template, &resolved)?;
            shown.insert("id".into(), Json::String(version_id.clone()));
            Ok(Linked {
                template,
                origin: TemplateOrigin::Spec {
                    version_id: version_id.clone(),
                    path: Some(resolved),
                },
                shown: Json::Object(shown),
            })
        }
    }
}

/// The `parameters` of a parameters file behind `link`.
pub(crate) async fn resolve_parameters_link(
    env: &EngineEnv,
    link: &ParametersLink,
) -> Result<Map<String, Json>, ArmError> {
    let (uri, query) = absolute_uri(&link.uri, None)?;
    let file = fetch_json(env, &uri, query.as_deref()).await?;
    if let Some(wanted) = non_empty(&link.content_version)
        && let Some(found) = file.get("contentVersion").and_then(Json::as_str)
        && wanted != found
    {
        return Err(ArmError::new(
            400,
            "InvalidContentVersion",
            format!(
                "The content version '{found}' of the parameters file at '{}' does not match the link's contentVersion '{wanted}'.",
                display_uri(&uri)
            ),
        ));
    }
    match file.get("parameters") {
        Some(Json::Object(p)) => Ok(p.clone()),
        None => Ok(Map::new()),
        Some(_) => Err(ArmError::new(
            400,
            INVALID_CONTENT_LINK,
            format!(
                "The parameters file at '{}' has a 'parameters' member that is not an object.",
                display_uri(&uri)
            ),
        )),
    }
}

/// A deployment request with its links resolved: `template` holds the linked template and `parameters` the
/// linked parameters (the links stay, for the record), plus where the template came from.
pub(crate) async fn resolve_request(
    env: &EngineEnv,
    access: &Access,
    properties: &DeploymentProperties,
) -> Result<(DeploymentProperties, TemplateOrigin), ArmError> {
    if properties.template.is_some() && properties.template_link.is_some() {
        return Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The request gives both 'template' and 'templateLink': give one of them.",
        ));
    }
    if properties.parameters.is_some() && properties.parameters_link.is_some() {
        return Err(ArmError::new(
            400,
            "InvalidRequestContent",
            "The request gives both 'parameters' and 'parametersLink': give one of them.",
        ));
    }
    let mut resolved = properties.clone();
    crate::request::fold_provider_configs(&mut resolved)?;
    let mut origin = TemplateOrigin::Inline;
    if let Some(link) = &properties.template_link {
        if non_empty(&link.id).is_none() && non_empty(&link.uri).is_none() {
            return Err(ArmError::new(
                400,
                INVALID_CONTENT_LINK,
                "The templateLink of a deployment request gives 'id' (a template spec version) or 'uri'; \
                 'relativePath' is for nested deployments of a linked template.",
            ));
        }
        let linked = resolve_link(env, access, link, &TemplateOrigin::Inline).await?;
        resolved.template = Some(linked.template);
        origin = linked.origin;
    }
    if let Some(link) = &properties.parameters_link {
        let parameters = resolve_parameters_link(env, link).await?;
        resolved.parameters = Some(DeploymentParameters(parameters));
    }
    if let Ok(template) = crate::request::template_json(&resolved) {
        env.fetch_extension_types(&template).await;
    }
    Ok((resolved, origin))
}

/// Rewrites a stored request's links: URIs lose their query; a root request keeps the query (template link
/// `uri` query and `queryString` joined) sealed under `owner` as `templateLink.queryString`, so a resumed run can
/// download relative links again. `owner` `None` (nested records) drops the query.
pub(crate) async fn seal_links(
    store: &dyn Store,
    owner: Option<&SecretOwner>,
    properties: &mut Json,
) -> StoreResult<()> {
    if let Some(Json::Object(link)) = properties.get_mut("templateLink") {
        let uri = link.get("uri").and_then(Json::as_str).map(str::to_string);
        let query_string = link
            .get("queryString")
            .and_then(Json::as_str)
            .map(str::to_string);
        link.remove("queryString");
        if let Some(uri) = uri {
            let (shown, query) = match absolute_uri(&uri, query_string.as_deref()) {
                Ok((base, query)) => (base.to_string(), query),
                Err(_) => (display_text(&uri), None),
            };
            link.insert("uri".into(), Json::String(shown));
            if let (Some(owner), Some(query)) = (owner, query) {
                let marker = crate::secrets::seal_value(
                    store,
                    owner,
                    "templateLink/queryString",
                    &Json::String(query),
                )
                .await?;
                link.insert("queryString".into(), marker);
            }
        }
    }
    if let Some(Json::Object(link)) = properties.get_mut("parametersLink")
        && let Some(uri) = link.get("uri").and_then(Json::as_str).map(str::to_string)
    {
        let shown = match Url::parse(&uri) {
            Ok(parsed) => display_uri(&parsed),
            Err(_) => display_text(&uri),
        };
        link.insert("uri".into(), Json::String(shown));
    }
    Ok(())
}

fn member<'v>(object: &'v Map<String, Json>, key: &str) -> Option<&'v Json> {
    object
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

/// A linked nested deployment made ready to expand.
pub(crate) struct LinkedNested {
    pub nested: NestedTemplate,
    pub linked: Linked,
    /// Parameters read from the deployment's `parametersLink`, for its record.
    pub fetched_parameters: Option<Map<String, Json>>,
}

/// The child deployment of a nested `Microsoft.Resources/deployments` resource with a `templateLink` (its body
/// evaluated): the linked template, its parameters (a linked template always has its own scope), the extension
/// configs it is given, and its deployment facts, as the template expander builds them for inline templates.
pub(crate) async fn linked_nested(
    env: &EngineEnv,
    access: &Access,
    expansion: &Expansion<'_>,
    identity: &ResourceIdentity,
    body: &Value,
    parent_context: &DeploymentContext,
    parent_origin: &TemplateOrigin,
) -> Result<LinkedNested, ErrorDetail> {
    // The link's parts are read as JSON; the parameters from the value itself, whose runtime values (before the
    // deployment runs) stay unknown rather than become their expression text.
    let body_json = &body.to_json();
    let path = format!("{}.properties", identity.path);
    let empty = Map::new();
    let properties = match body_json.get("properties") {
        Some(Json::Object(p)) => p,
        _ => &empty,
    };
    let Some(link_json) = member(properties, "templateLink") else {
        return Err(ErrorDetail::new(
            "InvalidTemplate",
            "A nested deployment needs 'properties.template' (inline) or 'properties.templateLink'.",
        )
        .with_target(path));
    };
    let link: TemplateLink = serde_json::from_value(link_json.clone()).map_err(|_| {
        ErrorDetail::new(
            "InvalidTemplate",
            "The nested deployment's 'templateLink' is not an object of uri, id, relativePath, queryString and \
             contentVersion strings.",
        )
        .with_target(format!("{path}.templateLink"))
    })?;
    let linked = resolve_link(env, access, &link, parent_origin)
        .await
        .map_err(|e| e.into_detail().with_target(format!("{path}.templateLink")))?;
    let (template, diags) = Template::parse(Node::from_json(&linked.template));
    if diags.iter().any(|d| d.is_error()) {
        return Err(template_error(&diags).with_target(format!("{path}.templateLink")));
    }
    let body_properties = body
        .as_object()
        .and_then(|b| b.get("properties"))
        .and_then(Value::as_object);
    let inline_parameters = body_properties
        .and_then(|p| p.iter().find(|(k, _)| k.eq_ignore_ascii_case("parameters")))
        .map(|(_, v)| v.clone());
    let parameters_link = member(properties, "parametersLink");
    if inline_parameters.is_some() && parameters_link.is_some() {
        return Err(ErrorDetail::new(
            "InvalidTemplate",
            "A nested deployment gives 'parameters' or 'parametersLink', not both.",
        )
        .with_target(path));
    }
    let mut fetched_parameters = None;
    // Inline parameters the parent computed from a secure value stay secure in the child; a parameters file holds
    // no computed values (its secrets are Key Vault references).
    let secure_parameters = if parameters_link.is_none() {
        expansion.secure_parameters(identity.index)
    } else {
        Vec::new()
    };
    let parameter_values: Value = match parameters_link {
        Some(link) => {
            let link: ParametersLink = serde_json::from_value(link.clone()).map_err(|_| {
                ErrorDetail::new(
                    "InvalidTemplate",
                    "The nested deployment's 'parametersLink' needs a 'uri'.",
                )
                .with_target(format!("{path}.parametersLink"))
            })?;
            let fetched = resolve_parameters_link(env, &link).await.map_err(|e| {
                e.into_detail()
                    .with_target(format!("{path}.parametersLink"))
            })?;
            let value = Value::from_json(&Json::Object(fetched.clone()));
            fetched_parameters = Some(fetched);
            value
        }
        None => inline_parameters.unwrap_or(Value::Null),
    };
    if let Value::Unevaluated(u) = &parameter_values {
        return Err(ErrorDetail::new(
            "InvalidTemplate",
            format!(
                "The nested deployment's parameters depend on a value known only while the deployment runs ('{}').",
                u.expression
            ),
        )
        .with_target(format!("{path}.parameters")));
    }
    let parameters =
        cairn_template::params::deployment_parameters(&parameter_values).map_err(|e| {
            ErrorDetail::new("InvalidTemplate", e.to_string())
                .with_target(format!("{path}.parameters.{}", e.parameter()))
        })?;
    let mut extension_configs = Vec::new();
    if let Some(Value::Object(configs)) = body_properties
        .and_then(|p| {
            p.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("extensionConfigs"))
        })
        .map(|(_, v)| v)
    {
        let parents = expansion.extensions();
        let parent_lookup = |alias: &str| {
            parents
                .iter()
                .find(|e| e.alias.eq_ignore_ascii_case(alias))
                .map(|e| e.config.clone())
        };
        for (alias, value) in configs.iter() {
            match cairn_template::config::read_alias_input(value, &parent_lookup) {
                Ok(config) => extension_configs.push((alias.to_string(), config)),
                Err(e) => {
                    let d = cairn_template::config::config_diagnostic(
                        &e,
                        &format!("{path}.extensionConfigs.{alias}"),
                    );
                    return Err(ErrorDetail::new(d.code, d.message).with_target(d.target));
                }
            }
        }
    }
    let context = parent_context.for_nested(identity.name.clone().unwrap_or_default(), |k| {
        body_json.get(k).and_then(Json::as_str).map(str::to_string)
    });
    Ok(LinkedNested {
        nested: NestedTemplate {
            template,
            parameters,
            extension_configs,
            context,
            inner: true,
            path: format!("{path}.templateLink"),
            secure_parameters,
        },
        linked,
        fetched_parameters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_lose_query_and_credentials_in_messages() {
        let uri = Url::parse("https://user:pw@example.test/a/main.json?sig=SECRET#x").unwrap();
        assert_eq!(display_uri(&uri), "https://example.test/a/main.json");
        assert_eq!(
            display_text("https://u:p@h/x.json?sig=SECRET"),
            "https://h/x.json"
        );
        assert_eq!(display_text("not a uri?sig=S"), "not a uri");
    }

    #[test]
    fn query_strings_join() {
        let (uri, query) = absolute_uri("https://h/a/main.json?sv=1", Some("?sig=2")).unwrap();
        assert_eq!(uri.as_str(), "https://h/a/main.json");
        assert_eq!(query.as_deref(), Some("sv=1&sig=2"));
        assert_eq!(join_query(None, Some("")), None);
        assert!(absolute_uri("ftp://h/x.json", None).is_err());
        assert!(absolute_uri("relative/x.json", None).is_err());
    }

    #[test]
    fn origin_debug_hides_the_query() {
        let origin = TemplateOrigin::Uri {
            uri: Url::parse("https://h/x.json").unwrap(),
            query: Some("sig=SECRET".into()),
        };
        let shown = format!("{origin:?}");
        assert!(!shown.contains("SECRET"));
        assert!(shown.contains("REDACTED"));
    }
}
