//! `cairn` on a terminal: each test runs the binary on a pseudo-terminal (stdin, stdout and stderr on its
//! slave side, the test typing and reading on the master side) and checks what a person sees there: the coloured
//! plan, the confirmation prompt answered n and y, and the live progress view redrawn in place; and that
//! `NO_COLOR` turns the colours off.
#![cfg(unix)]

mod in_process;

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use in_process::Cli;
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use serde_json::{Value, json};

/// How long a test waits for text to appear on the terminal.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `cairn` process on a pseudo-terminal.
struct Terminal {
    master: File,
    screen: Arc<Mutex<Vec<u8>>>,
    child: Child,
}

impl Terminal {
    /// Runs `cairn args` on a new 40x160 pseudo-terminal, in `cli`'s home and working directory, with `env`.
    fn run(cli: &Cli, args: &[&str], env: &[(&str, &str)]) -> Terminal {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .expect("a pseudo-terminal");
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let slave_path = ptsname(&master, Vec::new()).unwrap();
        let size = rustix::termios::Winsize {
            ws_row: 40,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, size).unwrap();
        let slave = File::options()
            .read(true)
            .write(true)
            .open(slave_path.to_str().unwrap())
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_cairn"));
        command
            .args(args)
            .env("CAIRN_HOME", cli.home.path())
            .env("TERM", "xterm")
            .env_remove("CAIRN_SERVER")
            .env_remove("CAIRN_TOKEN")
            .env_remove("CAIRN_EXTENSIONS")
            .env_remove("NO_COLOR")
            .current_dir(cli.work.path())
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        for (key, value) in env {
            command.env(key, value);
        }
        // The slave's copies go with `command`: once the child exits, reading the master ends.
        let child = command.spawn().unwrap();
        drop(command);
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Linux answers EIO once the slave side is closed.
            while let Ok(n) = reader.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        Terminal {
            master,
            screen,
            child,
        }
    }

    /// Everything shown so far, with the terminal's `\r\n` as `\n`.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).replace("\r\n", "\n")
    }

    /// Waits until `text` is on the screen; the screen so far.
    fn wait_for(&self, text: &str) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "`{text}` did not appear; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types `line` and Enter.
    fn answer(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }

    /// Waits for the process to end; its status and the whole screen.
    fn finish(mut self) -> (ExitStatus, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!("cairn did not end; the screen:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // What the child wrote last reaches the master after it exits.
        std::thread::sleep(Duration::from_millis(200));
        (status, self.screen())
    }
}

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// Local files NAME.txt holding `content`, one per name, in a 2.0 template.
fn files_template(names: &[&str], content: &str) -> String {
    let resources: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                json!({"extension": "local", "type": "File", "apiVersion": "1.0.0",
                       "properties": {"path": format!("{n}.txt"), "content": content}}),
            )
        })
        .collect();
    json!({
        "$schema": SCHEMA, "languageVersion": "2.0", "contentVersion": "1.0.0.0",
        "extensions": {"local": {"name": "Local", "version": "1.0.0"}},
        "resources": resources
    })
    .to_string()
}

/// Group `rg`, `params.json` (the Local extension on `./files`), `ab.json` (files a, b) and `ac.json` (a, c).
fn setup() -> Cli {
    let cli = Cli::new();
    cli.expect(
        &["group", "create", "-n", "rg", "-l", "local", "-o", "none"],
        0,
    );
    cli.write(
        "params.json",
        &json!({"parameters": {}, "extensionConfigs": {"local": {"rootDirectory": {"value": "./files"}}}})
            .to_string(),
    );
    cli.write("ab.json", &files_template(&["a", "b"], "x"));
    cli.write("ac.json", &files_template(&["a", "c"], "y"));
    cli
}

fn exists(cli: &Cli, name: &str) -> bool {
    cli.work.path().join("files").join(name).exists()
}

const CREATE: [&str; 10] = [
    "deployment",
    "group",
    "create",
    "-g",
    "rg",
    "-f",
    "ab.json",
    "-p",
    "params.json",
    "-c",
];

const QUESTION: &str = "Are you sure you want to execute the deployment? (y/n): ";

#[test]
fn confirm_with_what_if_answered_no_deploys_nothing() {
    let cli = setup();
    let mut terminal = Terminal::run(&cli, &CREATE, &[]);
    let screen = terminal.wait_for(QUESTION);
    // The plan, coloured: created resources in green.
    assert!(
        screen.contains("\x1b[32m+ Local File {\"path\":\"a.txt\"} (a)\x1b[0m"),
        "{screen}"
    );
    assert!(
        screen.contains("Resource changes: 2 to create."),
        "{screen}"
    );
    terminal.answer("n");
    let (status, screen) = terminal.finish();
    assert_eq!(status.code(), Some(2), "{screen}");
    assert!(
        screen.contains("error: not deployed: the deployment was not confirmed"),
        "{screen}"
    );
    assert!(!exists(&cli, "a.txt"));
    assert_eq!(
        cli.json(&["deployment", "group", "list", "-g", "rg"]),
        json!([])
    );
}

#[test]
fn confirm_with_what_if_answered_yes_deploys_with_the_live_view() {
    let cli = setup();
    let mut terminal = Terminal::run(&cli, &CREATE, &[]);
    terminal.wait_for(QUESTION);
    // Anything but y or n is asked again.
    terminal.answer("maybe");
    terminal.wait_for("Please enter 'y' or 'n'.");
    terminal.answer("y");
    let (status, screen) = terminal.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    let after = &screen[screen.rfind(QUESTION).unwrap()..];
    // The live view: a table with a header, redrawn in place (cursor up, clear below), ending Succeeded.
    assert!(after.contains("RESOURCE"), "{after}");
    assert!(after.contains("\x1b[J"), "{after}");
    assert!(after.contains("Deployment 'ab': Succeeded"), "{after}");
    assert!(after.contains("\x1b[32mSucceeded"), "{after}");
    assert!(exists(&cli, "a.txt") && exists(&cli, "b.txt"));
}

#[test]
fn stack_create_asks_before_deleting() {
    let cli = setup();
    cli.expect(
        &[
            "stack",
            "group",
            "create",
            "-g",
            "rg",
            "-n",
            "st",
            "-f",
            "ab.json",
            "-p",
            "params.json",
            "--aou",
            "deleteResources",
            "--yes",
            "-o",
            "none",
        ],
        0,
    );
    let update = [
        "stack",
        "group",
        "create",
        "-g",
        "rg",
        "-n",
        "st",
        "-f",
        "ac.json",
        "-p",
        "params.json",
        "--aou",
        "deleteResources",
        "-o",
        "none",
    ];
    let question = "The update deletes 1 resource (marked - above). Are you sure you want to update the stack? (y/n): ";
    let mut terminal = Terminal::run(&cli, &update, &[]);
    let screen = terminal.wait_for(question);
    assert!(
        screen.contains("\x1b[31m- Local File {\"path\":\"b.txt\"} (b)\x1b[0m"),
        "{screen}"
    );
    assert!(
        screen.contains("\x1b[33m~ Local File {\"path\":\"a.txt\"} (a)\x1b[0m"),
        "{screen}"
    );
    terminal.answer("n");
    let (status, screen) = terminal.finish();
    assert_eq!(status.code(), Some(2), "{screen}");
    assert!(
        screen.contains("error: not changed: the update of the stack was not confirmed"),
        "{screen}"
    );
    assert!(exists(&cli, "b.txt") && !exists(&cli, "c.txt"));

    let mut terminal = Terminal::run(&cli, &update, &[]);
    terminal.wait_for(question);
    terminal.answer("y");
    let (status, screen) = terminal.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    // The stack's progress, line by line as it happens.
    assert!(
        screen.contains("stack st: deleted Local File {\"path\":\"b.txt\"} ("),
        "{screen}"
    );
    assert!(
        screen.contains("stack st: 2 managed, 1 deleted, 0 detached, 0 failed"),
        "{screen}"
    );
    assert!(!exists(&cli, "b.txt") && exists(&cli, "c.txt"));
}

#[test]
fn no_color_turns_the_plans_colours_off() {
    let cli = setup();
    let what_if = [
        "deployment",
        "group",
        "what-if",
        "-g",
        "rg",
        "-f",
        "ab.json",
        "-p",
        "params.json",
    ];
    let (status, coloured) = Terminal::run(&cli, &what_if, &[]).finish();
    assert_eq!(status.code(), Some(0), "{coloured}");
    assert!(coloured.contains("\x1b[32m+\x1b[0m Create"), "{coloured}");
    let (status, plain) = Terminal::run(&cli, &what_if, &[("NO_COLOR", "1")]).finish();
    assert_eq!(status.code(), Some(0), "{plain}");
    assert!(!plain.contains('\x1b'), "{plain}");
    assert!(
        plain.contains("  + Local File {\"path\":\"a.txt\"} (a)"),
        "{plain}"
    );
    // Stacks alike.
    let stack_what_if = [
        "stack",
        "group",
        "what-if",
        "-g",
        "rg",
        "-n",
        "st",
        "-f",
        "ab.json",
        "-p",
        "params.json",
        "--aou",
        "detachAll",
    ];
    let (_, coloured) = Terminal::run(&cli, &stack_what_if, &[]).finish();
    assert!(
        coloured.contains("\x1b[32m+ Local File {\"path\":\"b.txt\"} (b)\x1b[0m"),
        "{coloured}"
    );
    let (_, plain) = Terminal::run(&cli, &stack_what_if, &[("NO_COLOR", "1")]).finish();
    assert!(!plain.contains('\x1b'), "{plain}");
}
