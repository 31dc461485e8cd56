//! `cairn lint [--stacks] -f main.json [-p params.json] [--rules rules.json]`: the `stacks-extensibility-compat`
//! rule over a template's extension configs (see docs/stacks-lint.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use cairn_stacks_lint::{LintInput, Mode, Rules};
use cairn_template::{Diagnostic, Severity, SourceFile};
use clap::Args;

use crate::output::{Format, OutputArgs, TableView};
use crate::query::Query;

use crate::render::{self, OutputFormat};

#[derive(Args)]
pub(crate) struct LintArgs {
    /// Validate for a deployment stack: findings are errors unless the rules file sets another level.
    /// Without it they are warnings (every expression is allowed in an ordinary deployment).
    #[arg(long)]
    stacks: bool,
    /// The ARM JSON template (as `bicep build` writes it).
    #[arg(short = 'f', long = "template-file")]
    template_file: PathBuf,
    /// The parameters file (`params.json` or `@params.json`) whose `extensionConfigs` configure the root
    /// deployment.
    #[arg(short = 'p', long = "parameters")]
    parameters: Option<String>,
    /// Rules file: rule level, per-file glob overrides, secure and required properties per extension.
    #[arg(long)]
    rules: Option<PathBuf>,
    /// Output: the findings always go to stderr as text; a format also prints the report on stdout
    /// [default: none; json with --query].
    #[arg(
        short = 'o',
        long,
        value_enum,
        ignore_case = true,
        value_name = "FORMAT"
    )]
    output: Option<Format>,
    /// JMESPath query applied to the report before it is printed, e.g. `diagnostics[].code`.
    #[arg(long, value_name = "JMESPATH", value_parser = Query::parse)]
    query: Option<Query>,
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

pub(crate) fn run(args: LintArgs) -> anyhow::Result<ExitCode> {
    let template = SourceFile::new(
        args.template_file.display().to_string(),
        read(&args.template_file)?,
    );
    let parameters = match &args.parameters {
        Some(p) => {
            let path = PathBuf::from(p.strip_prefix('@').unwrap_or(p));
            Some(SourceFile::new(path.display().to_string(), read(&path)?))
        }
        None => None,
    };
    let rules = match &args.rules {
        Some(path) => Rules::parse(&read(path)?)
            .with_context(|| format!("{} is not a valid rules file", path.display()))?,
        None => Rules::default(),
    };
    let rules_base = args
        .rules
        .as_ref()
        .and_then(|p| p.parent())
        .map(|dir| dir.display().to_string());
    let mode = if args.stacks {
        Mode::Stacks
    } else {
        Mode::Standard
    };
    let diagnostics = cairn_stacks_lint::lint(&LintInput {
        template: &template,
        parameters: parameters.as_ref(),
        rules: &rules,
        mode,
        rules_base: rules_base.as_deref(),
    });
    let mut sources = vec![template];
    sources.extend(parameters);
    render::print_diagnostics(&diagnostics, &sources, OutputFormat::Text);
    let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
    let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
    if !diagnostics.is_empty() {
        eprintln!(
            "{errors} error(s), {warnings} warning(s), {} info finding(s)",
            count(Severity::Info)
        );
    }
    let out = OutputArgs {
        output: args.output,
        query: args.query.clone(),
    };
    let default = if args.query.is_some() {
        Format::Json
    } else {
        Format::None
    };
    if out.format_or(default) != Format::None {
        let status = if errors > 0 {
            "failed"
        } else if diagnostics.is_empty() {
            "clean"
        } else {
            "passed"
        };
        let report = serde_json::json!({
            "status": status,
            "mode": if args.stacks { "stacks" } else { "standard" },
            "diagnostics": diagnostics,
        });
        if let Err(failure) = out.print(default, &report, TableView::Auto) {
            return Ok(failure.report());
        }
    }
    Ok(if diagnostics.iter().any(Diagnostic::is_error) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = r#"{
  "languageVersion": "2.2-experimental",
  "parameters": { "kc": { "type": "securestring" } },
  "resources": {
    "mod": {
      "type": "Microsoft.Resources/deployments",
      "apiVersion": "2025-04-01",
      "name": "m",
      "properties": {
        "expressionEvaluationOptions": { "scope": "inner" },
        "extensionConfigs": { "k8s": { "kubeConfig": { "value": "[parameters('kc')]" }, "namespace": { "value": "ns" } } },
        "template": { "languageVersion": "2.2-experimental",
          "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0" } }, "resources": {} }
      }
    }
  }
}"#;

    fn args(dir: &tempfile::TempDir, stacks: bool, rules: Option<&str>) -> LintArgs {
        let template = dir.path().join("main.json");
        std::fs::write(&template, TEMPLATE).unwrap();
        let rules = rules.map(|text| {
            let path = dir.path().join("rules.json");
            std::fs::write(&path, text).unwrap();
            path
        });
        LintArgs {
            stacks,
            template_file: template,
            parameters: None,
            rules,
            output: None,
            query: None,
        }
    }

    #[test]
    fn exit_codes_follow_the_mode_and_rules() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run(args(&dir, true, None)).unwrap(), ExitCode::from(2));
        assert_eq!(run(args(&dir, false, None)).unwrap(), ExitCode::SUCCESS);
        let relaxed = r#"{ "analyzers": { "rules": { "stacks-extensibility-compat": { "level": "error",
            "fileOverrides": [ { "files": ["main.json"], "level": "warning" } ] } } } }"#;
        assert_eq!(
            run(args(&dir, true, Some(relaxed))).unwrap(),
            ExitCode::SUCCESS
        );
        assert!(
            run(args(
                &dir,
                true,
                Some(r#"{ "rules": { "stacks-compatibility": { "level": 3 } } }"#)
            ))
            .is_err()
        );
    }
}
