//! The web console at `/ui`: its assets answer without a token, with their content types and the security headers
//! (CSP `default-src 'self'`, `frame-ancestors 'none'`, `nosniff`), while the API and every other path still need
//! the token; the pages load only the server's own scripts and never write data as HTML; and the API answers the
//! console reads (stacks and deployments by scope, a stack's resources, its deployment's plan dependencies and
//! timed operations, its what-if results) carry the fields it draws from.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const TOKEN: &str = "Bearer console-token";
const TOKENS: &str = "console-token\n";

fn content_type_for(path: &str) -> &'static str {
    if path.ends_with(".js") {
        "text/javascript; charset=utf-8"
    } else if path.ends_with(".css") {
        "text/css; charset=utf-8"
    } else if path.ends_with(".svg") {
        "image/svg+xml"
    } else {
        "text/html; charset=utf-8"
    }
}

fn assert_secured(answer: &Answer, what: &str) {
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("{what}: no {name} header"))
            .to_owned()
    };
    let csp = header("content-security-policy");
    let directives: Vec<&str> = csp.split(';').map(str::trim).collect();
    for required in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(directives.contains(&required), "{what}: CSP {csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{what}: {csp}"
    );
    assert_eq!(header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header("x-frame-options"), "DENY", "{what}");
    assert_eq!(header("referrer-policy"), "no-referrer", "{what}");
}

#[tokio::test]
async fn every_asset_answers_without_a_token_with_its_type_and_the_security_headers() {
    let app = TestApp::with_tokens(TOKENS).await;
    let paths: Vec<&str> = cairn_server::ui::asset_paths().collect();
    assert!(paths.contains(&"/ui/") && paths.contains(&"/ui/login"));
    for path in paths {
        let answer = call(&app.router, "GET", path, None, None).await;
        assert_eq!(answer.status.as_u16(), 200, "{path}: {}", answer.text);
        assert_eq!(
            answer.headers["content-type"],
            content_type_for(path),
            "{path}"
        );
        assert!(!answer.text.is_empty(), "{path}");
        assert!(answer.headers.contains_key("etag"), "{path}");
        assert_secured(&answer, path);

        let head = call(&app.router, "HEAD", path, None, None).await;
        assert_eq!(head.status.as_u16(), 200, "HEAD {path}");
        assert!(head.text.is_empty(), "HEAD {path}");
        assert_secured(&head, path);
    }

    let redirect = call(&app.router, "GET", "/ui", None, None).await;
    assert_eq!(redirect.status.as_u16(), 308);
    assert_eq!(redirect.headers["location"], "/ui/");
    assert_secured(&redirect, "/ui");
}

#[tokio::test]
async fn the_api_and_unknown_console_paths_still_need_the_token() {
    let app = TestApp::with_tokens(TOKENS).await;
    let groups = format!("{SUB}/resourcegroups?api-version=2025-04-01");
    let answer = call(&app.router, "GET", &groups, None, None).await;
    assert_eq!(answer.status.as_u16(), 401, "{}", answer.text);
    assert_eq!(answer.json["error"]["code"], "AuthenticationFailed");
    let answer = call(&app.router, "GET", &groups, None, Some(TOKEN)).await;
    assert_eq!(answer.status.as_u16(), 200, "{}", answer.text);
    let answer = call(
        &app.router,
        "GET",
        &groups,
        None,
        Some("Bearer not-the-token"),
    )
    .await;
    assert_eq!(answer.status.as_u16(), 401, "{}", answer.text);

    // Paths under /ui that are no asset are not open: no token, no answer beyond 401.
    for path in [
        "/ui/assets/nope.js",
        "/ui/assets/",
        "/ui//",
        &format!("/ui/..{SUB}/resourcegroups?api-version=2025-04-01"),
        &format!("/ui/assets/../..{SUB}/resourcegroups?api-version=2025-04-01"),
        "/UI/",
    ] {
        let answer = call(&app.router, "GET", path, None, None).await;
        assert_eq!(answer.status.as_u16(), 401, "{path}: {}", answer.text);
    }
    // With the token, the console's paths hold nothing but its assets: never API data.
    for path in [
        "/ui/assets/nope.js".to_owned(),
        format!("/ui/..{SUB}/resourcegroups?api-version=2025-04-01"),
    ] {
        let answer = call(&app.router, "GET", &path, None, Some(TOKEN)).await;
        assert_eq!(answer.status.as_u16(), 404, "{path}: {}", answer.text);
        assert_eq!(answer.json["error"]["code"], "NotFound", "{path}");
        assert_secured(&answer, &path);
    }
}

#[tokio::test]
async fn assets_revalidate_by_etag_and_refuse_other_methods() {
    let app = TestApp::with_tokens(TOKENS).await;
    let first = call(&app.router, "GET", "/ui/assets/app.js", None, None).await;
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(first.headers["cache-control"], "no-cache");
    let again = call_with_headers(
        &app.router,
        "GET",
        "/ui/assets/app.js",
        None,
        &[("if-none-match", &etag)],
    )
    .await;
    assert_eq!(again.status.as_u16(), 304);
    assert!(again.text.is_empty());
    assert_secured(&again, "304");
    let other = call(&app.router, "GET", "/ui/assets/api.js", None, None).await;
    assert_ne!(other.headers["etag"], first.headers["etag"]);

    for path in ["/ui/login", "/ui"] {
        let post = call(&app.router, "POST", path, Some("{}".to_owned()), None).await;
        assert_eq!(post.status.as_u16(), 405, "{path}: {}", post.text);
        assert_eq!(post.headers["allow"], "GET, HEAD", "{path}");
        assert_secured(&post, path);
    }
}

#[tokio::test]
async fn without_tokens_the_console_and_the_api_need_no_login() {
    let app = TestApp::new().await;
    let page = call(&app.router, "GET", "/ui/", None, None).await;
    assert_eq!(page.status.as_u16(), 200);
    // What the console's first call (and its login page's check) sees in dev mode: an answer, not a 401.
    let probe = call(
        &app.router,
        "GET",
        &format!("{SUB}?api-version=2025-04-01"),
        None,
        None,
    )
    .await;
    assert_eq!(probe.status.as_u16(), 200, "{}", probe.text);
}

/// The `src`/`href` values of a page.
fn references(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(at) = rest.find(attribute) {
            rest = &rest[at + attribute.len()..];
            let end = rest.find('"').unwrap();
            found.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    found
}

/// The modules a script imports (`import ... from "./x.js"`, also the last line of a multi-line import).
fn imports(script: &str) -> Vec<String> {
    script
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("import ") || line.starts_with("} from "))
        .filter_map(|line| {
            let end = line.rfind('"')?;
            let start = line[..end].rfind('"')?;
            Some(line[start + 1..end].to_owned())
        })
        .collect()
}

#[tokio::test]
async fn pages_load_only_the_servers_own_scripts_and_never_write_data_as_html() {
    let app = TestApp::new().await;
    let served: BTreeSet<&str> = cairn_server::ui::asset_paths().collect();
    let mut bodies = Vec::new();
    for path in &served {
        let answer = call(&app.router, "GET", path, None, None).await;
        bodies.push((*path, answer.text));
    }
    for (path, text) in &bodies {
        if path.ends_with(".js") {
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
                "setAttribute(\"style\"",
                "https://",
                "localStorage",
            ] {
                assert!(!text.contains(forbidden), "{path} uses {forbidden}");
            }
            for module in imports(text) {
                let module = module
                    .strip_prefix("./")
                    .unwrap_or_else(|| panic!("{path} imports {module}: not the console's own"));
                let target = format!("/ui/assets/{module}");
                assert!(
                    served.contains(target.as_str()),
                    "{path} imports {target}, which is not served"
                );
            }
        }
        if path.ends_with('/') || path.ends_with("login") {
            let lower = text.to_ascii_lowercase();
            assert!(!lower.contains("<style"), "{path}: inline style element");
            assert!(!lower.contains(" style="), "{path}: style attribute");
            assert!(
                !lower.contains(" onclick=") && !lower.contains(" onload="),
                "{path}"
            );
            let scripts = lower.matches("<script").count();
            let module_scripts = lower
                .matches("<script type=\"module\" src=\"/ui/assets/")
                .count();
            assert!(
                scripts == 1 && module_scripts == 1,
                "{path}: one external module script"
            );
            assert!(
                lower.contains("<script type=\"module\" src=\"/ui/assets/")
                    && lower.contains("\"></script>")
            );
            for reference in references(text) {
                assert!(
                    reference.starts_with('#') || served.contains(reference.as_str()),
                    "{path} refers to {reference}, which this server does not serve"
                );
            }
            assert!(lower.contains("<main"), "{path}: a main landmark");
            assert!(lower.contains("<html lang=\"en\">"), "{path}: a language");
        }
    }
}

/// Polls a stack until its provisioningState is terminal.
async fn settled(app: &TestApp, stack: &str) -> Value {
    for _ in 0..400 {
        let answer = call(
            &app.router,
            "GET",
            &format!("{stack}?api-version=2025-07-01"),
            None,
            Some(TOKEN),
        )
        .await;
        let state = answer.json["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if ["succeeded", "failed", "canceled"].contains(&state.as_str()) {
            return answer.json;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the stack operation did not finish");
}

fn chain_template(content: &str) -> Value {
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": {"local": {"name": "Local", "version": "1.0.0",
                                 "config": {"rootDirectory": {"type": "string"}}}},
        "resources": {
            "site": {"extension": "local", "type": "Directory", "properties": {"path": "site"}},
            "page": {"extension": "local", "type": "File", "dependsOn": ["site"],
                     "properties": {"path": "site/index.html", "content": content}}
        }
    })
}

async fn get(app: &TestApp, path: &str) -> Value {
    let answer = call(&app.router, "GET", path, None, Some(TOKEN)).await;
    assert_eq!(answer.status.as_u16(), 200, "{path}: {}", answer.text);
    answer.json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_the_console_reads_carry_what_it_draws() {
    let app = TestApp::with_tokens(TOKENS).await;
    let root = tempfile::tempdir().unwrap();
    let rg = format!("{SUB}/resourceGroups/web");
    let answer = call(
        &app.router,
        "PUT",
        &format!("{rg}?api-version=2025-04-01"),
        Some(json!({"location": "local"}).to_string()),
        Some(TOKEN),
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.text);
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/site");
    let body = |content: &str| {
        json!({"properties": {
            "template": chain_template(content),
            "extensionConfigs": {"local": {"rootDirectory": {"value": root.path().to_str().unwrap()}}},
            "actionOnUnmanage": {"resources": "delete"},
            "denySettings": {"mode": "none"}
        }})
    };
    let put = call(
        &app.router,
        "PUT",
        &format!("{stack}?api-version=2025-07-01"),
        Some(body("<h1>one</h1>\n").to_string()),
        Some(TOKEN),
    )
    .await;
    assert_eq!(put.status.as_u16(), 201, "{}", put.text);
    let stack_json = settled(&app, &stack).await;
    assert_eq!(stack_json["properties"]["provisioningState"], "succeeded");

    // The scope page: groups of the subscription, stacks and deployments of each scope.
    let groups = get(
        &app,
        &format!("{SUB}/resourcegroups?api-version=2025-04-01"),
    )
    .await;
    assert_eq!(groups["value"][0]["id"], rg);
    let stacks = get(
        &app,
        &format!("{rg}/providers/Microsoft.Resources/deploymentStacks?api-version=2025-07-01"),
    )
    .await;
    assert_eq!(stacks["value"][0]["id"], stack);
    let deployments = get(
        &app,
        &format!("{rg}/providers/Microsoft.Resources/deployments?api-version=2025-04-01"),
    )
    .await;
    assert_eq!(
        deployments["value"][0]["properties"]["provisioningState"],
        "Succeeded"
    );

    // The stack page: managed resources with extension, type, identifiers and status.
    let resources = stack_json["properties"]["resources"].as_array().unwrap();
    let mut seen: Vec<(String, String, String)> = resources
        .iter()
        .map(|r| {
            assert_eq!(r["extension"]["name"], "Local");
            (
                r["type"].as_str().unwrap().to_owned(),
                r["identifiers"]["path"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("Directory".into(), "site".into(), "managed".into()),
            ("File".into(), "site/index.html".into(), "managed".into())
        ]
    );
    // Its deployment: the plan's dependencies name the edge the graph draws...
    let deployment_id = stack_json["properties"]["deploymentId"].as_str().unwrap();
    let deployment = get(&app, &format!("{deployment_id}?api-version=2025-04-01")).await;
    let dependencies = &deployment["properties"]["dependencies"];
    assert_eq!(dependencies[0]["resourceName"], "page", "{dependencies}");
    assert_eq!(dependencies[0]["dependsOn"][0]["resourceName"], "site");
    // ...and the operations give each node its state and the timeline its start and end.
    let operations = get(
        &app,
        &format!("{deployment_id}/operations?api-version=2025-04-01"),
    )
    .await;
    let mut names = Vec::new();
    for operation in operations["value"].as_array().unwrap() {
        let properties = &operation["properties"];
        assert_eq!(properties["provisioningState"], "Succeeded");
        assert!(properties["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(properties["duration"].as_str().unwrap().starts_with("PT"));
        let target = &properties["targetResource"];
        assert_eq!(target["extension"]["name"], "Local");
        assert!(target["identifiers"]["path"].is_string());
        names.push(target["symbolicName"].as_str().unwrap().to_owned());
    }
    names.sort();
    assert_eq!(names, ["page", "site"]);

    // The what-if panel: results at the stack's scope name the stack and carry property deltas.
    let result = format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/next");
    let mut what_if = body("<h1>two</h1>\n");
    what_if["properties"]["deploymentStackResourceId"] = json!(stack);
    what_if["properties"]["retentionInterval"] = json!("P1D");
    let answer = call(
        &app.router,
        "PUT",
        &format!("{result}?api-version=2025-07-01"),
        Some(what_if.to_string()),
        Some(TOKEN),
    )
    .await;
    assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    let listed = get(
        &app,
        &format!(
            "{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults?api-version=2025-07-01"
        ),
    )
    .await;
    let listed = &listed["value"][0]["properties"];
    assert_eq!(listed["deploymentStackResourceId"], stack);
    let page = listed["changes"]["resourceChanges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|change| change["symbolicName"] == "page")
        .unwrap();
    assert_eq!(page["changeType"], "modify");
    assert_eq!(
        page["resourceConfigurationChanges"]["delta"][0],
        json!({"path": "properties.content", "changeType": "modify",
               "before": "<h1>one</h1>\n", "after": "<h1>two</h1>\n"})
    );
}
