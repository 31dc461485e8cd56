//! The web console in a real browser: headless Chromium driven over WebDriver (`chromedriver`) against `cairn
//! serve` with a tokens file. The test signs in (a wrong token refused, the right one accepted), finds a stack on
//! the subscription page and opens it with the keyboard, sees its managed resources and its dependency graph,
//! watches a stack update change the graph's states while an extension holds its first create (running, pending,
//! then all succeeded without reloading the page), opens a what-if diff, finds "no drift result" until widgets are
//! changed and removed behind the stack's back and drift is detected, then reads the drift diff, signs out, and is
//! sent back to the login page, told why, when its token is no longer accepted.
//! Each page is checked for labels, landmarks and text contrast, and the browser's log for script errors and
//! Content-Security-Policy violations. A second test opens the console of a server without tokens (no sign-in), uses
//! the Scope box, and runs the console's modules in the page on documented API shapes (a drift detection result
//! among them). Screenshots go to `<target dir>/ui-screenshots/`.
//!
//! Chromium and chromedriver are the Debian packages `chromium` and `chromium-driver` (scripts/test.sh installs
//! them); without them this test fails, naming the packages.

mod common;
#[path = "console_browser/webdriver.rs"]
mod webdriver;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::start_server_with;
use serde_json::{Value, json};
use tokio::sync::watch;
use webdriver::{ENTER, Session, TAB};

const SUB: &str = "/subscriptions/00000000-0000-0000-0000-000000000000";
const TOKEN: &str = "console-browser-token-6f1c";
const STACKS: &str = "api-version=2025-07-01";
/// How long the page may take to show a change (it refreshes every 5 s when idle, every second while busy).
const PAGE_PATIENCE: Duration = Duration::from_secs(15);

/// A v2 extension holding its widgets in memory; while `hold` is set, a create waits before answering.
#[derive(Clone)]
struct Gate {
    widgets: Arc<Mutex<std::collections::BTreeMap<String, Value>>>,
    hold: watch::Sender<bool>,
}

fn widget(body: &Value, properties: Value) -> Value {
    json!({ "type": body["type"], "apiVersion": body["apiVersion"],
            "identifiers": { "name": properties["name"] }, "properties": properties })
}

async fn create(State(gate): State<Gate>, Json(body): Json<Value>) -> Json<Value> {
    let mut hold = gate.hold.subscribe();
    let _ = hold.wait_for(|held| !*held).await;
    let name = body["properties"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    gate.widgets
        .lock()
        .unwrap()
        .insert(name, body["properties"].clone());
    Json(widget(&body, body["properties"].clone()))
}

async fn preview(Json(body): Json<Value>) -> Json<Value> {
    Json(widget(&body, body["properties"].clone()))
}

async fn get(State(gate): State<Gate>, Json(body): Json<Value>) -> Response {
    let name = body["identifiers"]["name"].as_str().unwrap_or_default();
    match gate.widgets.lock().unwrap().get(name).cloned() {
        Some(properties) => Json(widget(&body, properties)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": { "code": "ResourceNotFound", "message": "no such widget" } })),
        )
            .into_response(),
    }
}

async fn delete(State(gate): State<Gate>, Json(body): Json<Value>) -> StatusCode {
    let name = body["identifiers"]["name"].as_str().unwrap_or_default();
    gate.widgets.lock().unwrap().remove(name);
    StatusCode::NO_CONTENT
}

/// Starts the extension and writes a registry naming it `Gate` 1.0.0.
async fn gate_extension(dir: &Path) -> (Gate, PathBuf) {
    let (hold, _) = watch::channel(false);
    let gate = Gate {
        widgets: Arc::default(),
        hold,
    };
    let app = axum::Router::new()
        .route("/{version}/resource/createOrUpdate", post(create))
        .route("/{version}/resource/preview", post(preview))
        .route("/{version}/resource/get", post(get))
        .route("/{version}/resource/delete", post(delete))
        .with_state(gate.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let registry = dir.join("extensions.json");
    std::fs::write(
        &registry,
        json!({ "extensions": [ { "name": "Gate", "version": "1.0.0", "transport": { "kind": "http", "url": url } } ] })
            .to_string(),
    )
    .unwrap();
    (gate, registry)
}

/// A chain of widgets: each depends on the one before; `sizes` gives each widget's size.
fn chain(sizes: &[(&str, u32)]) -> Value {
    let mut resources = serde_json::Map::new();
    let mut previous: Option<&str> = None;
    for (name, size) in sizes {
        let mut resource = json!({ "extension": "gate", "type": "Widget", "apiVersion": "v1",
                                   "properties": { "name": name, "size": size } });
        if let Some(previous) = previous {
            resource["dependsOn"] = json!([previous]);
        }
        resources.insert((*name).to_owned(), resource);
        previous = Some(name);
    }
    json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "extensions": { "gate": { "name": "Gate", "version": "1.0.0" } },
        "resources": resources
    })
}

fn stack_body(sizes: &[(&str, u32)]) -> Value {
    json!({ "properties": {
        "template": chain(sizes),
        "actionOnUnmanage": { "resources": "delete" },
        "denySettings": { "mode": "none" }
    }})
}

/// The API as a test client calls it.
struct Api {
    http: reqwest::Client,
    url: String,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await.unwrap();
        let status = answer.status();
        let text = answer.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn stack_state(&self, stack: &str) -> String {
        let stack = self
            .send(reqwest::Method::GET, &format!("{stack}?{STACKS}"), None)
            .await;
        stack["properties"]["provisioningState"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    async fn wait_settled(&self, stack: &str) -> String {
        let started = Instant::now();
        loop {
            let state = self.stack_state(stack).await;
            if ["succeeded", "failed", "canceled"].contains(&state.as_str()) {
                return state;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "stack still {state}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Where screenshots go: `<target dir>/ui-screenshots/`, emptied first.
fn screenshot_dir() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_cairn"));
    let target = binary
        .parent()
        .and_then(Path::parent)
        .expect("the cairn binary lives in <target>/<profile>/");
    let dir = target.join("ui-screenshots");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves the whole page: the window grows to the page's height for the picture, then returns to laptop size.
async fn full_page(session: &Session, dir: &Path, name: &str) {
    let height = session
        .execute("return document.documentElement.scrollHeight;", vec![])
        .await
        .as_u64()
        .unwrap_or(900)
        .clamp(900, 4000) as u32;
    session.resize(1366, height + 100).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    session.screenshot(&dir.join(format!("{name}.png"))).await;
    session.resize(1366, 900).await;
}

/// What a page must have for keyboard and screen-reader users and for readers with low vision: a label for every
/// form control, a `main` landmark and one `h1`, alternative text on images, and text contrast of at least 4.5:1
/// (3:1 for large text) against the nearest opaque background. Returns the problems found.
const ACCESSIBILITY_AUDIT: &str = r#"
const problems = [];
for (const control of document.querySelectorAll('input, select, textarea')) {
  if (control.type === 'hidden') continue;
  if (!(control.labels && control.labels.length) && !control.getAttribute('aria-label') && !control.getAttribute('aria-labelledby'))
    problems.push('unlabelled control ' + (control.id || control.name));
}
if (document.querySelectorAll('main').length !== 1) problems.push('no single main landmark');
if (document.querySelectorAll('h1').length !== 1) problems.push('not exactly one h1');
for (const img of document.querySelectorAll('img')) if (!img.hasAttribute('alt')) problems.push('img without alt');
for (const button of document.querySelectorAll('button')) if (!button.textContent.trim() && !button.getAttribute('aria-label')) problems.push('button without a name');
const rgb = (text) => (text.match(/[\d.]+/g) || []).map(Number);
const luminance = ([r, g, b]) => {
  const channel = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
};
const background = (element) => {
  for (let node = element; node && node.nodeType === 1; node = node.parentElement) {
    const colour = rgb(getComputedStyle(node).backgroundColor);
    if (colour.length >= 3 && (colour.length === 3 || colour[3] === 1)) return colour;
  }
  return [255, 255, 255];
};
const seen = new Set();
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
while (walker.nextNode()) {
  const text = walker.currentNode;
  const element = text.parentElement;
  if (!text.textContent.trim() || !element || element.closest('svg, .visually-hidden, [hidden]') || seen.has(element)) continue;
  seen.add(element);
  const style = getComputedStyle(element);
  if (style.visibility === 'hidden' || style.display === 'none' || element.getClientRects().length === 0) continue;
  const [fg, bg] = [luminance(rgb(style.color)), luminance(background(element))];
  const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
  const size = parseFloat(style.fontSize);
  const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
  if (ratio < (large ? 3 : 4.5)) problems.push('contrast ' + ratio.toFixed(2) + ' for "' + text.textContent.trim().slice(0, 40) + '"');
}
return problems;
"#;

async fn assert_accessible(session: &Session, page: &str) {
    let problems = session.execute(ACCESSIBILITY_AUDIT, vec![]).await;
    assert_eq!(problems, json!([]), "accessibility problems on the {page}");
}

/// The browser log holds no script error and no Content-Security-Policy violation.
async fn assert_clean_log(session: &Session) {
    for entry in session.browser_log().await {
        let message = entry["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("Content Security Policy")
                && !message.contains("Uncaught")
                && !message.contains("SyntaxError"),
            "browser log: {message}"
        );
    }
}

/// `[state of each graph node by label]`, sorted, as the page draws it.
const GRAPH_STATES: &str = "return [...document.querySelectorAll('svg.graph .node')].map((n) => n.dataset.label + ':' + n.dataset.state).sort().join(' ');";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_open_a_stack_watch_an_update_and_read_what_if_and_drift_diffs() {
    let (chromium, chromedriver) = webdriver::find_browser();
    let started = Instant::now();
    let shots = screenshot_dir();
    let dir = tempfile::tempdir().unwrap();
    let (gate, registry) = gate_extension(dir.path()).await;
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let server = start_server_with(
        &dir.path().join("data"),
        &registry,
        &[OsStr::new("--tokens"), tokens.as_os_str()],
    );
    let api = Api {
        http: reqwest::Client::new(),
        url: server.url.clone(),
    };

    // A stack of three widgets in a chain, and a what-if of changing b's size and dropping c.
    let rg = format!("{SUB}/resourceGroups/shop");
    api.send(
        reqwest::Method::PUT,
        &format!("{rg}?api-version=2025-04-01"),
        Some(json!({ "location": "local" })),
    )
    .await;
    let stack = format!("{rg}/providers/Microsoft.Resources/deploymentStacks/storefront");
    api.send(
        reqwest::Method::PUT,
        &format!("{stack}?{STACKS}"),
        Some(stack_body(&[("a", 1), ("b", 1), ("c", 1)])),
    )
    .await;
    assert_eq!(api.wait_settled(&stack).await, "succeeded");
    let mut what_if = stack_body(&[("a", 1), ("b", 5)]);
    what_if["properties"]["deploymentStackResourceId"] = json!(stack);
    what_if["properties"]["retentionInterval"] = json!("P1D");
    api.send(
        reqwest::Method::PUT,
        &format!("{rg}/providers/Microsoft.Resources/deploymentStacksWhatIfResults/storefront-next?{STACKS}"),
        Some(what_if),
    )
    .await;

    let driver = webdriver::Driver::start(&chromedriver).await;
    let session = driver
        .session(&chromium, &dir.path().join("profile"), 1366, 900)
        .await;

    // Signing in: the console sends a browser without a token to the login page.
    session.goto(&format!("{}/ui/", server.url)).await;
    session
        .wait_until(
            "the login page",
            PAGE_PATIENCE,
            "return location.pathname === '/ui/login' && document.activeElement && document.activeElement.id === 'token';",
        )
        .await;
    assert_accessible(&session, "login page").await;
    let input = session.wait_for("#token", PAGE_PATIENCE).await;
    session.type_into(&input, "not-the-token").await;
    session
        .click(&session.wait_for("#sign-in", PAGE_PATIENCE).await)
        .await;
    let refused = session
        .wait_until(
            "the refusal",
            PAGE_PATIENCE,
            "return document.getElementById('login-error').textContent;",
        )
        .await;
    assert!(
        refused.as_str().unwrap().contains("did not accept"),
        "{refused}"
    );
    session
        .screenshot(&shots.join("01-login-refused.png"))
        .await;
    session.clear(&input).await;
    session.type_into(&input, &format!("{TOKEN}{ENTER}")).await;
    session
        .wait_until(
            "the subscription page",
            PAGE_PATIENCE,
            "return location.hash.startsWith('#/subscriptions/') && document.querySelector('#stacks a') !== null;",
        )
        .await;
    assert_eq!(
        session
            .execute(
                "return sessionStorage.getItem('cairn.console.token');",
                vec![]
            )
            .await,
        json!(TOKEN),
        "the token is kept in the tab's session"
    );
    assert_accessible(&session, "subscription page").await;
    full_page(&session, &shots, "02-subscription").await;

    // Keyboard: the page's title has the focus; Tab reaches the stack's link, Enter opens it.
    session.press(TAB).await;
    let focused = session
        .execute("return document.activeElement.textContent;", vec![])
        .await;
    assert_eq!(focused, json!("storefront"), "Tab from the title");
    session.press(ENTER).await;
    session
        .wait_until(
            "the stack page with its graph",
            PAGE_PATIENCE,
            "return document.querySelectorAll('svg.graph .node').length === 3;",
        )
        .await;
    assert_eq!(
        session.execute(GRAPH_STATES, vec![]).await,
        json!("a:Succeeded b:Succeeded c:Succeeded")
    );
    let edges = session
        .execute(
            "return [...document.querySelectorAll('svg.graph .edge')].length;",
            vec![],
        )
        .await;
    assert_eq!(edges, json!(2), "a → b → c");
    let resources = session
        .execute(
            "return [...document.querySelectorAll('#resources tbody tr')].map((row) => [...row.cells].slice(0, 5).map((cell) => cell.textContent).join('|'));",
            vec![],
        )
        .await;
    assert_eq!(
        resources,
        json!([
            "a|Gate 1.0.0|Widget|{\"name\":\"a\"}|managed",
            "b|Gate 1.0.0|Widget|{\"name\":\"b\"}|managed",
            "c|Gate 1.0.0|Widget|{\"name\":\"c\"}|managed"
        ])
    );
    let drift = session
        .execute(
            "return document.getElementById('drift').textContent;",
            vec![],
        )
        .await;
    assert!(
        drift.as_str().unwrap().contains("No drift result"),
        "{drift}"
    );
    let timeline_rows = session
        .execute(
            "return document.querySelectorAll('#timeline tbody tr').length;",
            vec![],
        )
        .await;
    assert_eq!(timeline_rows, json!(3));
    let focusable_nodes = session
        .execute(
            "return [...document.querySelectorAll('svg.graph .node')].filter((n) => n.getAttribute('tabindex') === '0' && n.getAttribute('aria-label').includes('Succeeded')).length;",
            vec![],
        )
        .await;
    assert_eq!(
        focusable_nodes,
        json!(3),
        "graph nodes are focusable and say their state"
    );
    assert_accessible(&session, "stack page").await;
    full_page(&session, &shots, "03-stack").await;

    // A running update: the extension holds a's create; the page shows a running and the rest pending, live.
    gate.hold.send_replace(true);
    api.send(
        reqwest::Method::PUT,
        &format!("{stack}?{STACKS}"),
        Some(stack_body(&[("a", 2), ("b", 2), ("c", 2), ("d", 2)])),
    )
    .await;
    session
        .wait_until(
            "a running node",
            PAGE_PATIENCE,
            "return document.querySelector('svg.graph .node.state-running[data-label=\"a\"]') !== null && document.querySelectorAll('svg.graph .node.state-pending').length === 3;",
        )
        .await;
    assert_eq!(
        session.execute(GRAPH_STATES, vec![]).await,
        json!("a:Running b:Pending c:Pending d:Pending")
    );
    let badge = session
        .execute(
            "return document.querySelector('.facts .badge').textContent;",
            vec![],
        )
        .await;
    assert_eq!(badge, json!("deploying"));
    session
        .screenshot(&shots.join("04-update-running.png"))
        .await;
    gate.hold.send_replace(false);
    session
        .wait_until(
            "every node succeeded",
            PAGE_PATIENCE,
            "return document.querySelectorAll('svg.graph .node.state-succeeded').length === 4 && document.querySelector('.facts .badge').textContent === 'succeeded';",
        )
        .await;
    assert_eq!(
        session.execute(GRAPH_STATES, vec![]).await,
        json!("a:Succeeded b:Succeeded c:Succeeded d:Succeeded")
    );
    assert_eq!(api.stack_state(&stack).await, "succeeded");
    full_page(&session, &shots, "05-update-done").await;

    // The what-if result: opening it shows b's size going from 1 to 5 and c deleted.
    let toggle = session
        .wait_for("#what-if button.disclosure", PAGE_PATIENCE)
        .await;
    session.click(&toggle).await;
    let diff = session
        .wait_until(
            "the what-if diff",
            PAGE_PATIENCE,
            "const panel = document.querySelector('#what-if .what-if'); return panel && [...panel.querySelectorAll('article')].map((a) => a.dataset.changeType + ':' + a.querySelector('h4').textContent + ':' + [...a.querySelectorAll('del, ins')].map((l) => l.textContent.trim()).join(',')).join(' | ');",
        )
        .await;
    assert_eq!(
        diff,
        json!("modify:modify b Widget:- 1,+ 5 | delete:delete c Widget:")
    );
    assert_eq!(
        session
            .execute(
                "return document.querySelector('#what-if button.disclosure').getAttribute('aria-expanded');",
                vec![]
            )
            .await,
        json!("true")
    );
    assert_accessible(&session, "stack page with the what-if open").await;
    full_page(&session, &shots, "06-what-if").await;

    // Drift: b resized and d removed behind the stack's back; the stack's drift detection shows them, live.
    {
        let mut widgets = gate.widgets.lock().unwrap();
        widgets.get_mut("b").expect("b")["size"] = json!(9);
        widgets.remove("d");
    }
    api.send(
        reqwest::Method::POST,
        &format!("{stack}/detectDrift?{STACKS}"),
        Some(json!({})),
    )
    .await;
    let drifted = session
        .wait_until(
            "the drift result",
            PAGE_PATIENCE,
            "const articles = [...document.querySelectorAll('#drift article')]; return articles.length > 0 && articles.map((a) => a.dataset.driftStatus + ':' + a.querySelector('h4').textContent + ':' + [...a.querySelectorAll('del, ins')].map((l) => l.textContent.trim()).join(',')).join(' | ');",
        )
        .await;
    assert_eq!(
        drifted,
        json!("modified:modified b Widget:- 2,+ 9 | deleted:deleted d Widget:")
    );
    let drift_column = session
        .execute(
            "return [...document.querySelectorAll('#resources tbody tr')].map((row) => row.cells[0].textContent + ':' + row.cells[6].textContent).join(' ');",
            vec![],
        )
        .await;
    assert_eq!(
        drift_column,
        json!("a:inSync b:modified c:inSync d:deleted")
    );
    assert_accessible(&session, "stack page with a drift result").await;
    full_page(&session, &shots, "07-drift").await;
    assert_clean_log(&session).await;

    // Signing out forgets the token.
    session
        .click(&session.wait_for("#sign-out", PAGE_PATIENCE).await)
        .await;
    session
        .wait_until(
            "the login page again",
            PAGE_PATIENCE,
            "return location.pathname === '/ui/login' && sessionStorage.getItem('cairn.console.token') === null;",
        )
        .await;
    // A token the server no longer accepts: the console's first call gets 401 and the login page says why.
    session
        .execute(
            "sessionStorage.setItem('cairn.console.token', 'a-token-from-before');",
            vec![],
        )
        .await;
    session.goto(&format!("{}/ui/#{stack}", server.url)).await;
    let reason = session
        .wait_until(
            "the login page with the reason",
            PAGE_PATIENCE,
            "const reason = document.getElementById('login-reason'); return location.pathname === '/ui/login' && !reason.hidden && reason.textContent;",
        )
        .await;
    assert!(
        reason.as_str().unwrap().contains("no longer accepts"),
        "{reason}"
    );
    session.end().await;
    drop(driver);
    drop(server);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the browser test took {:?}",
        started.elapsed()
    );
}

/// Runs in the console page: the console's own modules on shapes the API documents, including a drift detection
/// result (served by stacks with drift detection; this test needs no server support for it), and data that
/// looks like markup. Returns what the modules made of them.
const MODULE_CHECKS: &str = r#"
const done = arguments[arguments.length - 1];
(async () => {
  const model = await import('/ui/assets/model.js');
  const graph = await import('/ui/assets/graph.js');
  const diff = await import('/ui/assets/diff.js');
  const { pages } = await import('/ui/assets/views.js');
  const out = {};
  out.timestamp = model.parseTimestamp('2026-01-02T03:04:05.1234567Z') === Date.UTC(2026, 0, 2, 3, 4, 5, 123);
  out.durations = [model.parseDuration('PT1M2.5S'), model.parseDuration('P1DT2H'), Number.isNaN(model.parseDuration('PT'))];

  // A plan where c depends on a and b, b on a: a's edge to c skips b's column and passes a waypoint there.
  const deployment = { properties: { provisioningState: 'Running', dependencies: [
    { resourceType: 'Widget', resourceName: 'b', dependsOn: [{ resourceType: 'Widget', resourceName: 'a' }] },
    { resourceType: 'Widget', resourceName: 'c', dependsOn: [{ resourceType: 'Widget', resourceName: 'a' }, { resourceType: 'Widget', resourceName: 'b' }] } ] } };
  const operations = [
    { operationId: '1', properties: { provisioningState: 'Succeeded', timestamp: '2026-01-02T03:04:06Z', duration: 'PT1S', targetResource: { resourceType: 'Widget', symbolicName: 'a' } } },
    { operationId: '2', properties: { provisioningState: 'Running', timestamp: '2026-01-02T03:04:06Z', targetResource: { resourceType: 'Widget', symbolicName: 'b' } } } ];
  const planned = model.buildGraph(deployment, operations);
  out.nodes = planned.nodes.map((node) => node.label + ':' + node.state).sort();
  const placed = graph.layout(planned.nodes, planned.edges);
  out.columns = planned.nodes.map((node) => node.label + placed.positions.get(node.key).layer).sort();
  out.waypoints = [...placed.waypoints.values()].map((points) => points.length).sort();
  const span = model.timelineRows(operations, Date.UTC(2026, 0, 2, 3, 4, 10));
  out.timeline = span.rows.map((row) => row.label + ':' + (row.shownEnd - row.start));
  out.lineDiff = diff.lineDiff(['x', 'y', 'z'], ['x', 'Y', 'z']).map(([sign, line]) => sign + line);

  // A stack page whose latest drift result says the file was modified, the vault is in sync (its id in other
  // case) and a third resource was deleted; names that look like markup stay text.
  const stackId = '/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/deploymentStacks/app';
  const file = { extension: { name: 'Local', version: '1.0.0', configId: 'c1' }, type: 'File', identifiers: { path: 'etc/app.conf' } };
  const vault = { id: '/subscriptions/s/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/appkv', apiVersion: '2023-07-01' };
  const sneaky = { extension: { name: 'Local', version: '1.0.0' }, type: 'File', identifiers: { path: '<img src=x id=injected>' } };
  const stack = { id: stackId, name: 'app', properties: { provisioningState: 'succeeded',
    resources: [{ ...file, status: 'managed' }, { ...vault, status: 'managed' }, { ...sneaky, status: 'managed' }] } };
  const drift = { name: 'drift-0001', properties: { deploymentStackResourceId: stackId, status: 'Succeeded',
    startTime: '2026-01-02T03:04:05Z', endTime: '2026-01-02T03:04:06Z',
    summary: { total: 3, checked: 3, inSync: 1, modified: 1, deleted: 1, unreachable: 0 },
    resources: [
      { ...file, extension: { name: 'Local', version: '1.1.0', configId: 'c1' }, symbolicName: 'conf', driftStatus: 'modified',
        propertyChanges: [{ path: 'properties.content', changeType: 'modify', before: 'port=80\nhost=a\n', after: 'port=8080\nhost=a\n' }] },
      { ...vault, id: vault.id.toUpperCase(), driftStatus: 'inSync' },
      { ...sneaky, driftStatus: 'deleted' } ] } };
  const data = { route: { kind: 'stack', name: 'app', scope: '/subscriptions/s/resourceGroups/rg', id: stackId },
    stack, deploymentId: stackId.replace('deploymentStacks', 'deployments'), deployment: null, operations: [],
    deploymentError: null, whatIfs: { value: [] }, drift: { value: drift, count: 1 } };
  const page = document.createElement('div');
  page.append(...pages.stack.render(data, {}, () => {}, Date.now()).flat().filter(Boolean));
  out.driftColumn = [...page.querySelectorAll('#resources tbody tr')].map((row) => row.cells[6].textContent);
  out.driftArticles = [...page.querySelectorAll('#drift article')].map((article) => article.dataset.driftStatus + ':' +
    [...article.querySelectorAll('del, ins')].map((line) => line.textContent.trim()).join(','));
  out.injected = page.querySelector('#injected') !== null || page.querySelector('img') !== null;
  out.markupShownAsText = page.textContent.includes('<img src=x id=injected>');
  done(out);
})().catch((error) => done({ error: String((error && error.stack) || error) }));
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_no_sign_in_and_the_modules_draw_documented_shapes() {
    let (chromium, chromedriver) = webdriver::find_browser();
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("extensions.json");
    std::fs::write(&registry, json!({ "extensions": [] }).to_string()).unwrap();
    let server = common::start_server(&dir.path().join("data"), &registry);
    let driver = webdriver::Driver::start(&chromedriver).await;
    let session = driver
        .session(&chromium, &dir.path().join("profile"), 1366, 900)
        .await;

    session.goto(&format!("{}/ui/", server.url)).await;
    let note = session
        .wait_until(
            "the subscription page without signing in",
            PAGE_PATIENCE,
            "return location.hash.startsWith('#/subscriptions/') && document.querySelector('#stacks') !== null && document.getElementById('session').textContent;",
        )
        .await;
    assert!(note.as_str().unwrap().contains("No sign-in"), "{note}");
    assert_accessible(&session, "subscription page in dev mode").await;

    // The Scope box: text that names no scope is refused in words; a subscription id alone opens it.
    let scope = session.wait_for("#scope-input", PAGE_PATIENCE).await;
    session.clear(&scope).await;
    session
        .type_into(&scope, &format!("not/a scope{ENTER}"))
        .await;
    let refusal = session
        .wait_until(
            "the scope refusal",
            PAGE_PATIENCE,
            "return document.getElementById('scope-input').getAttribute('aria-invalid') === 'true' && document.getElementById('scope-error').textContent;",
        )
        .await;
    assert!(
        refusal.as_str().unwrap().contains("Not a scope"),
        "{refusal}"
    );
    session.clear(&scope).await;
    session
        .type_into(
            &scope,
            &format!("11111111-2222-3333-4444-555555555555{ENTER}"),
        )
        .await;
    session
        .wait_until(
            "the other subscription",
            PAGE_PATIENCE,
            "return location.hash === '#/subscriptions/11111111-2222-3333-4444-555555555555' && (document.querySelector('h1') || { textContent: '' }).textContent.includes('11111111') && document.getElementById('scope-error').textContent === '';",
        )
        .await;

    let checks = session.execute_async(MODULE_CHECKS, vec![]).await;
    assert_eq!(checks["error"], Value::Null, "{checks}");
    assert_eq!(
        checks,
        json!({
            "timestamp": true,
            "durations": [62500, 93_600_000, true],
            "nodes": ["a:Succeeded", "b:Running", "c:Pending"],
            "columns": ["a0", "b1", "c2"],
            "waypoints": [0, 0, 1],
            "timeline": ["a:1000", "b:4000"],
            "lineDiff": [" x", "-y", "+Y", " z"],
            "driftColumn": ["modified", "inSync", "deleted"],
            "driftArticles": ["modified:- port=80,+ port=8080", "deleted:"],
            "injected": false,
            "markupShownAsText": true
        })
    );
    assert_clean_log(&session).await;

    session.goto(&format!("{}/ui/login", server.url)).await;
    session
        .wait_until(
            "the login page saying no token is needed",
            PAGE_PATIENCE,
            "return document.getElementById('login-open').hidden === false;",
        )
        .await;
    session.end().await;
}
