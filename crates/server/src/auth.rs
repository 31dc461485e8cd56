//! Bearer-token authentication: the tokens file, constant-time token checks and the axum middleware that
//! answers 401/403 in ARM's error shape.
//!
//! Tokens file: one token per line, optionally followed by the scopes it may address (resource-id
//! prefixes such as `/subscriptions/0000-1111`); `#` starts a comment line, blank lines are ignored. A
//! token without scopes may address everything. Tokens are kept only as SHA-256 digests, compared in
//! constant time, and never appear in `Debug` output, logs or error messages.
//!
//! Answers (as ARM gives them):
//! - no `Authorization` header, or one that is not `Bearer <token>`: 401 `AuthenticationFailed`;
//! - a well-formed token the server does not know: 401 `InvalidAuthenticationToken`;
//! - a known token used outside its scopes: 403 `AuthorizationFailed`.
//!
//! 401s carry `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use cairn_arm::ArmError;
use cairn_arm::access::{Access, Action};
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::response::error_response;

/// The path of the unauthenticated health endpoint.
pub const HEALTH_PATH: &str = "/healthz";

/// Why a tokens file cannot be used. Messages name the line, never the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("read the tokens file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("read the tokens file: it holds no token")]
    Empty,
    #[error(
        "read the tokens file: line {line}: a token must be printable ASCII without spaces (RFC 6750)"
    )]
    InvalidToken { line: usize },
    #[error(
        "read the tokens file: line {line}: scope '{scope}' must be a resource id starting with '/'"
    )]
    InvalidScope { line: usize, scope: String },
}

/// One accepted token: its digest and the resource-id prefixes it may address (empty: everything).
struct TokenEntry {
    digest: [u8; 32],
    /// The scopes as the file gives them.
    scopes: Vec<String>,
    /// The line it came from, used to name the client in 403 messages.
    line: usize,
}

/// The accepted bearer tokens.
pub struct TokenSet {
    entries: Vec<TokenEntry>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("tokens", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// Who a request authenticated as, and what it may reach: handlers pass [`Caller::access`] on to the engine and the
/// stack service, which check every scope the request touches beyond its URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// `token-{line}`: the tokens-file line of the token used.
    pub client: String,
    pub access: Access,
}

impl Caller {
    /// The reach of the request that carries `extensions`: everything when the server has no tokens.
    pub fn access_of(extensions: &axum::http::Extensions) -> Access {
        extensions
            .get::<Caller>()
            .map(|caller| caller.access.clone())
            .unwrap_or_default()
    }
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_graphic()
}

impl TokenSet {
    /// Reads a tokens file (see the module docs).
    pub fn load(path: &Path) -> Result<Self, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses the text of a tokens file.
    pub fn parse(text: &str) -> Result<Self, TokenFileError> {
        let mut entries = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let mut fields = trimmed.split_whitespace();
            let Some(token) = fields.next() else {
                continue;
            };
            if !token.chars().all(is_token_char) {
                return Err(TokenFileError::InvalidToken { line });
            }
            let mut scopes = Vec::new();
            for scope in fields {
                if !scope.starts_with('/') {
                    return Err(TokenFileError::InvalidScope {
                        line,
                        scope: scope.to_owned(),
                    });
                }
                scopes.push(scope.to_owned());
            }
            entries.push(TokenEntry {
                digest: digest(token.as_bytes()),
                scopes,
                line,
            });
        }
        if entries.is_empty() {
            return Err(TokenFileError::Empty);
        }
        Ok(Self { entries })
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no token is accepted (never true for a parsed file).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks an `Authorization` header value for a request of `method` on `path`.
    pub fn authenticate(
        &self,
        authorization: Option<&HeaderValue>,
        method: &Method,
        path: &str,
    ) -> Result<Caller, ArmError> {
        let header = authorization.ok_or_else(ArmError::authentication_header_missing)?;
        let token = bearer_token(header).ok_or_else(ArmError::authentication_header_invalid)?;
        let presented = digest(token);
        // Look at every entry, whatever matches, so timing does not tell which token is close.
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (i, entry) in self.entries.iter().enumerate() {
            let matches = entry.digest.ct_eq(&presented);
            index.conditional_assign(&(i as u64), matches);
            found |= matches;
        }
        if !bool::from(found) {
            return Err(ArmError::invalid_authentication_token(
                "the token is not accepted by this server",
            ));
        }
        let entry = usize::try_from(index)
            .ok()
            .and_then(|i| self.entries.get(i))
            .ok_or_else(|| ArmError::invalid_authentication_token("the token is not known"))?;
        let client = format!("token-{}", entry.line);
        let access = if entry.scopes.is_empty() {
            Access {
                client: Some(client.clone()),
                scopes: None,
            }
        } else {
            Access::scoped(client.clone(), entry.scopes.clone())
        };
        if !access.covers(path) {
            return Err(ArmError::authorization_failed(
                &client,
                &client,
                action_for(method).verb(),
                path,
            ));
        }
        Ok(Caller { client, access })
    }
}

/// The ARM-style action of an HTTP method.
fn action_for(method: &Method) -> Action {
    match *method {
        Method::GET | Method::HEAD => Action::Read,
        Method::PUT | Method::PATCH => Action::Write,
        Method::DELETE => Action::Delete,
        _ => Action::Invoke,
    }
}

/// The token of `Bearer <token>` (scheme case-insensitive), or `None` for any other shape.
fn bearer_token(header: &HeaderValue) -> Option<&[u8]> {
    let text = header.to_str().ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && token.chars().all(is_token_char))
        .then_some(token.as_bytes())
}

/// What the authentication layer needs: the tokens (none: every request passes) and whether `/metrics` is open.
#[derive(Clone, Debug)]
pub struct AuthGate {
    pub tokens: Option<Arc<TokenSet>>,
    /// `--metrics-auth none`: `/metrics` answers without a token, like `/healthz` and `/readyz`.
    pub metrics_public: bool,
}

impl AuthGate {
    /// Whether `path` answers without a token.
    fn is_open(&self, path: &str) -> bool {
        path == HEALTH_PATH
            || path == crate::observe::READY_PATH
            || crate::ui::is_public(path)
            || (self.metrics_public && path == crate::observe::METRICS_PATH)
    }
}

/// Axum middleware: lets the health, readiness (and, when configured, metrics) endpoints and the console's static
/// assets through, checks every other request against `tokens`
/// (when authentication is on) and puts the [`Caller`] into the request extensions.
pub async fn require_token(
    State(gate): State<AuthGate>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(tokens) = &gate.tokens else {
        return next.run(request).await;
    };
    if gate.is_open(request.uri().path()) {
        return next.run(request).await;
    }
    let result = tokens.authenticate(
        request.headers().get(header::AUTHORIZATION),
        request.method(),
        request.uri().path(),
    );
    match result {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            tracing::info!(
                status = error.status(),
                code = error.code(),
                "request rejected by authentication"
            );
            let mut response = error_response(&error);
            if error.status() == 401 {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer error=\"invalid_token\""),
                );
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_arm::error::codes;
    use proptest::prop_assert;

    fn tokens() -> TokenSet {
        TokenSet::parse(
            "# comment\n\nalpha-token\nscoped-token /subscriptions/S1 /subscriptions/s2/resourceGroups/rg\n",
        )
        .unwrap()
    }

    fn check(header: Option<&str>, path: &str) -> Result<Caller, (u16, String)> {
        let value = header.map(|h| HeaderValue::from_str(h).unwrap());
        tokens()
            .authenticate(value.as_ref(), &Method::GET, path)
            .map_err(|e| (e.status(), e.code().to_owned()))
    }

    #[test]
    fn answers_follow_arm() {
        type Expected = Result<&'static str, (u16, &'static str)>;
        let cases: &[(Option<&str>, &str, Expected)] = &[
            (Some("Bearer alpha-token"), "/x", Ok("token-3")),
            (Some("bearer   alpha-token "), "/x", Ok("token-3")),
            (None, "/x", Err((401, codes::AUTHENTICATION_FAILED))),
            (
                Some("Basic abc"),
                "/x",
                Err((401, codes::AUTHENTICATION_FAILED)),
            ),
            (
                Some("Bearer"),
                "/x",
                Err((401, codes::AUTHENTICATION_FAILED)),
            ),
            (
                Some("Bearer a b"),
                "/x",
                Err((401, codes::AUTHENTICATION_FAILED)),
            ),
            (
                Some("Bearer nope"),
                "/x",
                Err((401, codes::INVALID_AUTHENTICATION_TOKEN)),
            ),
            (
                Some("Bearer alpha-tokenx"),
                "/x",
                Err((401, codes::INVALID_AUTHENTICATION_TOKEN)),
            ),
            (
                Some("Bearer scoped-token"),
                "/subscriptions/s1/resourcegroups/a",
                Ok("token-4"),
            ),
            (
                Some("Bearer scoped-token"),
                "/SUBSCRIPTIONS/S2/resourcegroups/RG/x",
                Ok("token-4"),
            ),
            (
                Some("Bearer scoped-token"),
                "/subscriptions/s2",
                Err((403, codes::AUTHORIZATION_FAILED)),
            ),
            (
                Some("Bearer scoped-token"),
                "/subscriptions/s10",
                Err((403, codes::AUTHORIZATION_FAILED)),
            ),
        ];
        for (header, path, expected) in cases {
            let got = check(*header, path).map(|caller| caller.client);
            let expected = (*expected)
                .map(str::to_owned)
                .map_err(|(s, c)| (s, c.to_owned()));
            assert_eq!(got, expected, "{header:?} {path}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsing_and_checking_never_panic(text in "\\PC{0,200}", header in proptest::collection::vec(proptest::num::u8::ANY, 0..80), path in "\\PC{0,60}") {
            if let Ok(set) = TokenSet::parse(&text) {
                prop_assert!(!set.is_empty());
                if let Ok(value) = HeaderValue::from_bytes(&header) {
                    let _ = set.authenticate(Some(&value), &Method::GET, &path);
                }
            }
        }

        #[test]
        fn every_listed_token_is_accepted(tokens in proptest::collection::vec("[A-Za-z0-9._~+/=-]{1,40}", 1..5)) {
            let set = TokenSet::parse(&tokens.join("\n")).unwrap();
            for token in &tokens {
                let header = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
                prop_assert!(set.authenticate(Some(&header), &Method::GET, "/x").is_ok());
            }
        }
    }

    #[test]
    fn file_errors_never_quote_the_token() {
        let err = TokenSet::parse("good\nbad\u{7f}token\n").unwrap_err();
        assert!(matches!(err, TokenFileError::InvalidToken { line: 2 }));
        assert!(!err.to_string().contains("bad"));
        assert!(matches!(
            TokenSet::parse("# only\n\n"),
            Err(TokenFileError::Empty)
        ));
        assert!(matches!(
            TokenSet::parse("t subscriptions/x"),
            Err(TokenFileError::InvalidScope { line: 1, .. })
        ));
        let set = TokenSet::parse("secret-value /").unwrap();
        assert!(!format!("{set:?}").contains("secret"));
        assert_eq!(set.len(), 1);
    }
}
