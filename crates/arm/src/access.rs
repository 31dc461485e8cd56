//! What a caller may address: every scope, or a list of resource-id prefixes (a scoped token's scopes).
//!
//! The server builds one [`Access`] per request from the token; the engine keeps it with a deployment (and a stack
//! with its operations) so that everything a request reaches later, not only its URL, is checked against it:
//! nested deployments' target scopes, `reference()`/`list*()` reads, Key Vault references, template specs, bulk
//! deletes and the directives a stack runs again when it deletes.

use serde::{Deserialize, Serialize};

use crate::ArmError;

/// A caller's reach. The default reaches everything (the in-process CLI, a server without tokens, an unscoped
/// token).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// Who the caller is, as 403 messages name it (`token-3`: the tokens file's line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The resource-id prefixes the caller may address; `None` is everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

/// What a caller does to a scope, as ARM names the action in `AuthorizationFailed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Read,
    Write,
    Delete,
    /// A POST action such as `listKeys`.
    Invoke,
}

impl Action {
    /// The verb ARM's `AuthorizationFailed` names.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Delete => "delete",
            Action::Invoke => "action",
        }
    }
}

/// The lower-cased, non-empty path segments of a resource id or scope.
fn segments(path: &str) -> impl Iterator<Item = &str> + Clone {
    path.split('/').filter(|s| !s.is_empty())
}

impl Access {
    /// Reaches everything.
    pub fn everything() -> Self {
        Access::default()
    }

    /// Reaches what lies under one of `scopes` (a scope of `/` reaches everything).
    pub fn scoped(client: impl Into<String>, scopes: Vec<String>) -> Self {
        let everything = scopes.iter().any(|s| segments(s).next().is_none());
        Access {
            client: Some(client.into()),
            scopes: (!everything).then_some(scopes),
        }
    }

    /// Whether this reaches every scope.
    pub fn is_unrestricted(&self) -> bool {
        self.scopes.is_none()
    }

    /// Whether `id` (a resource id, a scope, or any ARM path) lies under one of the scopes, compared segment by
    /// segment without regard to case, as ARM compares ids. A path with `..` or `.` segments is never reached by a
    /// scoped caller: ids have none, and a prefix check must not be fooled by one.
    pub fn allows(&self, id: &str) -> bool {
        if self.scopes.is_some() && segments(id).any(|s| s == ".." || s == ".") {
            return false;
        }
        self.covers(id)
    }

    /// Whether `path` starts with one of the scopes, segment by segment: the check of a request's URL, which the
    /// router then parses (refusing `..` as an invalid id, 400) once this check has passed.
    pub fn covers(&self, path: &str) -> bool {
        let Some(scopes) = &self.scopes else {
            return true;
        };
        scopes.iter().any(|scope| {
            let mut requested = segments(path);
            segments(scope).all(|want| {
                requested
                    .next()
                    .is_some_and(|have| have.eq_ignore_ascii_case(want))
            })
        })
    }

    /// `Ok` when `id` is reachable, else 403 `AuthorizationFailed` naming the client, the action and `id`.
    pub fn check(&self, action: Action, id: &str) -> Result<(), ArmError> {
        if self.allows(id) {
            return Ok(());
        }
        let client = self.client.as_deref().unwrap_or("caller");
        Err(ArmError::authorization_failed(
            client,
            client,
            action.verb(),
            id,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASES: &[(&[&str], &str, bool)] = &[
        (&["/subscriptions/1111"], "/subscriptions/1111", true),
        (
            &["/subscriptions/1111"],
            "/subscriptions/1111/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/kv",
            true,
        ),
        (
            &["/subscriptions/1111"],
            "/SUBSCRIPTIONS/1111/resourcegroups/x",
            true,
        ),
        (&["/subscriptions/1111"], "/subscriptions/11112", false),
        (
            &["/subscriptions/1111"],
            "/subscriptions/2222/resourceGroups/rg",
            false,
        ),
        (&["/subscriptions/1111"], "/subscriptions", false),
        (&["/subscriptions/1111"], "/", false),
        (
            &["/subscriptions/1111"],
            "/subscriptions/1111/../2222/resourceGroups/rg",
            false,
        ),
        (
            &["/subscriptions/1/resourceGroups/rgA"],
            "/subscriptions/1/resourceGroups/rgB",
            false,
        ),
        (
            &["/subscriptions/1/resourceGroups/rgA", "/subscriptions/2"],
            "/subscriptions/2/resourceGroups/rgB",
            true,
        ),
        (&["/"], "/subscriptions/2", true),
    ];

    #[test]
    fn scopes_are_prefixes_by_segment() {
        for (scopes, id, expected) in CASES {
            let access =
                Access::scoped("token-1", scopes.iter().map(|s| (*s).to_string()).collect());
            assert_eq!(access.allows(id), *expected, "{scopes:?} over {id}");
        }
    }

    #[test]
    fn everything_allows_anything_and_refusals_name_the_scope() {
        assert!(Access::everything().allows("/subscriptions/2"));
        let access = Access::scoped("token-4", vec!["/subscriptions/1".into()]);
        let error = access
            .check(Action::Write, "/subscriptions/2/resourceGroups/rg")
            .unwrap_err();
        assert_eq!(error.status(), 403);
        assert_eq!(error.code(), "AuthorizationFailed");
        assert!(
            error
                .detail()
                .message()
                .contains("'/subscriptions/2/resourceGroups/rg'")
        );
        assert!(error.detail().message().contains("'write'"));
        assert!(error.detail().message().contains("token-4"));
    }
}
