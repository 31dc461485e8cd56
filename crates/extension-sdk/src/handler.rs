//! The typed handler trait an extension author implements per resource type, and its type-erased form.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cairn_extension_contract::v2::{Error, LongRunningOperation, ResourcePreviewMetadata};
use cairn_extension_contract::{JsonPointer, OperationStatus};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::ExtensionConfig;
use crate::error::{ExtensionError, codes, escape_pointer_token};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Facts about the incoming request, for logging and correlation. Never holds secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The `{extensionVersion}` of the route.
    pub extension_version: String,
    /// `x-ms-client-request-id`.
    pub client_request_id: Option<String>,
    /// `x-ms-correlation-request-id`.
    pub correlation_id: Option<String>,
    /// `Accept-Language`.
    pub accept_language: Option<String>,
}

/// Input of `createOrUpdate`: the typed desired properties.
#[derive(Debug)]
pub struct Apply<C, P> {
    /// Desired properties.
    pub properties: P,
    /// The parsed extension config.
    pub config: Arc<C>,
    /// The resource type as sent (handlers match case-insensitively).
    pub resource_type: String,
    /// The resource's API version, if sent.
    pub api_version: Option<String>,
    /// Request facts.
    pub info: RequestInfo,
}

/// Input of `get` and `delete`: the typed identifiers.
#[derive(Debug)]
pub struct Lookup<C, I> {
    /// Identifiers as returned by an earlier response.
    pub identifiers: I,
    /// The parsed extension config.
    pub config: Arc<C>,
    /// The resource type as sent.
    pub resource_type: String,
    /// The resource's API version, if sent.
    pub api_version: Option<String>,
    /// Request facts.
    pub info: RequestInfo,
}

/// Input of `preview`: raw properties, because unevaluated expressions arrive as strings wherever they
/// occur and may not fit the typed schema.
#[derive(Debug)]
pub struct PreviewInput<C> {
    /// Properties, possibly holding unevaluated expressions (raw strings).
    pub properties: Value,
    /// JSON pointers (into `/properties` or `/config`) of the unevaluated values.
    pub unevaluated: Vec<JsonPointer>,
    /// The parsed config, or `None` when part of it is unevaluated.
    pub config: Option<Arc<C>>,
    /// The resource type as sent.
    pub resource_type: String,
    /// The resource's API version, if sent.
    pub api_version: Option<String>,
    /// Request facts.
    pub info: RequestInfo,
}

impl<C> PreviewInput<C> {
    /// Whether the value at `pointer` (or anything beneath it) is an unevaluated expression.
    pub fn is_unevaluated(&self, pointer: &str) -> bool {
        self.unevaluated.iter().any(|u| {
            u == pointer
                || u.strip_prefix(pointer)
                    .is_some_and(|rest| rest.starts_with('/'))
                || pointer
                    .strip_prefix(u.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Whether any property is unevaluated.
    pub fn has_unevaluated_properties(&self) -> bool {
        self.is_unevaluated("/properties")
    }

    /// The properties parsed into the handler's type; only meaningful when nothing is unevaluated.
    pub fn typed_properties<P: DeserializeOwned>(&self) -> Result<P, ExtensionError> {
        from_json(
            self.properties.clone(),
            "/properties",
            codes::INVALID_PROPERTIES,
        )
    }
}

/// The state of a resource as a handler reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceState<I, P> {
    /// What identifies the resource (with the type and config).
    pub identifiers: I,
    /// The resource's properties.
    pub properties: P,
    /// RELO progress: a non-terminal status (e.g. `Running`) means later gets will report progress.
    pub status: Option<OperationStatus>,
    /// Only with status `Failed`.
    pub error: Option<Error>,
}

impl<I, P> ResourceState<I, P> {
    /// A finished resource.
    pub fn new(identifiers: I, properties: P) -> Self {
        Self {
            identifiers,
            properties,
            status: None,
            error: None,
        }
    }

    /// Sets a status, e.g. `OperationStatus::running()` for RELO.
    pub fn with_status(mut self, status: OperationStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Marks it `Failed` with an error (RELO failure).
    pub fn failed(mut self, error: Error) -> Self {
        self.status = Some(OperationStatus::failed());
        self.error = Some(error);
        self
    }
}

/// Outcome of `createOrUpdate`.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied<I, P> {
    /// 200 with the resource (done, or RELO with a non-terminal status).
    Resource(ResourceState<I, P>),
    /// 202 with a stepwise long-running operation (see [`crate::OperationTracker`]).
    Accepted(LongRunningOperation),
}

/// Outcome of `delete`.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted<I, P> {
    /// 204: deleted now, or it did not exist.
    Gone,
    /// 200 with the resource in a non-terminal status (RELO); gets answer 404 once it is gone.
    Deleting(ResourceState<I, P>),
    /// 202 with a stepwise long-running operation.
    Accepted(LongRunningOperation),
}

/// What `preview` predicts.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewOutput {
    /// The identifiers, or `None` when they cannot be computed yet (the SDK lists `/identifiers` as unknown).
    pub identifiers: Option<Value>,
    /// The properties as they would be after `createOrUpdate`; unevaluated values echoed unchanged.
    pub properties: Value,
    /// Path categories (`readOnly`, `immutable`, `calculated`, ...). The SDK adds every unevaluated path
    /// not already listed in a specific category under `unevaluated`.
    pub metadata: ResourcePreviewMetadata,
}

/// What [`ResourceHandler::get`] returns: the state, or `None` when the resource does not exist.
pub type GetResult<H, C> = Result<
    Option<
        ResourceState<
            <H as ResourceHandler<C>>::Identifiers,
            <H as ResourceHandler<C>>::Properties,
        >,
    >,
    ExtensionError,
>;

/// A resource type's operations, with typed properties and identifiers.
///
/// Implement it with `async fn`s; register it on an [`crate::Extension`]. The SDK handles routing,
/// versions, JSON (de)serialisation, config echo, `configId`, errors and headers.
pub trait ResourceHandler<C: ExtensionConfig>: Send + Sync + 'static {
    /// The desired-state body.
    type Properties: Serialize + DeserializeOwned + Send + 'static;
    /// What identifies a resource (with the type and config).
    type Identifiers: Serialize + DeserializeOwned + Send + 'static;

    /// The resource type this handler serves (matched case-insensitively).
    fn resource_type(&self) -> &str;

    /// Predicts the state after `createOrUpdate`. Default: `PreviewNotSupported`.
    fn preview(
        &self,
        input: PreviewInput<C>,
    ) -> impl Future<Output = Result<PreviewOutput, ExtensionError>> + Send {
        let resource_type = input.resource_type;
        async move {
            Err(ExtensionError::preview_not_supported(format!(
                "The resource type '{resource_type}' does not support preview."
            )))
        }
    }

    /// Creates or updates the resource; must be idempotent.
    fn create_or_update(
        &self,
        request: Apply<C, Self::Properties>,
    ) -> impl Future<Output = Result<Applied<Self::Identifiers, Self::Properties>, ExtensionError>> + Send;

    /// The current state, or `None` when the resource does not exist (→ 404 `ResourceNotFound`).
    fn get(
        &self,
        request: Lookup<C, Self::Identifiers>,
    ) -> impl Future<Output = GetResult<Self, C>> + Send;

    /// Deletes the resource; deleting a missing resource is [`Deleted::Gone`] (204), not an error.
    fn delete(
        &self,
        request: Lookup<C, Self::Identifiers>,
    ) -> impl Future<Output = Result<Deleted<Self::Identifiers, Self::Properties>, ExtensionError>> + Send;
}

/// A resource state with raw JSON identifiers and properties.
pub(crate) type RawState = ResourceState<Value, Value>;

/// The object-safe form of [`ResourceHandler`] the router dispatches to.
pub(crate) trait DynHandler<C>: Send + Sync {
    fn preview(
        self: Arc<Self>,
        input: PreviewInput<C>,
    ) -> BoxFuture<Result<PreviewOutput, ExtensionError>>;
    fn create_or_update(
        self: Arc<Self>,
        request: Apply<C, Value>,
    ) -> BoxFuture<Result<Applied<Value, Value>, ExtensionError>>;
    fn get(
        self: Arc<Self>,
        request: Lookup<C, Value>,
    ) -> BoxFuture<Result<Option<RawState>, ExtensionError>>;
    fn delete(
        self: Arc<Self>,
        request: Lookup<C, Value>,
    ) -> BoxFuture<Result<Deleted<Value, Value>, ExtensionError>>;
}

/// Adapts a typed handler to [`DynHandler`].
pub(crate) struct Typed<H>(pub(crate) H);

impl<C: ExtensionConfig, H: ResourceHandler<C>> DynHandler<C> for Typed<H> {
    fn preview(
        self: Arc<Self>,
        input: PreviewInput<C>,
    ) -> BoxFuture<Result<PreviewOutput, ExtensionError>> {
        Box::pin(async move { self.0.preview(input).await })
    }

    fn create_or_update(
        self: Arc<Self>,
        request: Apply<C, Value>,
    ) -> BoxFuture<Result<Applied<Value, Value>, ExtensionError>> {
        Box::pin(async move {
            let properties =
                from_json(request.properties, "/properties", codes::INVALID_PROPERTIES)?;
            let typed = Apply {
                properties,
                config: request.config,
                resource_type: request.resource_type,
                api_version: request.api_version,
                info: request.info,
            };
            match self.0.create_or_update(typed).await? {
                Applied::Resource(state) => Ok(Applied::Resource(raw_state(state)?)),
                Applied::Accepted(operation) => Ok(Applied::Accepted(operation)),
            }
        })
    }

    fn get(
        self: Arc<Self>,
        request: Lookup<C, Value>,
    ) -> BoxFuture<Result<Option<RawState>, ExtensionError>> {
        Box::pin(async move {
            let typed = typed_lookup(request)?;
            match self.0.get(typed).await? {
                Some(state) => Ok(Some(raw_state(state)?)),
                None => Ok(None),
            }
        })
    }

    fn delete(
        self: Arc<Self>,
        request: Lookup<C, Value>,
    ) -> BoxFuture<Result<Deleted<Value, Value>, ExtensionError>> {
        Box::pin(async move {
            let typed = typed_lookup(request)?;
            match self.0.delete(typed).await? {
                Deleted::Gone => Ok(Deleted::Gone),
                Deleted::Deleting(state) => Ok(Deleted::Deleting(raw_state(state)?)),
                Deleted::Accepted(operation) => Ok(Deleted::Accepted(operation)),
            }
        })
    }
}

fn typed_lookup<C, I: DeserializeOwned>(
    request: Lookup<C, Value>,
) -> Result<Lookup<C, I>, ExtensionError> {
    Ok(Lookup {
        identifiers: from_json(
            request.identifiers,
            "/identifiers",
            codes::INVALID_IDENTIFIERS,
        )?,
        config: request.config,
        resource_type: request.resource_type,
        api_version: request.api_version,
        info: request.info,
    })
}

fn raw_state<I: Serialize, P: Serialize>(
    state: ResourceState<I, P>,
) -> Result<RawState, ExtensionError> {
    Ok(ResourceState {
        identifiers: to_json(&state.identifiers)?,
        properties: to_json(&state.properties)?,
        status: state.status,
        error: state.error,
    })
}

/// Serialises a handler's output; failure is a bug in the handler, reported without details.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<Value, ExtensionError> {
    serde_json::to_value(value).map_err(|_| {
        ExtensionError::internal("The extension produced a value it could not serialise.")
    })
}

/// Deserialises input, naming the offending JSON pointer (under `base`) in the error's target.
pub fn from_json<T: DeserializeOwned>(
    value: Value,
    base: &str,
    code: &str,
) -> Result<T, ExtensionError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let mut target = base.to_owned();
        for segment in err.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => {
                    target.push('/');
                    target.push_str(&index.to_string());
                }
                serde_path_to_error::Segment::Map { key }
                | serde_path_to_error::Segment::Enum { variant: key } => {
                    target.push('/');
                    target.push_str(&escape_pointer_token(key));
                }
                serde_path_to_error::Segment::Unknown => {}
            }
        }
        let message = redact_serde_message(&err.inner().to_string());
        // serde reports a missing field at its parent; point at the field itself.
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            target.push('/');
            target.push_str(&escape_pointer_token(field));
        }
        ExtensionError::invalid(code, target, format!("Invalid {}: {message}.", &base[1..]))
    })
}

/// serde quotes offending values (`invalid type: string "hunter2", expected u32`); properties can hold
/// write-only secrets, so keep only the kind of value.
fn redact_serde_message(message: &str) -> String {
    let message = message.split(" at line ").next().unwrap_or_default();
    let expected = message.find(", expected").map_or("", |at| &message[at..]);
    if message.starts_with("unknown variant ") {
        return format!("unknown variant{expected}");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = rest.split([' ', ',']).next().unwrap_or_default();
            return format!("{prefix}{kind}{expected}");
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // fields exist to be deserialised
    struct Props {
        path: String,
        items: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Item {
        size: u32,
    }

    fn target_of(value: Value) -> String {
        let err = from_json::<Props>(value, "/properties", codes::INVALID_PROPERTIES).unwrap_err();
        assert_eq!(err.code(), codes::INVALID_PROPERTIES);
        err.error().target.clone().unwrap()
    }

    #[test]
    fn deserialisation_errors_point_at_the_value() {
        assert_eq!(target_of(json!({ "items": [] })), "/properties/path");
        assert_eq!(
            target_of(json!({ "path": 1, "items": [] })),
            "/properties/path"
        );
        assert_eq!(
            target_of(json!({ "path": "p", "items": [{ "size": "x" }] })),
            "/properties/items/0/size"
        );
        assert_eq!(
            target_of(json!({ "path": "p", "items": [{}] })),
            "/properties/items/0/size"
        );
        assert_eq!(target_of(json!([])), "/properties");
    }

    #[test]
    fn error_messages_never_quote_values() {
        let err = from_json::<Props>(
            json!({ "path": "p", "items": [{ "size": "hunter2" }] }),
            "/properties",
            "X",
        )
        .unwrap_err();
        let message = &err.error().message;
        assert!(!message.contains("hunter2"), "{message}");
        assert!(
            message.contains("invalid type: string, expected u32"),
            "{message}"
        );
        assert_eq!(
            redact_serde_message("unknown variant `s3cr3t`, expected one of `a`"),
            "unknown variant, expected one of `a`"
        );
        assert_eq!(
            redact_serde_message("missing field `path`"),
            "missing field `path`"
        );
        assert_eq!(
            redact_serde_message("invalid value: integer `5`, expected a port"),
            "invalid value: integer, expected a port"
        );
    }

    #[test]
    fn unevaluated_paths_match_ancestors_and_descendants() {
        let input = PreviewInput::<()> {
            properties: json!({}),
            unevaluated: vec!["/properties/a/b".into(), "/config/token".into()],
            config: None,
            resource_type: "T".into(),
            api_version: None,
            info: RequestInfo::default(),
        };
        assert!(input.is_unevaluated("/properties/a/b"));
        assert!(input.is_unevaluated("/properties/a"));
        assert!(input.is_unevaluated("/properties/a/b/c"));
        assert!(!input.is_unevaluated("/properties/ab"));
        assert!(input.has_unevaluated_properties());
    }
}
