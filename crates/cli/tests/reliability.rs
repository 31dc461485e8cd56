//! The hostile-input corpus against a real `cairn serve` (issue 12): every case in `tests/reliability/*.json` is
//! sent over a raw HTTP/1.1 connection (raw, so paths keep their dot segments and encodings, and bodies can be
//! larger than the limit, chunked or only declared), and its answer is checked: the status, ARM's error shape
//! (`error.code`, `error.message`, `target`, `details`), for an accepted deployment the state and error it ends
//! with, that no file appeared where a case tried to write one, and that `/healthz` still answers. At the end the
//! server's peak resident memory (`VmHWM`) must stay under [`PEAK_RSS_BOUND`].
//!
//! A case file is a JSON array of cases; `tests/reliability/README.md` describes the fields and placeholders.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::start_server_with;
use serde::Deserialize;
use serde_json::{Value, json};

/// Peak resident memory the server may reach over the whole corpus. Measured (`VmHWM` of the debug build, as
/// this test prints it): 36 MiB idle, 110 MiB after the corpus. With the value budget raised to 1 GiB
/// (`--max-eval-value-bytes 1073741824 --max-eval-total-bytes 4294967296`) the corpus's doubling output alone
/// takes the server to 1.6 GB, so the bound catches an evaluation that escapes its budget while leaving room
/// for allocator and build differences.
const PEAK_RSS_BOUND: u64 = 512 * 1024 * 1024;

/// How long an accepted deployment may take to reach its terminal state.
const DEPLOYMENT_DEADLINE: Duration = Duration::from_secs(30);

const SUBSCRIPTION: &str = "00000000-0000-0000-0000-00000000000a";
/// The only subscription the scoped token may address.
const OTHER_SUBSCRIPTION: &str = "00000000-0000-0000-0000-00000000000b";
const RESOURCE_GROUP: &str = "rel";
const VALID_TOKEN: &str = "reliability-valid-token";
const SCOPED_TOKEN: &str = "reliability-scoped-token";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    method: String,
    /// Path and query as sent, placeholders expanded.
    path: String,
    #[serde(default)]
    auth: Auth,
    /// Replaces the `Authorization` header's value (placeholders expanded).
    authorization: Option<String>,
    /// A JSON body; placeholders in its strings are expanded.
    body: Option<Value>,
    /// A raw body, concatenated from text and repeated text.
    body_parts: Option<Vec<Part>>,
    #[serde(default)]
    chunked: bool,
    /// `Content-Length` to declare without sending a body (with `Expect: 100-continue` in `headers`).
    declared_length: Option<u64>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    expect: Expect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Auth {
    #[default]
    Valid,
    Scoped,
    None,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
enum Part {
    Text(String),
    Repeat {
        repeat: String,
        times: usize,
    },
    /// Bytes in hex, for bodies that are not UTF-8.
    Hex {
        hex: String,
    },
}

impl Part {
    fn bytes(&self, vars: &Vars) -> Vec<u8> {
        match self {
            Part::Text(text) => vars.expand(text).into_bytes(),
            Part::Repeat { repeat, times } => repeat.repeat(*times).into_bytes(),
            Part::Hex { hex } => (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex bytes"))
                .collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Expect {
    status: u16,
    /// Whether the answer is an ARM error body (default: for every status from 400 on).
    arm_error: Option<bool>,
    code: Option<String>,
    /// Substrings the message must contain.
    #[serde(default)]
    message: Vec<String>,
    target: Option<String>,
    /// The details, all of them, in order.
    details: Option<Vec<DetailExpect>>,
    /// For an accepted deployment: how it ends (polled with GET on the case's path).
    #[serde(rename = "final")]
    end: Option<End>,
    /// Paths relative to the Local extension's root that must not exist afterwards.
    #[serde(default)]
    absent: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DetailExpect {
    code: String,
    target: Option<String>,
    #[serde(default)]
    message: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct End {
    provisioning_state: String,
    code: String,
    details: Option<Vec<DetailExpect>>,
}

/// What placeholders expand to.
struct Vars {
    root: String,
}

impl Vars {
    /// Expands `${SUB}`, `${OTHER_SUB}`, `${RG}` (the resource group's path), `${ROOT}` (the Local extension's
    /// root directory), `${repeat:N:TEXT}` (TEXT, which holds no `}`, N times) and `${each:N:TEXT}` (TEXT N times,
    /// `#` replaced by 0, 1, ... N-1).
    fn expand(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .unwrap_or_else(|| panic!("unclosed placeholder in {text:?}"));
            let name = &after[..end];
            match name {
                "SUB" => out.push_str(SUBSCRIPTION),
                "OTHER_SUB" => out.push_str(OTHER_SUBSCRIPTION),
                "RG" => out.push_str(&format!(
                    "/subscriptions/{SUBSCRIPTION}/resourcegroups/{RESOURCE_GROUP}"
                )),
                "ROOT" => out.push_str(&self.root),
                _ => {
                    let (kind, rest) = name
                        .split_once(':')
                        .unwrap_or_else(|| panic!("unknown placeholder ${{{name}}}"));
                    let (times, repeated) = rest
                        .split_once(':')
                        .unwrap_or_else(|| panic!("${{{kind}:N:TEXT}} expected, got ${{{name}}}"));
                    let times: usize = times.parse().expect("a repeat count");
                    match kind {
                        "repeat" => out.push_str(&repeated.repeat(times)),
                        "each" => {
                            for i in 0..times {
                                out.push_str(&repeated.replace('#', &i.to_string()));
                            }
                        }
                        _ => panic!("unknown placeholder ${{{name}}}"),
                    }
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    fn expand_json(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.expand(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.expand_json(v)).collect())
            }
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (self.expand(k), self.expand_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// One HTTP answer.
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        text.chars().take(2000).collect()
    }
}

/// A request as sent on the wire.
struct RawRequest<'a> {
    method: &'a str,
    path: &'a str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    chunked: bool,
    declared_length: Option<u64>,
}

impl<'a> RawRequest<'a> {
    fn new(method: &'a str, path: &'a str) -> Self {
        RawRequest {
            method,
            path,
            headers: Vec::new(),
            body: Vec::new(),
            chunked: false,
            declared_length: None,
        }
    }

    fn bearer(mut self, token: &str) -> Self {
        self.headers
            .push(("Authorization".into(), format!("Bearer {token}")));
        self
    }

    /// Sends the request on a fresh connection (`Connection: close`) and reads the answer to the end.
    fn send(&self, addr: &str) -> std::io::Result<Answer> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.set_write_timeout(Some(Duration::from_secs(60)))?;
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n",
            self.method, self.path
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if self.chunked {
            head.push_str("Transfer-Encoding: chunked\r\n");
        } else {
            let length = self.declared_length.unwrap_or(self.body.len() as u64);
            head.push_str(&format!("Content-Length: {length}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        // The server may answer (413) before reading everything; a failed write still leaves its answer to read.
        let _ = if self.chunked {
            self.write_chunked(&mut stream)
        } else {
            stream.write_all(&self.body)
        };
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw)?;
        parse_answer(&raw)
    }

    fn write_chunked(&self, stream: &mut TcpStream) -> std::io::Result<()> {
        for chunk in self.body.chunks(64 * 1024) {
            stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())?;
            stream.write_all(chunk)?;
            stream.write_all(b"\r\n")?;
        }
        stream.write_all(b"0\r\n\r\n")
    }
}

fn invalid_data(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// Parses an HTTP/1.1 answer read to the end of the connection, skipping interim (1xx) answers.
fn parse_answer(mut raw: &[u8]) -> std::io::Result<Answer> {
    loop {
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| {
                invalid_data(format!(
                    "no complete answer head in {} bytes: {:?}",
                    raw.len(),
                    String::from_utf8_lossy(&raw[..raw.len().min(200)])
                ))
            })?;
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let rest = &raw[split + 4..];
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid_data(format!("no status line in {head:?}")))?;
        if (100..200).contains(&status) {
            raw = rest;
            continue;
        }
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            decode_chunked(rest)?
        } else {
            rest.to_vec()
        };
        return Ok(Answer {
            status,
            headers,
            body,
        });
    }
}

fn decode_chunked(mut raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| invalid_data("a chunk size line is cut off".into()))?;
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| invalid_data(format!("bad chunk size {size_text:?}")))?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = raw
            .get(..size)
            .ok_or_else(|| invalid_data("a chunk is cut off".into()))?;
        body.extend_from_slice(chunk);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
}

fn load_cases() -> Vec<(String, Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reliability");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the case directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension() == Some(OsStr::new("json")))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed: Vec<Case> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        cases.extend(parsed.into_iter().map(|c| (stem.clone(), c)));
    }
    cases
}

/// The checks of one detail list against the expected one: same count, and each detail in order has the code,
/// target and message parts expected.
fn check_details(context: &str, actual: &Value, expected: &[DetailExpect]) {
    let actual = actual.as_array().cloned().unwrap_or_default();
    assert_eq!(
        actual.len(),
        expected.len(),
        "{context}: details {}",
        Value::Array(actual.clone())
    );
    for (got, want) in actual.iter().zip(expected) {
        assert_eq!(got["code"], want.code.as_str(), "{context}: detail {got}");
        check_message(context, got, &want.message);
        if let Some(target) = &want.target {
            assert_eq!(got["target"], target.as_str(), "{context}: detail {got}");
        }
    }
}

fn check_message(context: &str, error: &Value, parts: &[String]) {
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty(),
        "{context}: an error needs a message: {error}"
    );
    for part in parts {
        assert!(
            message.contains(part.as_str()),
            "{context}: the message lacks {part:?}: {message}"
        );
    }
}

fn check_answer(context: &str, expect: &Expect, answer: &Answer) {
    assert_eq!(
        answer.status,
        expect.status,
        "{context}: status; body {}",
        answer.text()
    );
    let arm_error = expect.arm_error.unwrap_or(expect.status >= 400);
    let body = answer.json();
    if !arm_error {
        if expect.status >= 400 {
            assert!(
                answer.body.is_empty(),
                "{context}: the answer comes from the HTTP layer with no body: {}",
                answer.text()
            );
        } else {
            assert!(
                body.get("error").is_none(),
                "{context}: a success carries no error: {body}"
            );
        }
        return;
    }
    assert!(
        answer
            .headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{context}: an ARM error is JSON: {:?}",
        answer.headers
    );
    let error = &body["error"];
    let code = expect
        .code
        .as_deref()
        .unwrap_or_else(|| panic!("{context}: an error case names its code"));
    assert_eq!(
        error["code"],
        code,
        "{context}: error code; body {}",
        answer.text()
    );
    check_message(context, error, &expect.message);
    if let Some(target) = &expect.target {
        assert_eq!(error["target"], target.as_str(), "{context}: {error}");
    }
    if let Some(details) = &expect.details {
        check_details(context, &error["details"], details);
    }
}

/// Polls the deployment at `path` until it ends, then checks its state and error.
fn check_end(context: &str, addr: &str, path: &str, end: &End) {
    let started = Instant::now();
    let properties = loop {
        let answer = RawRequest::new("GET", path)
            .bearer(VALID_TOKEN)
            .send(addr)
            .unwrap_or_else(|e| panic!("{context}: GET the deployment: {e}"));
        assert_eq!(answer.status, 200, "{context}: GET {}", answer.text());
        let properties = answer.json()["properties"].clone();
        let state = properties["provisioningState"].as_str().unwrap_or_default();
        if ["Succeeded", "Failed", "Canceled"].contains(&state) {
            break properties;
        }
        assert!(
            started.elapsed() < DEPLOYMENT_DEADLINE,
            "{context}: still {state} after {DEPLOYMENT_DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        properties["provisioningState"],
        end.provisioning_state.as_str(),
        "{context}: {properties}"
    );
    let error = &properties["error"];
    assert_eq!(
        error["code"],
        end.code.as_str(),
        "{context}: final error {error}"
    );
    check_message(context, error, &[]);
    if let Some(details) = &end.details {
        check_details(context, &error["details"], details);
    }
}

fn check_healthy(context: &str, addr: &str) {
    let answer = RawRequest::new("GET", "/healthz")
        .send(addr)
        .unwrap_or_else(|e| panic!("{context}: /healthz afterwards: {e}"));
    assert_eq!(answer.status, 200, "{context}: /healthz afterwards");
    assert_eq!(answer.json(), json!({ "status": "Healthy" }), "{context}");
}

/// `VmHWM` of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib * 1024
}

fn run_case(addr: &str, vars: &Vars, file: &str, case: &Case) {
    let context = format!("{file}: {}", case.name);
    let path = vars.expand(&case.path);
    let mut request = RawRequest::new(&case.method, &path);
    match (&case.authorization, &case.auth) {
        (Some(value), _) => request
            .headers
            .push(("Authorization".into(), vars.expand(value))),
        (None, Auth::Valid) => request = request.bearer(VALID_TOKEN),
        (None, Auth::Scoped) => request = request.bearer(SCOPED_TOKEN),
        (None, Auth::None) => {}
    }
    if case.body.is_some() || case.body_parts.is_some() {
        request
            .headers
            .push(("Content-Type".into(), "application/json".into()));
    }
    for (name, value) in &case.headers {
        request.headers.push((name.clone(), vars.expand(value)));
    }
    request.body = match (&case.body, &case.body_parts) {
        (Some(body), None) => vars.expand_json(body).to_string().into_bytes(),
        (None, Some(parts)) => parts.iter().flat_map(|p| p.bytes(vars)).collect(),
        (None, None) => Vec::new(),
        (Some(_), Some(_)) => panic!("{context}: body or bodyParts, not both"),
    };
    request.chunked = case.chunked;
    request.declared_length = case.declared_length;
    let answer = request
        .send(addr)
        .unwrap_or_else(|e| panic!("{context}: no answer: {e}"));
    check_answer(&context, &case.expect, &answer);
    if let Some(end) = &case.expect.end {
        check_end(&context, addr, &path, end);
    }
    for relative in &case.expect.absent {
        let file = Path::new(&vars.root).join(relative);
        assert!(!file.exists(), "{context}: {} was written", file.display());
    }
    check_healthy(&context, addr);
}

#[test]
fn the_hostile_input_corpus_gets_arm_errors_and_the_server_stays_up_and_bounded() {
    let cases = load_cases();
    assert!(cases.len() >= 40, "the corpus has {} cases", cases.len());

    let dir = tempfile::tempdir().unwrap();
    // The Local extension's root sits two levels down, so `../..` from it stays inside the temporary directory.
    let root = dir.path().join("files/root");
    std::fs::create_dir_all(&root).unwrap();
    let registry = dir.path().join("extensions.json");
    std::fs::write(&registry, r#"{ "extensions": [] }"#).unwrap();
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(
        &tokens,
        format!("{VALID_TOKEN}\n{SCOPED_TOKEN} /subscriptions/{OTHER_SUBSCRIPTION}\n"),
    )
    .unwrap();
    let server = start_server_with(
        &dir.path().join("data"),
        &registry,
        &[OsStr::new("--tokens"), tokens.as_os_str()],
    );
    let addr = server
        .url
        .strip_prefix("http://")
        .expect("plain HTTP")
        .to_string();
    let vars = Vars {
        root: root.to_str().unwrap().to_string(),
    };

    let group_path = vars.expand("${RG}?api-version=2025-04-01");
    let mut create_group = RawRequest::new("PUT", &group_path).bearer(VALID_TOKEN);
    create_group
        .headers
        .push(("Content-Type".into(), "application/json".into()));
    create_group.body = br#"{"location": "local"}"#.to_vec();
    let created = create_group.send(&addr).unwrap();
    assert_eq!(created.status, 201, "{}", created.text());

    // Every case runs, and the failures are listed together (each one's panic message is printed as it fails).
    let started = Instant::now();
    let failed: Vec<String> = cases
        .iter()
        .filter(|(file, case)| {
            std::panic::catch_unwind(AssertUnwindSafe(|| run_case(&addr, &vars, file, case)))
                .is_err()
        })
        .map(|(file, case)| format!("{file}: {}", case.name))
        .collect();
    assert!(failed.is_empty(), "failed cases: {failed:#?}");
    let peak = peak_rss(server.child.id());
    eprintln!(
        "{} cases in {:?}; peak RSS of cairn serve: {} MiB",
        cases.len(),
        started.elapsed(),
        peak / (1024 * 1024)
    );
    assert!(
        peak < PEAK_RSS_BOUND,
        "peak RSS {peak} bytes is over the bound of {PEAK_RSS_BOUND}"
    );
}

#[test]
fn placeholders_expand_and_unknown_ones_are_refused() {
    let vars = Vars { root: "/r".into() };
    assert_eq!(
        vars.expand("${RG}/x${repeat:3:ab}-${ROOT}${each:3:,v#}"),
        format!("/subscriptions/{SUBSCRIPTION}/resourcegroups/rel/xababab-/r,v0,v1,v2")
    );
    let unknown = std::panic::catch_unwind(|| vars.expand("${NOPE}"));
    assert!(unknown.is_err());
}

#[test]
fn answers_are_parsed_with_interim_answers_and_chunked_bodies() {
    let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 413 Payload Too Large\r\nTransfer-Encoding: chunked\r\n\
                Content-Type: application/json\r\n\r\n3\r\n{\"a\r\n5\r\n\":1}\n\r\n0\r\n\r\n";
    let answer = parse_answer(raw).unwrap();
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json(), json!({ "a": 1 }));
    assert!(parse_answer(b"HTTP/1.1 200 OK\r\n").is_err());
}
