//! `cairn completion SHELL` (clap_complete) and `cairn man [COMMAND]` (clap_mangen, with the examples as an
//! EXAMPLES section), and the command list of docs/cli.md, generated from the same command tree.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Command};

use crate::examples;

#[derive(Args)]
pub(crate) struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum, ignore_case = true)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
pub(crate) struct ManArgs {
    /// Write the page of every command to this directory (`cairn.1`, `cairn-deployment-group-create.1`, ...)
    /// instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    dir: Option<PathBuf>,
    /// The command whose page to print, e.g. `deployment group create` [default: cairn itself].
    #[arg(value_name = "COMMAND")]
    command: Vec<String>,
}

/// Prints the completion script for `args.shell` on stdout.
pub(crate) fn completion(mut cmd: Command, args: &CompletionArgs) -> anyhow::Result<ExitCode> {
    // Generated into memory first: clap_complete panics when its writer fails, and a reader that stops early
    // (`cairn completion zsh | head -3`) closes the pipe.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "cairn", &mut script);
    print_all(&script)
}

/// Writes `bytes` to stdout; a reader that closed the pipe early (`| head`) is no error, as for other CLIs.
fn print_all(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => Err(err.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Prints one man page, or writes them all to `--dir`.
pub(crate) fn man(mut cmd: Command, args: &ManArgs) -> anyhow::Result<ExitCode> {
    // Display names (`cairn-deployment-group-create`) are set when the tree is built.
    cmd.build();
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut written = 0;
        for (path, page) in all_pages(&cmd) {
            let file = dir.join(format!("{}.1", page_name(&path)));
            std::fs::write(&file, page)
                .with_context(|| format!("cannot write {}", file.display()))?;
            written += 1;
        }
        eprintln!("{written} pages written to {}", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    let path = args.command.join(" ");
    let Some(target) = examples::find(&cmd, &path) else {
        anyhow::bail!("no command `cairn {path}`; `cairn --help` lists them");
    };
    print_all(&page(target, &path)?)
}

/// `cairn`, `cairn-deployment-group-create`.
fn page_name(path: &str) -> String {
    std::iter::once("cairn")
        .chain(path.split_whitespace())
        .collect::<Vec<_>>()
        .join("-")
}

/// Every command's page (the groups' too), with its path.
fn all_pages(cmd: &Command) -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &Command, path: &str, out: &mut Vec<(String, Vec<u8>)>) {
        if let Ok(page) = page(cmd, path) {
            out.push((path.to_string(), page));
        }
        for child in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
            let child_path = format!("{path} {}", child.get_name()).trim().to_string();
            walk(child, &child_path, out);
        }
    }
    let mut out = Vec::new();
    walk(cmd, "", &mut out);
    out
}

/// The roff page of `cmd`: clap_mangen's sections, the examples (in no-fill mode, one command per line), and the
/// version.
fn page(cmd: &Command, path: &str) -> std::io::Result<Vec<u8>> {
    let man = clap_mangen::Man::new(cmd.clone())
        .title(page_name(path).to_uppercase())
        .source(format!("cairn {}", env!("CARGO_PKG_VERSION")))
        .manual("cairn manual");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut out)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut out)?;
    }
    let examples = examples::of(path);
    if !examples.is_empty() {
        out.extend_from_slice(b".SH EXAMPLES\n");
        for (about, line) in examples {
            out.extend_from_slice(
                format!(
                    ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
                    roff_text(about),
                    roff_text(line)
                )
                .as_bytes(),
            );
        }
    }
    man.render_version_section(&mut out)?;
    Ok(without_repeated_preamble(out))
}

/// Each clap_mangen section comes with roff's two-line preamble (`.ie \n(.g .ds Aq ...`): keep the first only.
fn without_repeated_preamble(page: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&page);
    let mut seen = std::collections::HashSet::new();
    let mut out = String::new();
    for line in text.lines() {
        let preamble = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if preamble && !seen.insert(line.to_string()) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

/// Text for a roff line: backslashes and minus signs escaped, a leading `.` or `'` guarded.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) {
        format!("\\&{escaped}")
    } else {
        escaped
    }
}

#[cfg(test)]
/// The command list of docs/cli.md: every leaf command with what it does and its first example.
pub(crate) fn command_list(cmd: &Command) -> String {
    let mut out = String::from("| Command | What it does | Example |\n|---|---|---|\n");
    for path in examples::leaf_paths(cmd) {
        let about = examples::find(cmd, &path)
            .and_then(|c| c.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        let example = examples::of(&path)
            .first()
            .map(|(_, line)| format!("`{line}`"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| `cairn {path}` | {} | {} |\n",
            about.replace('|', "\\|"),
            example.replace('|', "\\|")
        ));
    }
    out
}
