//! Shell integration: `cairn completion SHELL`, `cairn man`, and the examples at the end of `--help`.

mod in_process;

use in_process::Cli;

#[test]
fn completion_scripts_for_every_shell() {
    let cli = Cli::new();
    for (shell, marker) in [
        ("bash", "_cairn()"),
        ("zsh", "#compdef cairn"),
        ("fish", "complete -c cairn"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion:arg-completer[cairn]"),
        // Shell names in any case.
        ("Bash", "_cairn()"),
    ] {
        let script = cli.expect(&["completion", shell], 0);
        assert!(
            script.contains(marker),
            "{shell}: {}",
            &script[..script.len().min(300)]
        );
        // Commands and their flags complete too (fish: clap_complete covers two levels of commands).
        assert!(script.contains("template-file"), "{shell}");
        if shell != "fish" {
            assert!(script.contains("template-uri"), "{shell}");
        }
    }
    cli.usage_error(&["completion", "tcsh"]);
}

/// A reader that stops early (`cairn completion zsh | head -3`, `cairn man | head`) closes the pipe: cairn stops
/// quietly with exit 0, as other CLIs do, instead of panicking.
#[test]
fn a_closed_pipe_ends_quietly() {
    for args in [&["completion", "zsh"][..], &["man"][..]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Closed before cairn writes anything: every write of it fails.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn man_pages_with_examples() {
    let cli = Cli::new();
    let page = cli.expect(&["man", "deployment", "group", "create"], 0);
    assert!(
        page.starts_with(".ie") || page.contains(".TH CAIRN\\-DEPLOYMENT\\-GROUP\\-CREATE"),
        "{page}"
    );
    assert!(page.contains(".SH EXAMPLES"), "{page}");
    assert!(page.contains("\\-\\-template\\-uri"), "{page}");
    let root = cli.expect(&["man"], 0);
    assert!(root.contains(".SH SUBCOMMANDS"), "{root}");
    let error = cli.usage_error(&["man", "deployment", "nowhere"]);
    assert!(
        error.contains("no command `cairn deployment nowhere`"),
        "{error}"
    );

    let dir = cli.work.path().join("man1");
    cli.expect(&["man", "--dir", dir.to_str().unwrap()], 0);
    for name in [
        "cairn.1",
        "cairn-deployment.1",
        "cairn-deployment-group-create.1",
        "cairn-deployment-operation-sub-list.1",
        "cairn-stack-mg-what-if.1",
        "cairn-keyvault-secret-show.1",
        "cairn-completion.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(text.contains(".TH"), "{name}");
    }
    let pages = std::fs::read_dir(&dir).unwrap().count();
    assert!(pages > 60, "{pages} pages");
}

#[test]
fn help_ends_with_examples() {
    let cli = Cli::new();
    let help = cli.expect(&["stack", "group", "delete", "--help"], 0);
    let examples = help.find("Examples:").expect("an Examples section");
    assert!(
        help[examples..].contains(
            "cairn stack group delete -n app -g app --action-on-unmanage deleteAll --yes"
        ),
        "{help}"
    );
    // Not a terminal: no colour codes.
    assert!(!help.contains('\u{1b}'), "{help}");
}

/// The client options are taken before the command too, as az takes them (`cairn --server URL deployment ...`).
#[test]
fn client_options_before_the_command() {
    let cli = Cli::new();
    cli.expect(&["group", "create", "-n", "rg", "-l", "local"], 0);
    let listed = cli.expect(
        &[
            "--subscription",
            "00000000-0000-0000-0000-000000000000",
            "group",
            "list",
            "--query",
            "[].name",
            "-o",
            "tsv",
        ],
        0,
    );
    assert_eq!(listed.trim(), "rg");
    // Nothing listens there: a failure to connect (1), not a usage error (2).
    cli.expect(&["--server=http://127.0.0.1:9", "group", "list"], 1);
}

/// `group exists` answers `true` or `false` and exits 0 either way, as az's does.
#[test]
fn group_exists_says_true_or_false() {
    let cli = Cli::new();
    assert_eq!(
        cli.expect(&["group", "exists", "-n", "rg"], 0).trim(),
        "false"
    );
    cli.expect(&["group", "create", "-n", "rg", "-l", "local"], 0);
    assert_eq!(
        cli.expect(&["group", "exists", "-n", "rg"], 0).trim(),
        "true"
    );
    assert_eq!(
        cli.expect(&["group", "exists", "-g", "RG", "-o", "tsv"], 0)
            .trim(),
        "true"
    );
}
