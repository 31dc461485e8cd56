//! The documentation as tests: every shell block of README.md, examples/*/README.md and docs/cli.md runs,
//! command by command and in order, with the `cairn` this build made first on `PATH`, a fresh `CAIRN_HOME` per
//! document and a copy of `examples/` as the working tree, so that a document drifting from the code fails here. A command
//! must exit 0; the comment lines indented under a command (`#   ~ Local File ...`) are output it must print
//! (`...` stands for any text), and such a command prints no diagnostic (`warning[Code]: ...`) they do not show. What cannot run in a test says so in the document, in an HTML comment before the
//! block (`<!-- docs-test: ... -->`):
//!
//! - `skip — reason`: the block is not run;
//! - `skip-command PREFIX — reason`: the block's commands starting with PREFIX are not run;
//! - `free-port ADDRESS`: ADDRESS (e.g. `127.0.0.1:8080`) is replaced by a free loopback address from here on,
//!   and a command started in the background (`... &`) is waited for until it listens there;
//! - `postgresql`: the document needs a PostgreSQL server: a throwaway one (`cairn-testpg`) is started, its host,
//!   port and superuser are written into the copy's `examples/postgresql/main.parameters.json` and its password
//!   replaces `'the admin password'`.
//!
//! Also here: `examples/quickstart/run.sh` with an installed binary (`CAIRN=cairn`).

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A document's runnable content: its shell commands with the directives that apply to them.
#[derive(Debug, Default)]
struct Walkthrough {
    commands: Vec<Step>,
    /// Blocks or commands the document marks as not run, with the reason (so the test can show them).
    skipped: Vec<String>,
    free_port: Option<String>,
    postgresql: bool,
}

#[derive(Debug)]
struct Step {
    /// The command as the shell reads it (continuation lines joined).
    command: String,
    /// Output lines it must print, split at `...`.
    expected: Vec<Vec<String>>,
    /// Where it is in the document, for failures.
    line: usize,
}

/// Reads the `sh` blocks and `docs-test` directives of a Markdown document.
fn parse(markdown: &str) -> Walkthrough {
    let mut walkthrough = Walkthrough::default();
    let mut skip_block: Option<String> = None;
    let mut skip_prefixes: Vec<String> = Vec::new();
    let mut lines = markdown.lines().enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(directive) = trimmed
            .strip_prefix("<!-- docs-test:")
            .and_then(|rest| rest.strip_suffix("-->"))
        {
            let directive = directive.trim();
            let (word, rest) = directive.split_once(' ').unwrap_or((directive, ""));
            match word {
                "skip" => skip_block = Some(rest.trim().trim_start_matches('—').trim().to_owned()),
                "skip-command" => {
                    let prefix = rest.split(" — ").next().unwrap_or_default().trim();
                    assert!(
                        !prefix.is_empty(),
                        "line {}: skip-command needs a prefix",
                        index + 1
                    );
                    skip_prefixes.push(prefix.trim_matches('`').to_owned());
                }
                "free-port" => walkthrough.free_port = Some(rest.trim().to_owned()),
                "postgresql" => walkthrough.postgresql = true,
                other => panic!("line {}: unknown docs-test directive {other:?}", index + 1),
            }
            continue;
        }
        let Some(language) = trimmed.strip_prefix("```") else {
            continue;
        };
        let shell = matches!(language, "sh" | "bash" | "shell" | "console");
        let mut block: Vec<(usize, String)> = Vec::new();
        for (index, line) in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            block.push((index + 1, line.to_owned()));
        }
        if !shell {
            skip_block = None;
            skip_prefixes.clear();
            continue;
        }
        if let Some(reason) = skip_block.take() {
            walkthrough.skipped.push(format!(
                "block at line {}: {reason}",
                block.first().map_or(index + 1, |(line, _)| *line)
            ));
            skip_prefixes.clear();
            continue;
        }
        let mut pending: Option<Step> = None;
        let mut continued = false;
        for (line_number, text) in block {
            if continued {
                let step = pending.as_mut().expect("a continued command");
                step.command.push('\n');
                step.command.push_str(&text);
                continued = text.trim_end().ends_with('\\');
                continue;
            }
            let trimmed = text.trim_start();
            if trimmed.is_empty() {
                continue;
            }
            if let Some(comment) = trimmed.strip_prefix('#') {
                // `#   text`: output of the command above; any other comment is prose.
                if comment.starts_with("   ")
                    && let Some(step) = pending.as_mut()
                {
                    step.expected.push(
                        comment
                            .trim()
                            .split("...")
                            .map(str::to_owned)
                            .filter(|part| !part.is_empty())
                            .collect(),
                    );
                }
                continue;
            }
            if let Some(step) = pending.take() {
                walkthrough.commands.push(step);
            }
            if let Some(prefix) = skip_prefixes
                .iter()
                .find(|p| trimmed.starts_with(p.as_str()))
            {
                walkthrough
                    .skipped
                    .push(format!("line {line_number}: {prefix}"));
                continue;
            }
            continued = trimmed.trim_end().ends_with('\\');
            pending = Some(Step {
                command: trimmed.to_owned(),
                expected: Vec::new(),
                line: line_number,
            });
        }
        if let Some(step) = pending.take() {
            walkthrough.commands.push(step);
        }
        skip_prefixes.clear();
    }
    walkthrough
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A directory holding `cairn`, a link to the binary under test, to put first on `PATH`.
fn bin_dir(temp: &Path) -> PathBuf {
    let bin = temp.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_cairn"), bin.join("cairn")).unwrap();
    bin
}

fn free_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Runs a document's commands in a shell each, carrying the working directory and exported variables from one
/// to the next, as a reader typing them would.
struct Session {
    temp: tempfile::TempDir,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
    background: Vec<Child>,
    substitutions: Vec<(String, String)>,
    /// The free address in place of the document's (`free-port`), where a background command must listen.
    listen: Option<String>,
}

impl Session {
    fn new() -> Session {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("repo");
        copy_dir(&repo_root().join("examples"), &root.join("examples"));
        let home = temp.path().join("cairn-home");
        let bin = bin_dir(temp.path());
        let mut env = BTreeMap::new();
        for key in ["HOME", "USER", "LANG", "TMPDIR"] {
            if let Ok(value) = std::env::var(key) {
                env.insert(key.to_owned(), value);
            }
        }
        env.insert(
            "PATH".to_owned(),
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
        env.insert("CAIRN_HOME".to_owned(), home.display().to_string());
        Session {
            cwd: root,
            env,
            background: Vec::new(),
            substitutions: Vec::new(),
            listen: None,
            temp,
        }
    }

    fn root(&self) -> PathBuf {
        self.temp.path().join("repo")
    }

    fn run(&mut self, document: &str, step: &Step) {
        let mut command = step.command.clone();
        for (from, to) in &self.substitutions {
            command = command.replace(from, to);
        }
        let state = self.temp.path().join("state");
        std::fs::create_dir_all(&state).unwrap();
        if let Some(foreground) = command.trim_end().strip_suffix('&') {
            // Started and left running, its output to a file (a pipe would keep the shell's output open).
            let log = state.join(format!("background-{}.log", step.line));
            let child = Command::new("bash")
                .arg("-c")
                .arg(format!("exec {foreground} >'{}' 2>&1", log.display()))
                .current_dir(&self.cwd)
                .env_clear()
                .envs(&self.env)
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            self.background.push(child);
            if let Some(address) = &self.listen {
                let deadline = Instant::now() + Duration::from_secs(30);
                while std::net::TcpStream::connect(address).is_err() {
                    assert!(
                        Instant::now() < deadline,
                        "{document}:{}: `{command}` did not listen on {address}: {}",
                        step.line,
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            return;
        }
        let script = format!(
            "{command}\n__status=$?\npwd > '{cwd}'\nenv -0 > '{env}'\nexit $__status\n",
            cwd = state.join("cwd").display(),
            env = state.join("env").display()
        );
        let started = Instant::now();
        let output = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{document}:{}: `{command}` failed after {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            step.line,
            started.elapsed()
        );
        let matches = |line: &str, expected: &[String]| {
            let mut rest = line;
            expected.iter().all(|part| match rest.find(part.as_str()) {
                Some(at) => {
                    rest = &rest[at + part.len()..];
                    true
                }
                None => false,
            })
        };
        for expected in &step.expected {
            let found = stdout
                .lines()
                .chain(stderr.lines())
                .any(|line| matches(line, expected));
            assert!(
                found,
                "{document}:{}: `{command}` did not print {expected:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                step.line
            );
        }
        // A command shown with its output shows every diagnostic it prints (`warning[Code]: ...`): a plan the
        // document calls clean is clean.
        if !step.expected.is_empty() {
            for line in stdout.lines().chain(stderr.lines()) {
                let diagnostic = ["info[", "warning[", "error["]
                    .iter()
                    .any(|level| line.starts_with(level));
                assert!(
                    !diagnostic || step.expected.iter().any(|expected| matches(line, expected)),
                    "{document}:{}: `{command}` printed a diagnostic the document does not show: {line}",
                    step.line
                );
            }
        }
        self.cwd = PathBuf::from(
            std::fs::read_to_string(state.join("cwd"))
                .unwrap()
                .trim_end_matches('\n'),
        );
        self.env = std::fs::read(state.join("env"))
            .unwrap()
            .split(|byte| *byte == 0)
            .filter_map(|entry| {
                let entry = String::from_utf8_lossy(entry);
                let (key, value) = entry.split_once('=')?;
                // The shell's own bookkeeping, not the reader's.
                (!matches!(key, "_" | "SHLVL" | "PWD" | "OLDPWD" | "__status"))
                    .then(|| (key.to_owned(), value.to_owned()))
            })
            .collect();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for child in &mut self.background {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs a document; returns the session (its temporary tree) for further checks.
fn walk(document: &str, prepare: impl FnOnce(&mut Session, &Walkthrough)) -> Session {
    let text = std::fs::read_to_string(repo_root().join(document)).unwrap();
    let walkthrough = parse(&text);
    let mut session = Session::new();
    if let Some(address) = &walkthrough.free_port {
        let free = free_address();
        session.substitutions.push((address.clone(), free.clone()));
        session.listen = Some(free);
    }
    prepare(&mut session, &walkthrough);
    eprintln!(
        "{document}: {} commands; not run: {:?}",
        walkthrough.commands.len(),
        walkthrough.skipped
    );
    for step in &walkthrough.commands {
        session.run(document, step);
    }
    session
}

#[test]
fn the_readme_runs_as_written() {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let walkthrough = parse(&text);
    // The quick start, the three "Next steps" and the server; not the install step or the test suite.
    assert!(walkthrough.commands.len() >= 12, "{walkthrough:#?}");
    assert!(
        walkthrough
            .skipped
            .iter()
            .any(|skipped| skipped.contains("cargo install"))
    );
    let session = walk("README.md", |_, _| {});
    let site = session.root().join("examples/quickstart/out");
    // The stack renamed the site and its delete removed everything it made, the quick start's files included.
    assert!(!site.join("hello").exists() && !site.join("hola").exists());
}

#[test]
fn the_postgresql_example_runs_as_written_on_a_fresh_server() {
    let server = cairn_testpg::TestPostgres::start();
    let walkthrough =
        parse(&std::fs::read_to_string(repo_root().join("examples/postgresql/README.md")).unwrap());
    assert!(walkthrough.postgresql);
    walk("examples/postgresql/README.md", |session, _| {
        let parameters = session
            .root()
            .join("examples/postgresql/main.parameters.json");
        let mut file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&parameters).unwrap()).unwrap();
        let pg = &mut file["extensionConfigs"]["pg"];
        pg["host"]["value"] = server.host().into();
        pg["port"]["value"] = server.port().into();
        pg["username"]["value"] = server.superuser().into();
        std::fs::write(&parameters, serde_json::to_string_pretty(&file).unwrap()).unwrap();
        session.substitutions.push((
            "'the admin password'".to_owned(),
            format!("'{}'", server.password()),
        ));
    });
}

/// docs/cli.md's opening walkthrough (from `examples/quickstart`); its other blocks say why they are not run.
#[test]
fn the_cli_guide_runs_as_written() {
    let walkthrough = parse(&std::fs::read_to_string(repo_root().join("docs/cli.md")).unwrap());
    assert!(walkthrough.commands.len() >= 5, "{walkthrough:#?}");
    walk("docs/cli.md", |_, _| {});
}

#[test]
fn every_example_readme_is_run_or_says_why_not() {
    for entry in std::fs::read_dir(repo_root().join("examples")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        let Ok(text) = std::fs::read_to_string(&readme) else {
            continue;
        };
        let walkthrough = parse(&text);
        let name = readme
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        match name.as_str() {
            "postgresql" => assert!(!walkthrough.commands.is_empty()),
            // Needs a Kubernetes cluster and kubectl; the stack of the same shape runs against a real API server in
            // crates/stack-service/tests.
            "kubernetes" => {
                assert!(walkthrough.commands.is_empty() && !walkthrough.skipped.is_empty())
            }
            other => panic!("examples/{other}/README.md has no walkthrough test here: add one"),
        }
    }
}

/// `CAIRN=cairn ./examples/quickstart/run.sh`, as the README gives it, deploys the quick start as the deployment
/// `main` that "Next steps" then uses.
#[test]
fn the_quickstart_script_runs_with_an_installed_binary() {
    let temp = tempfile::tempdir().unwrap();
    let example = temp.path().join("quickstart");
    copy_dir(&repo_root().join("examples/quickstart"), &example);
    let bin = bin_dir(temp.path());
    let home = temp.path().join("cairn-home");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("sh")
        .arg(example.join("run.sh"))
        .env("CAIRN", "cairn")
        .env("CAIRN_HOME", &home)
        .env("PATH", &path)
        .env_remove("CAIRN_SERVER")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("run.sh did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    assert!(
        status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(example.join("out/hello/index.html").is_file());
    let shown = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .env("CAIRN_HOME", &home)
        .env_remove("CAIRN_SERVER")
        .args([
            "deployment",
            "group",
            "show",
            "-g",
            "quickstart",
            "-n",
            "main",
            "--query",
            "name",
            "-o",
            "tsv",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&shown.stdout).trim(),
        "main",
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
}
