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
/// the extension registry given, and the Local extension allowed in the data directory's parent (the test's
/// temporary directory, where its Local roots live; the data directory itself stays out of reach).
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use both starters"
)]
pub fn start_server(data_dir: &Path, registry: &Path) -> Server {
    start_server_with(data_dir, registry, &[])
}

/// [`start_server`] with more `cairn serve` arguments (e.g. `--tokens FILE`).
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use every starter"
)]
pub fn start_server_with(data_dir: &Path, registry: &Path, extra: &[&OsStr]) -> Server {
    serve_with(|command| {
        command
            .args(["--listen", "127.0.0.1:0", "--claim-ttl", "3", "--data-dir"])
            .arg(data_dir)
            .arg("--extensions")
            .arg(registry)
            .arg("--local-root")
            .arg(data_dir.parent().expect("the data directory has a parent"))
            .args(extra);
    })
}

/// `cairn serve` on 127.0.0.1:0 with a 3 s claim TTL and `args` (which say where the store is), with `env` added
/// to its environment.
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them use every starter"
)]
pub fn start_serve(args: &[&OsStr], env: &[(&str, &OsStr)]) -> Server {
    serve_with(|command| {
        command
            .args(["--listen", "127.0.0.1:0", "--claim-ttl", "3"])
            .args(args)
            .envs(env.iter().copied());
    })
}

/// `cairn serve` with the arguments, environment and stderr `configure` gives it (stdout is read for the address;
/// a piped stderr is drained).
#[allow(
    dead_code,
    reason = "each test binary compiles this module; not all of them start servers their own way"
)]
pub fn serve_with(configure: impl FnOnce(&mut Command)) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
    command
        .arg("serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut command);
    let mut child = command.spawn().expect("cairn serve starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.split("listening on ").nth(1) {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
    }
    let url = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("cairn serve prints its address");
    Server { child, url }
}
