//! Shared pieces of the `cairn serve` process tests: start the server on a free loopback port and learn its URL.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `cairn serve`, killed (SIGKILL) when dropped.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cairn serve` on 127.0.0.1:0 with a 3 s claim TTL (so a restart takes over quickly), the data directory and
/// the extension registry given.
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use both starters"
)]
pub fn start_server(data_dir: &Path, registry: &Path) -> Server {
    start_server_with(data_dir, registry, &[])
}

/// [`start_server`] with more `cairn serve` arguments (e.g. `--tokens FILE`).
pub fn start_server_with(data_dir: &Path, registry: &Path, extra: &[&OsStr]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--claim-ttl",
            "3",
            "--data-dir",
        ])
        .arg(data_dir)
        .arg("--extensions")
        .arg(registry)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cairn serve starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.split("listening on ").nth(1) {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
    let url = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("cairn serve prints its address");
    Server { child, url }
}

/// The `cairn` binary on a data directory and working directory of its own (in-process engine), for the command
/// line tests.
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them run commands in process"
)]
pub struct Cli {
    pub home: tempfile::TempDir,
    pub work: tempfile::TempDir,
    /// `PATH` for the command (tests put fake tools on it); `None` keeps the test's own.
    pub path: Option<std::ffi::OsString>,
}

#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them run commands in process"
)]
impl Cli {
    pub fn new() -> Cli {
        Cli {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            path: None,
        }
    }

    pub fn run(&self, args: &[&str]) -> std::process::Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
        command
            .args(args)
            .env("CAIRN_HOME", self.home.path())
            .env_remove("CAIRN_SERVER")
            .env_remove("CAIRN_TOKEN")
            .env_remove("CAIRN_EXTENSIONS")
            .env_remove("NO_COLOR")
            .current_dir(self.work.path())
            .stdin(Stdio::null());
        if let Some(path) = &self.path {
            command.env("PATH", path);
        }
        command.output().unwrap()
    }

    /// Runs and expects `code`; returns stdout.
    pub fn expect(&self, args: &[&str], code: i32) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "cairn {args:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs, expects exit 2, and returns stderr.
    pub fn usage_error(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "cairn {args:?}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let stdout = self.expect(args, 0);
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// Writes `text` to `name` in the working directory and returns its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.work.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}
