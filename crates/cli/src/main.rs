//! The `cairn` binary: parses the command line and dispatches to the library crates.

mod allocator;
mod backend;
mod bicep;
mod check;
mod client;
mod deployment;
mod examples;
mod extension;
mod extension_oci;
mod group;
mod inputs;
mod keyvault;
mod lint;
mod local;
mod manual;
mod output;
mod plan;
mod progress;
mod prompt;
mod query;
mod render;
mod serve;
mod stack;
mod store;
mod template;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// cairn: an open, self-hostable deployment engine for ARM/Bicep templates.
#[derive(Parser)]
#[command(name = "cairn", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate and expand ARM JSON templates offline.
    #[command(subcommand)]
    Template(template::TemplateCommand),
    /// Work with extensions: list the registry, run the conformance kit.
    #[command(subcommand)]
    Extension(extension::ExtensionCommand),
    /// Serve the ARM-compatible API (resource groups, deployments) over HTTP(S).
    Serve(serve::ServeArgs),
    /// Resource groups: create, show, list, delete.
    Group(group::GroupArgs),
    /// Deployments at resource group or subscription scope, and their operations.
    Deployment(deployment::DeploymentArgs),
    /// The local Key Vault: vaults and secrets.
    Keyvault(keyvault::KeyvaultArgs),
    /// Lint a template's extension configs for deployment stacks (rule stacks-extensibility-compat).
    Lint(lint::LintArgs),
    /// Deployment stacks at resource group or subscription scope.
    Stack(stack::StackArgs),
    /// The store: migrate its schema, copy a data directory into PostgreSQL.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    Completion(manual::CompletionArgs),
    /// Print a command's man page, or write every page to a directory.
    Man(manual::ManArgs),
}

/// The command line with each command's examples at the end of its `--help`.
fn command() -> clap::Command {
    examples::attach(Cli::command())
}

fn main() -> ExitCode {
    // Before the command line is parsed: the process is started again for its allocator settings, and parsing
    // (building every command's arguments) would be done twice. `stack` can only be the first argument.
    let mut argv = std::env::args_os();
    let program = argv.next().unwrap_or_else(|| "cairn".into());
    let args = leading_options_after_command(argv.collect());
    allocator::tune_malloc(workload_of(
        &args,
        std::env::var_os("CAIRN_SERVER").as_deref(),
    ));
    let matches = command().get_matches_from(std::iter::once(program).chain(args));
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Template(cmd) => template::run(cmd),
        Command::Extension(cmd) => extension::run(cmd),
        Command::Serve(args) => serve::run_serve(args),
        Command::Group(args) => group::run(args),
        Command::Deployment(args) => deployment::run(args),
        Command::Keyvault(args) => keyvault::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Stack(args) => stack::run(args),
        Command::Store(cmd) => store::run(cmd),
        Command::Completion(args) => manual::completion(command(), &args),
        Command::Man(args) => manual::man(command(), &args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// The options of every client command (`--server`, `--token`, ...: global below `deployment`, `group`, `stack`,
/// ...), which az takes before the command too (`az --subscription S group list`).
const LEADING_OPTIONS: [&str; 5] = [
    "--server",
    "--token",
    "--ca-cert",
    "--registry",
    "--subscription",
];

/// `cairn --server URL deployment ...` as `cairn deployment --server URL ...`: the client options given before the
/// command (with their values, `--server URL` or `--server=URL`) move after its first word, where they are
/// global; anything else is left as it is, for clap to accept or refuse.
fn leading_options_after_command(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut leading = Vec::new();
    let mut rest = args.into_iter().peekable();
    while let Some(arg) = rest.peek() {
        let bytes = arg.as_encoded_bytes();
        let name_end = bytes.iter().position(|b| *b == b'=').unwrap_or(bytes.len());
        if !LEADING_OPTIONS
            .iter()
            .any(|option| option.as_bytes() == &bytes[..name_end])
        {
            break;
        }
        let has_value = name_end < bytes.len();
        leading.extend(rest.next());
        if !has_value {
            leading.extend(rest.next());
        }
    }
    let mut out: Vec<std::ffi::OsString> = rest.next().into_iter().collect();
    out.extend(leading);
    out.extend(rest);
    out
}

/// What the command allocates most (see `allocator`), told from its arguments (after the program's name) before
/// they are parsed: a client of a server (`--server URL`, `--server=URL` or a non-empty `CAIRN_SERVER`; `serve`
/// never is), else what the command named by the first argument holds.
fn workload_of(
    args: &[std::ffi::OsString],
    server_variable: Option<&std::ffi::OsStr>,
) -> allocator::Workload {
    let first = args.first().map(std::ffi::OsString::as_os_str);
    let names_a_server = args
        .iter()
        .any(|arg| arg == "--server" || arg.as_encoded_bytes().starts_with(b"--server="))
        || server_variable.is_some_and(|url| !url.is_empty());
    if names_a_server && first.is_none_or(|command| command != "serve") {
        allocator::Workload::Client
    } else if first.is_some_and(|command| command == "stack") {
        allocator::Workload::HoldsLargeSets
    } else {
        allocator::Workload::PassesThrough
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stack_command_is_told_apart_before_parsing() {
        for sub in command().get_subcommands() {
            let name = sub.get_name();
            let expected = if name == "stack" {
                allocator::Workload::HoldsLargeSets
            } else {
                allocator::Workload::PassesThrough
            };
            assert_eq!(workload_of(&[name.into()], None), expected, "{name}");
            assert!(
                sub.get_all_aliases().next().is_none(),
                "{name} has an alias"
            );
        }
        let parsed = Cli::try_parse_from(["cairn", "stack", "group", "list", "-g", "rg"]).unwrap();
        assert!(matches!(parsed.command, Command::Stack(_)));
        assert_eq!(workload_of(&[], None), allocator::Workload::PassesThrough);
    }

    #[test]
    fn a_command_naming_a_server_is_a_client_whatever_it_does() {
        let words = |line: &str| -> Vec<std::ffi::OsString> {
            line.split_whitespace().map(Into::into).collect()
        };
        let url = Some(std::ffi::OsStr::new("http://127.0.0.1:8080"));
        for (line, variable, expected) in [
            (
                "stack group create -n s -g rg -f t.json --server http://h",
                None,
                allocator::Workload::Client,
            ),
            (
                "deployment group list -g rg --server=http://h",
                None,
                allocator::Workload::Client,
            ),
            ("stack group list -g rg", url, allocator::Workload::Client),
            (
                "deployment group list -g rg",
                url,
                allocator::Workload::Client,
            ),
            (
                "stack group list -g rg",
                Some(std::ffi::OsStr::new("")),
                allocator::Workload::HoldsLargeSets,
            ),
            (
                "serve --listen 127.0.0.1:0",
                url,
                allocator::Workload::PassesThrough,
            ),
            (
                "deployment group list -g rg --servers",
                None,
                allocator::Workload::PassesThrough,
            ),
        ] {
            assert_eq!(workload_of(&words(line), variable), expected, "{line}");
        }
        // Each client line parses: `--server` is a global option and `CAIRN_SERVER` its variable.
        let parsed = Cli::try_parse_from(
            ["cairn"]
                .into_iter()
                .chain("stack group list -g rg --server http://h".split(' ')),
        );
        assert!(parsed.is_ok());
    }

    /// Client options before the command are read after its first word, where they are global.
    #[test]
    fn client_options_before_the_command_move_after_it() {
        let moved = |line: &str| {
            leading_options_after_command(line.split_whitespace().map(Into::into).collect())
                .into_iter()
                .map(|w| w.into_string().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            moved("--server http://h --token=t deployment group list -g rg"),
            "deployment --server http://h --token=t group list -g rg"
        );
        assert_eq!(
            moved("group list --server http://h"),
            "group list --server http://h"
        );
        assert_eq!(moved("--help"), "--help");
        assert_eq!(moved("--server"), "--server");
        for line in [
            "--server http://h stack group list -g rg",
            "--subscription 11111111-1111-1111-1111-111111111111 group list",
        ] {
            let parsed = Cli::try_parse_from(
                ["cairn".to_owned()]
                    .into_iter()
                    .chain(moved(line).split(' ').map(str::to_owned)),
            );
            assert!(parsed.is_ok(), "{line}");
        }
    }

    /// The words of the `cairn ...` command in an example line (after `source <(`, before a pipe or redirection),
    /// quotes removed.
    fn cairn_words(line: &str) -> Vec<String> {
        let start = line.find("cairn ").expect("an example runs cairn");
        let mut words = Vec::new();
        let (mut word, mut quote) = (String::new(), None);
        for c in line[start..].chars() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, ' ') => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                (None, '|' | '>' | ')') => break,
                _ => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        words
    }

    #[test]
    fn every_command_has_examples_that_parse() {
        let cmd = command();
        let leaves = examples::leaf_paths(&cmd);
        assert!(leaves.len() > 50, "{leaves:?}");
        for path in &leaves {
            let examples = examples::of(path);
            assert!(!examples.is_empty(), "`cairn {path}` has no examples");
            for (_, line) in examples {
                let words = cairn_words(line);
                assert_eq!(
                    words[1..words.len().min(path.split(' ').count() + 1)].join(" "),
                    *path,
                    "{line}"
                );
                if let Err(e) = command().try_get_matches_from(&words) {
                    panic!("the example `{line}` does not parse: {e}");
                }
            }
        }
        // No examples for commands that do not exist.
        for (path, _) in examples::EXAMPLES {
            assert!(
                leaves.contains(&path.to_string()),
                "no command `cairn {path}`"
            );
        }
    }

    /// az takes enum values in any case (`--mode incremental`, `-o TABLE`): so does every cairn flag with a fixed
    /// set of values.
    #[test]
    fn every_enum_value_matches_ignoring_case() {
        fn walk(cmd: &clap::Command, path: &str, checked: &mut usize) {
            for arg in cmd.get_arguments() {
                let values = arg.get_possible_values();
                // Flags (`--yes`) take no values; clap lists `true`/`false` for them.
                if values.is_empty() || !arg.get_action().takes_values() {
                    continue;
                }
                assert!(
                    arg.is_ignore_case_set(),
                    "`cairn {path} --{}` matches its values case-sensitively",
                    arg.get_id()
                );
                *checked += 1;
            }
            for child in cmd.get_subcommands() {
                walk(child, &format!("{path} {}", child.get_name()), checked);
            }
        }
        let mut checked = 0;
        let mut cmd = command();
        cmd.build();
        walk(&cmd, "", &mut checked);
        assert!(checked > 50, "{checked}");
    }

    #[test]
    fn help_ends_with_the_examples() {
        let mut cmd = command();
        let create = cmd
            .find_subcommand_mut("deployment")
            .and_then(|c| c.find_subcommand_mut("group"))
            .and_then(|c| c.find_subcommand_mut("create"))
            .unwrap();
        let help = create.render_help().to_string();
        let examples = help.find("Examples:").expect("an Examples section");
        assert!(help[examples..].contains(
            "  # Deploy a template from a URL\n  cairn deployment group create -g app -n web --template-uri"
        ), "{help}");
    }

    /// docs/cli.md's command list is generated from the command tree; `CAIRN_UPDATE_DOCS=1` rewrites it.
    #[test]
    fn docs_cli_md_lists_every_command() {
        const BEGIN: &str = "<!-- commands: generated from the command tree by `CAIRN_UPDATE_DOCS=1 cargo test -p cairn --bin cairn docs_cli_md` -->\n";
        const END: &str = "<!-- end of commands -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
        let text = std::fs::read_to_string(path).unwrap();
        let (Some(begin), Some(end)) = (text.find(BEGIN), text.find(END)) else {
            panic!("docs/cli.md has no generated command list between `{BEGIN}` and `{END}`");
        };
        let generated = manual::command_list(&command());
        if text[begin + BEGIN.len()..end] == generated {
            return;
        }
        if std::env::var_os("CAIRN_UPDATE_DOCS").is_some() {
            let updated = format!("{}{BEGIN}{generated}{}", &text[..begin], &text[end..]);
            std::fs::write(path, updated).unwrap();
            return;
        }
        panic!(
            "docs/cli.md's command list is stale: run `CAIRN_UPDATE_DOCS=1 cargo test -p cairn --bin cairn docs_cli_md`"
        );
    }
}
