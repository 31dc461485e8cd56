//! Shared pieces of the command line tests that run `cairn` on the in-process engine: a data directory, a working
//! directory and the environment of its own per test.

use std::process::{Command, Stdio};

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
