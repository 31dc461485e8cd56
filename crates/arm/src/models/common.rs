//! Shapes shared by deployments, stacks and resource groups: lists, system data, template and parameter
//! links, debug settings, Key Vault references and the validation level.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::models::parameters::Redacted;
use crate::wire::extensible_enum;

/// Resource tags (`{name: value}`), in the order given.
pub type Tags = IndexMap<String, String>;

/// A page of a list: `{ value: [...], nextLink? }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResult<T> {
    /// The items on this page (a missing `value` reads as empty).
    #[serde(default = "Vec::new")]
    pub value: Vec<T>,
    /// The URL of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_link: Option<String>,
}

impl<T> ListResult<T> {
    /// A single, last page.
    pub fn new(value: Vec<T>) -> Self {
        Self {
            value,
            next_link: None,
        }
    }
}

impl<T> Default for ListResult<T> {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

/// `systemData` of a tracked or proxy resource (timestamps as ARM wrote them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by_type: Option<CreatedByType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified_by_type: Option<CreatedByType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified_at: Option<String>,
}

extensible_enum! {
    /// Who created or modified a resource.
    pub enum CreatedByType {
        User => "User",
        Application => "Application",
        ManagedIdentity => "ManagedIdentity",
        Key => "Key",
    }
}

/// `templateLink`: a template URI or a template spec version ID. `Debug` hides `queryString` (a SAS token).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateLink {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// A template spec version ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_path: Option<String>,
    /// A SAS token or similar: a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_version: Option<String>,
}

impl std::fmt::Debug for TemplateLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemplateLink")
            .field("uri", &self.uri.as_deref().map(without_query))
            .field("id", &self.id)
            .field("relative_path", &self.relative_path)
            .field(
                "query_string",
                &self.query_string.as_ref().map(|_| Redacted),
            )
            .field("content_version", &self.content_version)
            .finish()
    }
}

/// A URI for `Debug` output: its query (often a SAS token) replaced by `[REDACTED]`.
fn without_query(uri: &str) -> String {
    match uri.split_once('?') {
        Some((base, _)) => format!("{base}?[REDACTED]"),
        None => uri.to_owned(),
    }
}

/// `parametersLink`. `Debug` hides the URI's query.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParametersLink {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_version: Option<String>,
}

impl std::fmt::Debug for ParametersLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParametersLink")
            .field("uri", &without_query(&self.uri))
            .field("content_version", &self.content_version)
            .finish()
    }
}

/// `debugSetting`: `none`, `requestContent`, `responseContent` or `requestContent,responseContent`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DebugSetting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_level: Option<String>,
}

impl DebugSetting {
    /// Whether request content is to be recorded in operations.
    pub fn logs_request_content(&self) -> bool {
        self.has_level("requestContent")
    }

    /// Whether response content is to be recorded in operations.
    pub fn logs_response_content(&self) -> bool {
        self.has_level("responseContent")
    }

    fn has_level(&self, level: &str) -> bool {
        self.detail_level.as_deref().is_some_and(|d| {
            d.split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(level))
        })
    }
}

extensible_enum! {
    /// How far validation goes.
    pub enum ValidationLevel {
        /// Static analysis of the template only.
        Template => "Template",
        /// Also sends resources to providers for validation, checking RBAC write permission.
        Provider => "Provider",
        /// Like `Provider`, without the RBAC check.
        ProviderNoRbac => "ProviderNoRbac",
    }
}

/// `{ "id": "<key vault resource id>" }`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyVaultReference {
    pub id: String,
}

/// A Key Vault secret reference: used as a parameter's `reference` and an extension config item's
/// `keyVaultReference`. It names a secret; it is not one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyVaultParameterReference {
    pub key_vault: KeyVaultReference,
    pub secret_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_levels_are_comma_separated() {
        let both = DebugSetting {
            detail_level: Some("requestContent, ResponseContent".into()),
        };
        assert!(both.logs_request_content() && both.logs_response_content());
        let none = DebugSetting {
            detail_level: Some("none".into()),
        };
        assert!(!none.logs_request_content());
    }

    #[test]
    fn link_debug_hides_sas_tokens() {
        let link = TemplateLink {
            uri: Some("https://x/t.json?sig=abc".into()),
            query_string: Some("sig=def".into()),
            ..TemplateLink::default()
        };
        let params = ParametersLink {
            uri: "https://x/p.json?sig=ghi".into(),
            content_version: None,
        };
        let debug = format!("{link:?} {params:?}");
        assert!(
            !debug.contains("abc") && !debug.contains("def") && !debug.contains("ghi"),
            "{debug}"
        );
        assert!(debug.contains("https://x/t.json?[REDACTED]"), "{debug}");
    }

    #[test]
    fn list_without_value_reads_as_empty() {
        let list: ListResult<u8> = serde_json::from_str("{}").unwrap();
        assert_eq!(list, ListResult::default());
        assert_eq!(serde_json::to_string(&list).unwrap(), r#"{"value":[]}"#);
    }
}
