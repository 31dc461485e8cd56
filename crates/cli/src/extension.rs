//! `cairn extension ...`: the extension registry and the conformance kit.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum ExtensionCommand {}

pub(crate) fn run(cmd: ExtensionCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
