//! A small W3C WebDriver client over reqwest, enough to drive headless Chromium through `chromedriver`: sessions,
//! navigation, elements by CSS selector, clicks, typing, key presses, scripts, screenshots and the browser's log.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key W3C WebDriver names an element reference by.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Keys as WebDriver codes them.
pub const TAB: &str = "\u{E004}";
pub const ENTER: &str = "\u{E007}";

/// `name` on `PATH`, if there.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| candidate.is_file())
}

/// The Chromium binary and its driver, or a failure naming the Debian packages to install.
pub fn find_browser() -> (PathBuf, PathBuf) {
    let chromium = ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| on_path(name));
    let driver = on_path("chromedriver");
    match (chromium, driver) {
        (Some(chromium), Some(driver)) => (chromium, driver),
        (chromium, driver) => panic!(
            "the browser tests need headless Chromium and its WebDriver: install the Debian packages `chromium` and \
             `chromium-driver` (apt-get install -y chromium chromium-driver; scripts/test.sh installs them when run \
             as root). Missing: {}",
            [
                chromium.is_none().then_some("chromium"),
                driver
                    .is_none()
                    .then_some("chromedriver (package chromium-driver)"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        ),
    }
}

/// A running `chromedriver` in a process group of its own, killed with its browsers when dropped.
pub struct Driver {
    child: Child,
    base: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    /// Ends chromedriver and every browser it started: they share its process group (a browser outlives a killed
    /// driver otherwise, and a test that failed mid-way never ended its session).
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free local port")
}

impl Driver {
    /// Starts `driver` on a free port and waits until it is ready.
    pub async fn start(driver: &Path) -> Self {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", driver.display()));
        let this = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        };
        let started = Instant::now();
        loop {
            let ready = this
                .http
                .get(format!("{}/status", this.base))
                .send()
                .await
                .ok()
                .filter(|answer| answer.status().is_success());
            if let Some(answer) = ready {
                let status: Value = answer.json().await.unwrap_or_default();
                if status["value"]["ready"] == true {
                    return this;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless Chromium session with a window of `width` × `height` and its own profile in `profile`.
    pub async fn session(
        &self,
        chromium: &Path,
        profile: &Path,
        width: u32,
        height: u32,
    ) -> Session {
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--force-device-scale-factor=1",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ]
            },
            "goog:loggingPrefs": { "browser": "ALL" }
        }}});
        let answer = send(
            &self.http,
            reqwest::Method::POST,
            &format!("{}/session", self.base),
            Some(capabilities),
        )
        .await;
        let id = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Session {
            http: self.http.clone(),
            url: format!("{}/session/{id}", self.base),
        }
    }
}

/// One WebDriver command; the answer's `value`, or a panic with WebDriver's error.
async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Value {
    let mut request = http.request(method.clone(), url);
    if let Some(body) = body {
        request = request.json(&body);
    } else if method == reqwest::Method::POST {
        request = request.json(&json!({}));
    }
    let answer = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("WebDriver {method} {url}: {e}"));
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or_default();
    assert!(
        status.is_success(),
        "WebDriver {method} {url}: {status} {}",
        body["value"]
    );
    body["value"].clone()
}

/// A browser session; end it with [`Session::end`] (a drop cannot wait for the driver to answer).
pub struct Session {
    http: reqwest::Client,
    url: String,
}

/// An element of the current page.
#[derive(Clone, Debug)]
pub struct Element(String);

impl Session {
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        send(&self.http, method, &format!("{}{path}", self.url), body).await
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns what it returns.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// Runs `script` asynchronously: it ends by calling `arguments[arguments.length - 1]` with its result (so it
    /// may await promises, such as a module's dynamic import).
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// The elements matching `css` (possibly none).
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        self.command(
            reqwest::Method::POST,
            "/elements",
            Some(json!({ "using": "css selector", "value": css })),
        )
        .await
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|element| {
            element[ELEMENT_KEY]
                .as_str()
                .map(|id| Element(id.to_owned()))
        })
        .collect()
    }

    /// Polls `script` (returning a truthy value when the page is as wanted) until it holds or `timeout` passes;
    /// returns its last value. A failure names `what` and what the page showed.
    pub async fn wait_until(&self, what: &str, timeout: Duration, script: &str) -> Value {
        let started = Instant::now();
        loop {
            let value = self.execute(script, vec![]).await;
            let done = match &value {
                Value::Bool(b) => *b,
                Value::Null => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if done {
                return value;
            }
            if started.elapsed() > timeout {
                let page = self
                    .execute(
                        "return location.href + '\\n' + document.body.innerText.slice(0, 3000);",
                        vec![],
                    )
                    .await;
                panic!(
                    "waited {timeout:?} for {what}; the page shows:\n{}",
                    page.as_str().unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The first element matching `css`, waiting for it up to `timeout`.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Element {
        let started = Instant::now();
        loop {
            if let Some(element) = self.find_all(css).await.into_iter().next() {
                return element;
            }
            assert!(
                started.elapsed() < timeout,
                "no element matches {css} after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, element: &Element) {
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/click", element.0),
            None,
        )
        .await;
    }

    pub async fn clear(&self, element: &Element) {
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/clear", element.0),
            None,
        )
        .await;
    }

    /// Types `text` into `element` (WebDriver key codes such as [`ENTER`] included).
    pub async fn type_into(&self, element: &Element, text: &str) {
        self.command(
            reqwest::Method::POST,
            &format!("/element/{}/value", element.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Presses and releases `key` on whatever has the focus, as a keyboard user would.
    pub async fn press(&self, key: &str) {
        self.command(
            reqwest::Method::POST,
            "/actions",
            Some(
                json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": [
                    { "type": "keyDown", "value": key }, { "type": "keyUp", "value": key }
                ]}]}),
            ),
        )
        .await;
        self.command(reqwest::Method::DELETE, "/actions", None)
            .await;
    }

    /// Saves a PNG of the viewport to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let encoded = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let bytes = data_encoding::BASE64
            .decode(encoded.as_str().unwrap_or_default().as_bytes())
            .expect("a base64 screenshot");
        std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Sets the window's size (a taller window shows a whole page in one screenshot).
    pub async fn resize(&self, width: u32, height: u32) {
        self.command(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        )
        .await;
    }

    /// The browser's console and network log since the last call (chromedriver's log endpoint).
    pub async fn browser_log(&self) -> Vec<Value> {
        self.command(
            reqwest::Method::POST,
            "/se/log",
            Some(json!({ "type": "browser" })),
        )
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
    }

    pub async fn end(self) {
        self.command(reqwest::Method::DELETE, "", None).await;
    }
}
