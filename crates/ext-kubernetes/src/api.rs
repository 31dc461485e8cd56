//! The few API server calls the extension makes on objects, as JSON: server-side apply (optionally dry
//! run), get, delete with a propagation policy, and the waits around them (gone, CRD `Established`).
//!
//! Requests go through [`call`], not the client's `request`: that one logs every failure `Status` at
//! debug level, and the API server's messages can quote a manifest's values (a Secret's among them,
//! when a template puts one where it is validated), so here they reach nothing but the
//! [`crate::error::Redactor`].

use std::time::{Duration, Instant};

use kube::core::params::{
    DeleteParams, GetParams, Patch, PatchParams, Preconditions, ValidationDirective,
};
use kube::core::{Request, Status};
use serde_json::Value;

use crate::cluster::Cluster;
use crate::discovery::ApiKind;
use crate::error::KubeError;
use crate::manifest::Propagation;

/// The first pause of a wait; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause of a wait.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// An object of `kind` named `name` (in `namespace` for namespaced kinds), for messages and calls.
#[derive(Debug, Clone)]
pub struct ObjectRef<'a> {
    /// The served kind.
    pub kind: &'a ApiKind,
    /// The namespace (`None` for cluster-wide kinds).
    pub namespace: Option<&'a str>,
    /// The name.
    pub name: &'a str,
}

impl ObjectRef<'_> {
    /// `ConfigMap apps/settings` or `Namespace apps`.
    pub fn describe(&self) -> String {
        match self.namespace {
            Some(namespace) => format!("{} {namespace}/{}", self.kind.name.kind, self.name),
            None => format!("{} {}", self.kind.name.kind, self.name),
        }
    }

    fn request(&self) -> Request {
        Request::new(self.kind.collection_url(self.namespace))
    }
}

/// How a write is sent.
#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    /// The field manager.
    pub field_manager: &'a str,
    /// Take over conflicting fields.
    pub force: bool,
    /// `dryRun=All`: admission and validation run, nothing is stored.
    pub dry_run: bool,
}

/// Sends `request`; the answer as JSON, or the failure `Status` as [`kube::Error::Api`].
pub async fn call(
    cluster: &Cluster,
    request: http::Request<Vec<u8>>,
) -> Result<Value, kube::Error> {
    let response = cluster
        .client()
        .send(request.map(kube::client::Body::from))
        .await?;
    let status = response.status();
    let bytes = response.into_body().collect_bytes().await?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError);
    }
    let failure = serde_json::from_slice::<Status>(&bytes)
        .ok()
        .filter(|failure| failure.code != 0)
        .unwrap_or_else(|| {
            // Not every failure is a Status (a proxy's page, a bare 404 of a path not served yet).
            Status::failure(
                status.canonical_reason().unwrap_or("request failed"),
                status.canonical_reason().unwrap_or_default(),
            )
            .with_code(status.as_u16())
        });
    Err(kube::Error::Api(failure.boxed()))
}

fn build_failed(action: String) -> impl FnOnce(kube::core::request::Error) -> KubeError {
    move |_| KubeError::Client {
        action,
        detail: "the request could not be built".into(),
    }
}

/// Server-side apply of `body`; the object as the API server stored (or would store) it.
pub async fn apply(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    body: &Value,
    options: ApplyOptions<'_>,
) -> Result<Value, KubeError> {
    let action = if options.dry_run {
        format!("preview {} (server-side dry run)", object.describe())
    } else {
        format!("apply {}", object.describe())
    };
    let params = PatchParams {
        dry_run: options.dry_run,
        force: options.force,
        field_manager: Some(options.field_manager.to_owned()),
        // Unknown and duplicate fields fail the request instead of being dropped silently.
        field_validation: Some(ValidationDirective::Strict),
    };
    let request = object
        .request()
        .patch(object.name, &params, &Patch::Apply(body))
        .map_err(build_failed(action.clone()))?;
    call(cluster, request)
        .await
        .map_err(|err| KubeError::from_client(err, action))
}

/// After an apply of `live` by `field_manager`: moves the fields that apply holds out of `kubectl apply`'s
/// client-side entries ([`crate::ownership`]), so that they are cairn's alone; the object as it is then.
/// Best effort: when the object changed in between (or the patch fails otherwise), `live` as it was, and
/// the next apply tries again.
pub async fn take_over_client_side_apply(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    live: Value,
    field_manager: &str,
) -> Value {
    let (Some(entries), Some(resource_version)) = (
        crate::ownership::taken_over(&live, field_manager),
        live.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str),
    ) else {
        return live;
    };
    let params = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    let body = crate::ownership::patch(entries, resource_version);
    let Ok(request) = object
        .request()
        .patch(object.name, &params, &Patch::Merge(&body))
    else {
        return live;
    };
    match call(cluster, request).await {
        Ok(patched) => patched,
        Err(err) => {
            // The status code only: a message could quote the object.
            let code = match &err {
                kube::Error::Api(status) => status.code,
                _ => 0,
            };
            tracing::debug!(
                object = %object.describe(),
                code,
                "could not take over kubectl's client-side apply fields; the next apply tries again"
            );
            live
        }
    }
}

/// The object, or `None` when it does not exist.
pub async fn get(cluster: &Cluster, object: &ObjectRef<'_>) -> Result<Option<Value>, KubeError> {
    let action = format!("read {}", object.describe());
    let request = object
        .request()
        .get(object.name, &GetParams::default())
        .map_err(build_failed(action.clone()))?;
    match call(cluster, request).await {
        Ok(found) => Ok(Some(found)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(KubeError::from_client(err, action)),
    }
}

/// Deletes the object whose UID is `uid` with `policy`: `None` when it is gone already (or was deleted
/// at once), else the object as it is while finalizers run.
pub async fn delete(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    uid: Option<&str>,
    policy: Propagation,
) -> Result<Option<Value>, KubeError> {
    let action = format!("delete {}", object.describe());
    let params = DeleteParams {
        propagation_policy: Some(policy.to_kube()),
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let request = object
        .request()
        .delete(object.name, &params)
        .map_err(build_failed(action.clone()))?;
    match call(cluster, request).await {
        Ok(answer) if answer.get("kind").and_then(Value::as_str) == Some("Status") => Ok(None),
        Ok(answer) => Ok(Some(answer)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(KubeError::from_client(err, action)),
    }
}

/// The object's UID.
pub fn uid(object: &Value) -> Option<&str> {
    object.pointer("/metadata/uid").and_then(Value::as_str)
}

/// Whether the object is being deleted (finalizers still running).
pub fn is_terminating(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|at| !at.is_null())
}

/// Sleeps the current backoff (never past `deadline`) and doubles it; `false` when the deadline has
/// passed already.
pub async fn pause(backoff: &mut Duration, deadline: Instant) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    tokio::time::sleep((*backoff).min(deadline - now)).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    true
}

/// Waits until the object with `uid` is gone (another object of the same name counts as gone): `true`
/// when it went before `deadline`.
pub async fn wait_gone(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    uid: Option<&str>,
    deadline: Instant,
) -> Result<bool, KubeError> {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match get(cluster, object).await? {
            None => return Ok(true),
            Some(found) if uid.is_some() && self::uid(&found) != uid => return Ok(true),
            Some(_) => {}
        }
        if !pause(&mut backoff, deadline).await {
            return Ok(false);
        }
    }
}

/// How a CRD's wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Establishment {
    /// `Established` is `True`.
    Established,
    /// `NamesAccepted` is `False`: it never will be (the message says why).
    NamesRejected(String),
    /// Not yet at the deadline; the conditions as last read.
    Pending(String),
}

/// Waits until the CRD `object` is `Established`.
pub async fn wait_established(
    cluster: &Cluster,
    object: &ObjectRef<'_>,
    deadline: Instant,
) -> Result<Establishment, KubeError> {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let found = get(cluster, object).await?;
        let conditions = found
            .as_ref()
            .and_then(|crd| crd.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let condition = |kind: &str| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        };
        let is = |c: Option<&Value>, status: &str| {
            c.and_then(|c| c.get("status")).and_then(Value::as_str) == Some(status)
        };
        if is(condition("Established"), "True") {
            return Ok(Establishment::Established);
        }
        if let Some(rejected) = condition("NamesAccepted").filter(|c| is(Some(c), "False")) {
            let message = rejected
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("names not accepted");
            return Ok(Establishment::NamesRejected(message.to_owned()));
        }
        if !pause(&mut backoff, deadline).await {
            let summary: Vec<String> = conditions
                .iter()
                .map(|c| {
                    format!(
                        "{}={} ({})",
                        c.get("type").and_then(Value::as_str).unwrap_or("?"),
                        c.get("status").and_then(Value::as_str).unwrap_or("?"),
                        c.get("message").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .collect();
            return Ok(Establishment::Pending(if summary.is_empty() {
                "no conditions yet".into()
            } else {
                summary.join("; ")
            }));
        }
    }
}

/// Whether a CRD defining `group`/`kind` at `version` exists (served or on its way): a kind discovery
/// does not know yet is then worth waiting for. `None` when the CRDs cannot be listed.
pub async fn crd_defines(
    cluster: &Cluster,
    group: &str,
    version: &str,
    kind: &str,
) -> Option<bool> {
    let request = Request::new("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .list(&Default::default())
        .ok()?;
    let list = call(cluster, request).await.ok()?;
    let items = list.get("items").and_then(Value::as_array)?;
    Some(items.iter().any(|crd| {
        crd.pointer("/spec/group").and_then(Value::as_str) == Some(group)
            && crd
                .pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .is_some_and(|defined| defined.eq_ignore_ascii_case(kind))
            && crd
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .is_some_and(|versions| {
                    versions.iter().any(|v| {
                        v.get("name").and_then(Value::as_str) == Some(version)
                            && v.get("served").and_then(Value::as_bool) != Some(false)
                    })
                })
    }))
}
