//! The `cairn` binary: parses the command line and dispatches to the library crates.

mod backend;
mod bicep;
mod client;
mod deployment;
mod extension;
mod group;
mod inputs;
mod keyvault;
mod lint;
mod local;
mod output;
mod progress;
mod query;
mod render;
mod serve;
mod stack;
mod template;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Template(cmd) => template::run(cmd),
        Command::Extension(cmd) => extension::run(cmd),
        Command::Serve(args) => serve::run_serve(args),
        Command::Group(args) => group::run(args),
        Command::Deployment(args) => deployment::run(args),
        Command::Keyvault(args) => keyvault::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Stack(args) => stack::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
