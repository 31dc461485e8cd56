//! `cairn template validate|expand`: offline checks and expansion of ARM JSON templates.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub(crate) enum TemplateCommand {}

pub(crate) fn run(cmd: TemplateCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
