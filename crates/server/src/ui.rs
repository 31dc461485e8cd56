//! The web console at `/ui`: static pages, styles and JavaScript modules embedded in the binary, served with
//! a strict Content-Security-Policy. The console holds no data of its own: the browser calls the ARM REST API
//! with the bearer token the user gave on the login page. See `docs/console.md`.
//!
//! Only the embedded assets (and `/ui`, which redirects to `/ui/`) answer without a token
//! ([`is_public`]); every other path under `/ui` goes through authentication like the API, then answers 404.

use std::sync::OnceLock;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use cairn_arm::ArmError;
use sha2::{Digest, Sha256};

use crate::response::error_response;

/// Where the console lives.
pub const UI_PATH: &str = "/ui";

/// The policy of every console response: the pages load scripts, styles and images only from this server, call
/// only this server, run no inline script or style, and may not be framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// One embedded file and the path it is served at.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:expr, $file:literal) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/ui/", $file)),
        }
    };
}

static ASSETS: &[Asset] = &[
    asset!("/ui/", HTML, "index.html"),
    asset!("/ui/login", HTML, "login.html"),
    asset!("/ui/assets/console.css", CSS, "assets/console.css"),
    asset!("/ui/assets/icon.svg", SVG, "assets/icon.svg"),
    asset!("/ui/assets/api.js", JAVASCRIPT, "assets/api.js"),
    asset!("/ui/assets/app.js", JAVASCRIPT, "assets/app.js"),
    asset!("/ui/assets/diff.js", JAVASCRIPT, "assets/diff.js"),
    asset!("/ui/assets/dom.js", JAVASCRIPT, "assets/dom.js"),
    asset!("/ui/assets/graph.js", JAVASCRIPT, "assets/graph.js"),
    asset!("/ui/assets/login.js", JAVASCRIPT, "assets/login.js"),
    asset!("/ui/assets/model.js", JAVASCRIPT, "assets/model.js"),
    asset!("/ui/assets/timeline.js", JAVASCRIPT, "assets/timeline.js"),
    asset!("/ui/assets/views.js", JAVASCRIPT, "assets/views.js"),
];

/// Whether `path` answers without a token: `/ui` and the embedded assets, which hold no data.
pub fn is_public(path: &str) -> bool {
    path == UI_PATH || find(path).is_some()
}

/// Every path the console serves, for tests and documentation.
pub fn asset_paths() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|asset| asset.path)
}

fn find(path: &str) -> Option<(usize, &'static Asset)> {
    ASSETS
        .iter()
        .enumerate()
        .find(|(_, asset)| asset.path == path)
}

/// Strong validators of the assets, computed once: `"sha256-prefix"`, so a browser revalidates cheaply.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|asset| {
                let digest = Sha256::digest(asset.body);
                let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
                format!("\"{hex}\"")
            })
            .collect()
    })
}

/// The headers every console response carries, errors included.
fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 6] = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        // Revalidated on every use (cheap with the ETag): a new build's assets are picked up at once.
        (header::CACHE_CONTROL, "no-cache"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `GET|HEAD /ui/...`: an embedded asset (304 when the browser's copy is current), `/ui` redirected to `/ui/` (so
/// the pages have one base), 404 for any other path, 405 for other methods.
pub(crate) async fn serve(request: Request) -> Response {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = error_response(&ArmError::method_not_allowed(request.method().as_str()));
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return secure(response);
    }
    if request.uri().path() == UI_PATH {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::PERMANENT_REDIRECT;
        response
            .headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/ui/"));
        return secure(response);
    }
    let Some((index, asset)) = find(request.uri().path()) else {
        return secure(error_response(&ArmError::new(
            404,
            "NotFound",
            "The console has no page at this path.",
        )));
    };
    let etag = &etags()[index];
    let mut response = if is_current(request.headers(), etag) {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = Response::new(Body::from(asset.body));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        response
    };
    if let Ok(value) = HeaderValue::from_str(etag) {
        response.headers_mut().insert(header::ETAG, value);
    }
    secure(response)
}

/// Whether `If-None-Match` names `etag` (or `*`).
fn is_current(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == etag || tag == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_console_and_its_assets_are_public() {
        assert!(is_public("/ui"));
        assert!(is_public("/ui/"));
        assert!(is_public("/ui/login"));
        assert!(is_public("/ui/assets/app.js"));
        for path in [
            "/ui/assets/",
            "/ui/assets/nope.js",
            "/ui/../subscriptions/x",
            "/ui/assets/../../subscriptions/x",
            "/UI/",
            "/ui//",
            "/uix",
            "/ui%2F",
            "/subscriptions/x",
        ] {
            assert!(!is_public(path), "{path}");
        }
    }

    #[test]
    fn etags_differ_per_asset_and_match_if_none_match() {
        let tags = etags();
        assert_eq!(tags.len(), ASSETS.len());
        let mut unique = tags.to_vec();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), tags.len());
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"other\", W/{}", tags[0])).unwrap(),
        );
        assert!(is_current(&headers, &tags[0]));
        assert!(!is_current(&headers, &tags[1]));
        assert!(!is_current(&HeaderMap::new(), &tags[0]));
    }
}
