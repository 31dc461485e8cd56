//! What the resource commands (deployments, stacks, groups) read from their flags: the ARM JSON template (`-f`,
//! diagnostics with file positions), az's repeated `-p` (parameters files and `name=value`, later values winning),
//! `--tags key=value ...` and the dotted `--query` path.
//!
//! Files are parsed with positions so a template or parameters file that is not valid JSON, or that the template
//! model rejects, is reported as `error[Code]: ... --> file:line:col` before anything is sent (exit 2).

use std::path::Path;

use cairn_arm::models::common::Tags;
use cairn_template::{Diagnostic, ParameterValue, ParametersFile, SourceFile, Template};
use serde_json::{Map, Value, json};

use crate::output::{self, CmdResult, Failure, Format};

/// A template with the parameters, extension configs and external input definitions of every `-p`, in ARM's
/// request shapes.
#[derive(Debug, Default)]
pub(crate) struct TemplateInputs {
    pub(crate) template: Value,
    pub(crate) parameters: Map<String, Value>,
    pub(crate) extension_configs: Map<String, Value>,
    pub(crate) external_input_definitions: Option<Value>,
}

/// Reads `-f` and every `-p`. Diagnostics (invalid JSON, a template or parameters file the model rejects) are
/// printed with their positions and end the command ([`Failure::Reported`], exit 2); Bicep sources are refused
/// with a hint to build them.
pub(crate) fn read_template_inputs(
    template_file: &Path,
    parameters: &[String],
) -> Result<TemplateInputs, Failure> {
    let is_bicep = template_file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("bicep") || e.eq_ignore_ascii_case("bicepparam"));
    if is_bicep {
        return Err(Failure::usage(format!(
            "{} is Bicep source: cairn deploys ARM JSON; run `bicep build {}` and pass the .json file",
            template_file.display(),
            template_file.display()
        )));
    }
    let mut sources = Vec::new();
    let mut diagnostics = Vec::new();
    let template_source = read_source(template_file)?;
    let template = match cairn_json::parse(&template_source.text) {
        Ok(root) => {
            let (_, diags) = Template::parse(root.clone());
            diagnostics.extend(
                diags
                    .into_iter()
                    .filter(Diagnostic::is_error)
                    .map(|d| template_source.locate(d)),
            );
            root.to_json()
        }
        Err(e) => {
            diagnostics.push(
                template_source.locate(
                    Diagnostic::error(
                        "InvalidTemplate",
                        format!("The template is not valid JSON: {e}."),
                        "",
                    )
                    .with_span(e.span),
                ),
            );
            Value::Null
        }
    };
    sources.push(template_source);
    let mut inputs = ParameterInputs::default();
    for arg in parameters {
        inputs.add(arg, &mut sources, &mut diagnostics)?;
    }
    if !diagnostics.is_empty() {
        crate::render::print_diagnostics(&diagnostics, &sources, crate::render::OutputFormat::Text);
        return Err(Failure::Reported);
    }
    Ok(TemplateInputs {
        template,
        parameters: inputs.parameters,
        extension_configs: inputs.extension_configs,
        external_input_definitions: inputs.external_input_definitions,
    })
}

fn read_source(path: &Path) -> Result<SourceFile, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Parameters and extension configs gathered from every `-p`.
#[derive(Debug, Default)]
struct ParameterInputs {
    parameters: Map<String, Value>,
    extension_configs: Map<String, Value>,
    external_input_definitions: Option<Value>,
}

impl ParameterInputs {
    /// One `-p`: `@file.json`, `file.json`, or `name=value` (JSON if it parses, else a string), as az takes it.
    fn add(
        &mut self,
        arg: &str,
        sources: &mut Vec<SourceFile>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<(), Failure> {
        let as_file = arg.strip_prefix('@').unwrap_or(arg);
        if let Some((name, value)) = arg.split_once('=')
            && !arg.starts_with('@')
            && !Path::new(as_file).exists()
        {
            if name.is_empty() {
                return Err(Failure::usage(format!("-p '{arg}' names no parameter")));
            }
            let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
            self.set_parameter(name, json!({ "value": value }));
            return Ok(());
        }
        let source = read_source(Path::new(as_file))?;
        match cairn_json::parse(&source.text) {
            Ok(root) => {
                let (file, diags) = ParametersFile::parse(&root);
                diagnostics.extend(
                    diags
                        .into_iter()
                        .filter(Diagnostic::is_error)
                        .map(|d| source.locate(d)),
                );
                self.merge(file);
            }
            Err(e) => diagnostics.push(
                source.locate(
                    Diagnostic::error(
                        "InvalidParameterFile",
                        format!("The parameters file is not valid JSON: {e}."),
                        "",
                    )
                    .with_span(e.span),
                ),
            ),
        }
        sources.push(source);
        Ok(())
    }

    /// Sets a parameter; an earlier one of the same name (ignoring case) is replaced.
    fn set_parameter(&mut self, name: &str, entry: Value) {
        self.parameters.retain(|k, _| !k.eq_ignore_ascii_case(name));
        self.parameters.insert(name.to_string(), entry);
    }

    fn merge(&mut self, file: ParametersFile) {
        for p in file.parameters {
            let entry = match p.value {
                ParameterValue::Value(v) => json!({ "value": v.to_json() }),
                ParameterValue::KeyVault(r) => {
                    let mut reference = json!({
                        "keyVault": { "id": r.vault_id },
                        "secretName": r.secret_name,
                    });
                    if let Some(version) = r.secret_version {
                        reference["secretVersion"] = json!(version);
                    }
                    json!({ "reference": reference })
                }
                ParameterValue::Expression(e) => json!({ "expression": e }),
            };
            self.set_parameter(&p.name, entry);
        }
        for config in file.extension_configs {
            let key = self
                .extension_configs
                .keys()
                .find(|k| k.eq_ignore_ascii_case(&config.alias))
                .cloned()
                .unwrap_or(config.alias);
            let slot = self
                .extension_configs
                .entry(key)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(items) = slot {
                for (property, value) in config.config.iter() {
                    items.retain(|k, _| !k.eq_ignore_ascii_case(property));
                    items.insert(property.clone(), value.to_wire());
                }
            }
        }
        if let Some(defs) = file.external_input_definitions {
            self.external_input_definitions = Some(defs.to_json());
        }
    }
}

/// `--tags key=value ...` (a bare `key` has an empty value, as in az); a later value of a key wins.
pub(crate) fn parse_tags(tags: &[String]) -> Result<Tags, Failure> {
    let mut out = Tags::new();
    for tag in tags {
        let (key, value) = tag.split_once('=').unwrap_or((tag, ""));
        if key.is_empty() {
            return Err(Failure::usage(format!("tag '{tag}' has no name")));
        }
        out.insert(key.to_string(), value.to_string());
    }
    Ok(out)
}

/// A dotted path (`properties.outputs.greeting.value`; `[n]` indexes arrays), matched ignoring case.
pub(crate) fn select<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    let mut current = value;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, index) = match part.split_once('[') {
            Some((key, rest)) => (key, Some(rest.strip_suffix(']')?.parse::<usize>().ok()?)),
            None => (part, None),
        };
        if !key.is_empty() {
            current = current
                .as_object()?
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v)?;
        }
        if let Some(i) = index {
            current = current.as_array()?.get(i)?;
        }
    }
    Some(current)
}

/// Prints the `--query` part of `value`: JSON (a table of rows when it selects an array and `-o table`); a path
/// that selects nothing is a usage error.
pub(crate) fn print_query(format: Format, value: &Value, path: &str) -> CmdResult<()> {
    let part = select(value, path)
        .ok_or_else(|| Failure::usage(format!("--query '{path}' selects nothing")))?;
    match (format, part) {
        (Format::Table, Value::Array(items)) => output::emit_list(format, items, &[]),
        (Format::Table, _) => output::emit(Format::Json, part, &[], &[]),
        _ => output::emit(format, part, &[], &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_follow_dotted_paths_ignoring_case() {
        let v = json!({"properties": {"resources": [{"id": "a"}, {"id": "b"}], "state": "x"}});
        assert_eq!(select(&v, "Properties.State"), Some(&json!("x")));
        assert_eq!(select(&v, "properties.resources[1].id"), Some(&json!("b")));
        assert_eq!(select(&v, "properties.resources[2]"), None);
        assert_eq!(select(&v, "properties.missing"), None);
        assert_eq!(select(&v, "properties.resources[x]"), None);
        assert_eq!(select(&v, ""), Some(&v));
    }

    #[test]
    fn parameters_later_values_win_ignoring_case() {
        let mut inputs = ParameterInputs::default();
        let (mut sources, mut diags) = (Vec::new(), Vec::new());
        for arg in ["Name=one", "name=2", "obj={\"a\":1}", "text=not json"] {
            inputs.add(arg, &mut sources, &mut diags).unwrap();
        }
        assert_eq!(
            Value::Object(inputs.parameters.clone()),
            json!({"name": {"value": 2}, "obj": {"value": {"a": 1}}, "text": {"value": "not json"}})
        );
        assert!(inputs.add("=x", &mut sources, &mut diags).is_err());
    }

    #[test]
    fn parameter_files_merge_with_inline_values_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.json");
        std::fs::write(
            &file,
            json!({"parameters": {"a": {"value": 1}, "b": {"value": "x"}},
                   "extensionConfigs": {"local": {"rootDirectory": {"value": "/tmp/r"}}}})
            .to_string(),
        )
        .unwrap();
        let template = dir.path().join("t.json");
        std::fs::write(
            &template,
            json!({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                   "contentVersion": "1.0.0.0", "resources": []})
            .to_string(),
        )
        .unwrap();
        let read = read_template_inputs(
            &template,
            &[format!("@{}", file.display()), "A=2".to_string()],
        )
        .unwrap();
        assert_eq!(
            Value::Object(read.parameters),
            json!({"b": {"value": "x"}, "A": {"value": 2}})
        );
        assert_eq!(
            Value::Object(read.extension_configs),
            json!({"local": {"rootDirectory": {"value": "/tmp/r"}}})
        );
        assert_eq!(read.template["contentVersion"], "1.0.0.0");
    }

    #[test]
    fn invalid_json_and_bicep_are_refused_before_sending() {
        let dir = tempfile::tempdir().unwrap();
        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "{ \"resources\": [ }").unwrap();
        assert!(matches!(
            read_template_inputs(&broken, &[]),
            Err(Failure::Reported)
        ));
        let bicep = dir.path().join("main.bicep");
        std::fs::write(&bicep, "resource x 'y' = {}").unwrap();
        assert!(matches!(
            read_template_inputs(&bicep, &[]),
            Err(Failure::Usage(message)) if message.contains("bicep build")
        ));
    }

    #[test]
    fn tags_are_key_value_pairs() {
        let tags = parse_tags(&["env=dev".into(), "owner".into(), "env=prod".into()]).unwrap();
        assert_eq!(
            serde_json::to_value(tags).unwrap(),
            json!({"env": "prod", "owner": ""})
        );
        assert!(parse_tags(&["=x".into()]).is_err());
    }
}
