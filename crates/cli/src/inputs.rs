//! What the resource commands (deployments, stacks) read from their flags: the template (`-f` ARM JSON or Bicep,
//! `--template-uri`, `--template-spec`), az's repeated `-p` (parameters files, a `.bicepparam`, `name=value`, later
//! values winning) and `--tags key=value ...`.
//!
//! Files are parsed with positions so a template or parameters file that is not valid JSON, or that the template
//! model rejects, is reported as `error[Code]: ... --> file:line:col` before anything is sent (exit 2). Bicep
//! sources are compiled first ([`crate::bicep`]) and their JSON takes the same way. A template behind a URI or a
//! template spec is sent as `templateLink`: the engine (in process or the server) fetches it, with the limits it
//! applies to every linked template.

use std::path::{Path, PathBuf};

use cairn_arm::models::common::{Tags, TemplateLink};
use cairn_template::{Diagnostic, ParameterValue, ParametersFile, SourceFile, Template};
use clap::Args;
use serde_json::{Map, Value, json};

use crate::bicep::{self, BicepError};
use crate::output::Failure;

/// Where the template comes from: az's `-f`, `--template-uri` (with `--query-string`) or `--template-spec`. None
/// of them is needed when a `.bicepparam` among `-p` names its template.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct TemplateSourceArgs {
    /// The template: ARM JSON, or Bicep (`.bicep`, compiled with the `bicep` CLI or `az bicep`).
    #[arg(
        short = 'f',
        long = "template-file",
        value_name = "FILE",
        conflicts_with_all = ["template_uri", "template_spec"]
    )]
    pub(crate) template_file: Option<PathBuf>,
    /// A template to download (http or https), sent as `templateLink.uri`; nested deployments may link templates
    /// relative to it.
    #[arg(
        short = 'u',
        long = "template-uri",
        value_name = "URI",
        conflicts_with = "template_spec"
    )]
    pub(crate) template_uri: Option<String>,
    /// The resource ID of a template spec version
    /// (`/subscriptions/.../resourceGroups/RG/providers/Microsoft.Resources/templateSpecs/NAME/versions/V`).
    #[arg(short = 's', long = "template-spec", value_name = "ID")]
    pub(crate) template_spec: Option<String>,
    /// A query string (such as a SAS token) for --template-uri and the templates it links; never printed.
    #[arg(short = 'q', long = "query-string", value_name = "QUERY")]
    pub(crate) query_string: Option<String>,
}

impl TemplateSourceArgs {
    /// The name az gives a deployment without `-n`: the template file's name without extension (the URI's last
    /// segment, the template spec's name, or the `.bicepparam` file's).
    pub(crate) fn default_name(&self, parameters: &[String]) -> Option<String> {
        let stem = |path: &Path| path.file_stem()?.to_str().map(str::to_string);
        if let Some(file) = &self.template_file {
            return stem(file);
        }
        if let Some(uri) = &self.template_uri {
            let path = uri.split(['?', '#']).next().unwrap_or(uri);
            return stem(Path::new(path.rsplit('/').next()?)).filter(|s| !s.is_empty());
        }
        if let Some(spec) = &self.template_spec {
            let parts: Vec<&str> = spec.trim_matches('/').split('/').collect();
            let at = parts
                .iter()
                .position(|p| p.eq_ignore_ascii_case("templateSpecs"))?;
            return parts.get(at + 1).map(|s| s.to_string());
        }
        let bicepparam = parameter_words(parameters)
            .map(|w| w.strip_prefix('@').unwrap_or(w))
            .find(|w| bicep::is_bicepparam(Path::new(w)))?;
        stem(Path::new(bicepparam))
    }
}

/// A template (inline, or a link the engine resolves) with the parameters, extension configs and external input
/// definitions of every `-p`, in ARM's request shapes.
#[derive(Debug, Default)]
pub(crate) struct TemplateInputs {
    pub(crate) template: Option<Value>,
    /// The files read, to locate the engine's findings in.
    pub(crate) files: crate::check::InputFiles,
    pub(crate) template_link: Option<TemplateLink>,
    pub(crate) parameters: Map<String, Value>,
    pub(crate) extension_configs: Map<String, Value>,
    pub(crate) external_input_definitions: Option<Value>,
}

impl From<BicepError> for Failure {
    fn from(e: BicepError) -> Self {
        Failure::Usage(e.to_string())
    }
}

/// Every `-p` value (`-p a b -p c` gives `a`, `b`, `c`).
fn parameter_words(parameters: &[String]) -> impl Iterator<Item = &str> {
    parameters.iter().map(String::as_str)
}

/// Reads the template and every `-p`. Diagnostics (invalid JSON, a template or parameters file the model
/// rejects) are printed with their positions and end the command ([`Failure::Reported`], exit 2).
pub(crate) fn read_template_inputs(
    source: &TemplateSourceArgs,
    parameters: &[String],
) -> Result<TemplateInputs, Failure> {
    if source.query_string.is_some() && source.template_uri.is_none() {
        return Err(Failure::usage(
            "--query-string goes with --template-uri (it is sent with the download)",
        ));
    }
    let bicepparams: Vec<&str> = parameter_words(parameters)
        .filter(|w| bicep::is_bicepparam(Path::new(w.strip_prefix('@').unwrap_or(w))))
        .collect();
    if bicepparams.len() > 1 {
        return Err(Failure::usage(
            "give one .bicepparam file: it holds every parameter (add others as name=value)",
        ));
    }
    let mut sources = Vec::new();
    let mut diagnostics = Vec::new();
    let mut inputs = ParameterInputs::default();
    let mut template = None;
    let mut template_link = None;
    if let Some(file) = &source.template_file
        && bicep::is_bicepparam(file)
    {
        return Err(Failure::usage(format!(
            "{} is a Bicep parameters file: pass it with -p (and the template with -f main.bicep, or let its \
             `using` name it)",
            file.display()
        )));
    }
    if let Some(bicepparam) = bicepparams.first() {
        let bicepparam = Path::new(bicepparam.strip_prefix('@').unwrap_or(bicepparam));
        if source.template_uri.is_some() || source.template_spec.is_some() {
            return Err(Failure::usage(
                "a .bicepparam file names its template (`using`): give it alone or with -f main.bicep, not with \
                 --template-uri or --template-spec",
            ));
        }
        if let Some(file) = source
            .template_file
            .as_deref()
            .filter(|f| !bicep::is_bicep(f))
        {
            return Err(Failure::usage(format!(
                "only a .bicep template goes with a .bicepparam file, not {}",
                file.display()
            )));
        }
        // As az: the other -p are name=value overrides, compiled into the parameters by the Bicep CLI (and
        // applied again after, so they win whatever the compiler's version).
        let mut overrides = ParameterInputs::default();
        for word in parameter_words(parameters).filter(|w| *w != bicepparams[0]) {
            if !overrides.add_inline(word)? {
                return Err(Failure::usage(format!(
                    "-p '{word}': with a .bicepparam file, other parameters are given as name=value"
                )));
            }
        }
        let values: Map<String, Value> = overrides
            .parameters
            .iter()
            .map(|(name, entry)| (name.clone(), entry["value"].clone()))
            .collect();
        let compiled =
            bicep::compile_parameters(bicepparam, source.template_file.as_deref(), &values)?;
        match (
            &source.template_file,
            compiled.template,
            compiled.template_spec_id,
        ) {
            (Some(file), _, _) => {
                template = parse_template(
                    bicep::compile_template(file)?,
                    &mut sources,
                    &mut diagnostics,
                );
            }
            (None, Some(text), _) => {
                template = parse_template(text, &mut sources, &mut diagnostics);
            }
            (None, None, Some(id)) => {
                template_link = Some(TemplateLink {
                    id: Some(id),
                    ..TemplateLink::default()
                });
            }
            (None, None, None) => {
                return Err(Failure::usage(format!(
                    "the compiled {} names no template: pass it with -f main.bicep",
                    bicepparam.display()
                )));
            }
        }
        inputs.add_source(compiled.parameters, &mut sources, &mut diagnostics);
        for (name, entry) in overrides.parameters {
            inputs.set_parameter(&name, entry);
        }
        inputs.inline.extend(overrides.inline);
    } else {
        match (
            &source.template_file,
            &source.template_uri,
            &source.template_spec,
        ) {
            (Some(file), _, _) => {
                let text = if bicep::is_bicep(file) {
                    bicep::compile_template(file)?
                } else {
                    read_source(file)?
                };
                template = parse_template(text, &mut sources, &mut diagnostics);
            }
            (None, Some(uri), _) => {
                template_link = Some(TemplateLink {
                    uri: Some(uri.clone()),
                    query_string: source.query_string.clone(),
                    ..TemplateLink::default()
                });
            }
            (None, None, Some(id)) => {
                template_link = Some(TemplateLink {
                    id: Some(id.clone()),
                    ..TemplateLink::default()
                });
            }
            (None, None, None) => {
                return Err(Failure::usage(
                    "give a template: -f/--template-file FILE, --template-uri URI, --template-spec ID, or a \
                     .bicepparam file with -p",
                ));
            }
        }
        for word in parameter_words(parameters) {
            inputs.add(word, &mut sources, &mut diagnostics)?;
        }
    }
    if diagnostics.iter().any(Diagnostic::is_error) {
        crate::render::print_diagnostics(&diagnostics, &sources, crate::render::OutputFormat::Text);
        return Err(Failure::Reported);
    }
    if let Some((_, model)) = &template {
        check_inline_names(model, &inputs.inline)?;
    }
    // OCI extensions resolve through the bicepconfig.json near the template and pin in the lock file beside it.
    let template_path = source.template_file.clone().or_else(|| {
        bicepparams
            .first()
            .map(|word| PathBuf::from(word.strip_prefix('@').unwrap_or(word)))
    });
    if let (Some((json, _)), Some(path)) = (&template, template_path) {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        crate::extension_oci::set_project(dir, json)?;
    }
    Ok(TemplateInputs {
        files: crate::check::InputFiles {
            sources,
            has_template: template.is_some(),
            inline: inputs.inline.clone(),
        },
        template: template.map(|(json, _)| json),
        template_link,
        parameters: inputs.parameters,
        extension_configs: inputs.extension_configs,
        external_input_definitions: inputs.external_input_definitions,
    })
}

/// `-p name=value` for a parameter the template does not declare: refused before anything is sent, with the
/// declared name it most likely meant.
fn check_inline_names(template: &Template, inline: &[String]) -> Result<(), Failure> {
    for name in inline {
        if template.parameter(name).is_some() {
            continue;
        }
        let declared: Vec<&str> = template
            .parameters
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let hint = cairn_eval::suggest::did_you_mean(name, declared.iter().copied());
        let list = if declared.is_empty() {
            "it declares none".to_string()
        } else {
            format!("it declares {}", declared.join(", "))
        };
        return Err(Failure::usage(format!(
            "-p {name}=...: the template has no parameter '{name}'.{hint} ({list})"
        )));
    }
    Ok(())
}

/// Parses a template source and runs the static checks `cairn template validate` runs; its findings join
/// `diagnostics` and the source joins `sources` (for snippets). The JSON to send, and the model when the
/// template parses.
fn parse_template(
    source: SourceFile,
    sources: &mut Vec<SourceFile>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(Value, Template)> {
    let template = match cairn_json::parse(&source.text) {
        Ok(root) => {
            let json = root.to_json();
            let (model, findings) = crate::check::static_findings(&source, root);
            diagnostics.extend(findings);
            Some((json, model))
        }
        Err(e) => {
            diagnostics.push(
                source.locate(
                    Diagnostic::error(
                        "InvalidTemplate",
                        format!("The template is not valid JSON: {e}."),
                        "",
                    )
                    .with_span(e.span),
                ),
            );
            None
        }
    };
    sources.push(source);
    template
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
    /// The names given as `name=value`.
    inline: Vec<String>,
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
        if self.add_inline(arg)? {
            return Ok(());
        }
        let path = parameters_file(arg).map_err(Failure::Usage)?;
        let source = read_source(&path)?;
        self.add_source(source, sources, diagnostics);
        Ok(())
    }

    /// `name=value` (unless it names an existing file, or starts with `@`): `true` when `arg` was one.
    fn add_inline(&mut self, arg: &str) -> Result<bool, Failure> {
        let as_file = arg.strip_prefix('@').unwrap_or(arg);
        let Some((name, value)) = arg.split_once('=') else {
            return Ok(false);
        };
        if arg.starts_with('@') || Path::new(as_file).exists() {
            return Ok(false);
        }
        if name.is_empty() {
            return Err(Failure::usage(format!("-p '{arg}' names no parameter")));
        }
        let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
        self.set_parameter(name, json!({ "value": value }));
        self.inline.push(name.to_string());
        Ok(true)
    }

    /// A parameters file's text (read from disk, or compiled from a `.bicepparam`).
    fn add_source(
        &mut self,
        source: SourceFile,
        sources: &mut Vec<SourceFile>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        match cairn_json::parse(&source.text) {
            Ok(root) => {
                let (file, diags) = ParametersFile::parse(&root);
                diagnostics.extend(diags.into_iter().map(|d| source.locate(d)));
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
                    items.insert(property.clone(), value.to_input_wire());
                }
            }
        }
        if let Some(defs) = file.external_input_definitions {
            self.external_input_definitions = Some(defs.to_json());
        }
    }
}

/// The parameters file a `-p` that is not `name=value` names (`params.json` or `@params.json`): it must exist, and
/// a word that is neither a file nor `name=value` is said to be so.
pub(crate) fn parameters_file(arg: &str) -> Result<PathBuf, String> {
    let path = Path::new(arg.strip_prefix('@').unwrap_or(arg));
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    if arg.starts_with('@') || arg.contains('=') {
        return Err(format!(
            "-p '{arg}': there is no parameters file {}",
            path.display()
        ));
    }
    Err(format!(
        "-p '{arg}' is neither a file (there is no {}) nor name=value: give a parameters file (params.json or \
         @params.json), a .bicepparam file, or name=value",
        path.display()
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

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
                   "contentVersion": "1.0.0.0", "resources": [],
                   "parameters": {"a": {"type": "int"}, "b": {"type": "string"}}})
            .to_string(),
        )
        .unwrap();
        let read = read_template_inputs(
            &file_source(&template),
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
        assert_eq!(read.template.unwrap()["contentVersion"], "1.0.0.0");
        assert!(read.template_link.is_none());
    }

    fn file_source(path: &Path) -> TemplateSourceArgs {
        TemplateSourceArgs {
            template_file: Some(path.to_path_buf()),
            ..TemplateSourceArgs::default()
        }
    }

    #[test]
    fn invalid_json_is_refused_before_sending() {
        let dir = tempfile::tempdir().unwrap();
        let broken = dir.path().join("broken.json");
        std::fs::write(&broken, "{ \"resources\": [ }").unwrap();
        assert!(matches!(
            read_template_inputs(&file_source(&broken), &[]),
            Err(Failure::Reported)
        ));
        assert!(matches!(
            read_template_inputs(&TemplateSourceArgs::default(), &[]),
            Err(Failure::Usage(m)) if m.contains("give a template")
        ));
        let bicepparam = dir.path().join("main.bicepparam");
        assert!(matches!(
            read_template_inputs(&file_source(&bicepparam), &[]),
            Err(Failure::Usage(m)) if m.contains("pass it with -p")
        ));
    }

    #[test]
    fn links_are_sent_for_the_engine_to_fetch() {
        let uri = TemplateSourceArgs {
            template_uri: Some("https://example.invalid/t/main.json?sv=1".into()),
            query_string: Some("sig=secret".into()),
            ..TemplateSourceArgs::default()
        };
        let read = read_template_inputs(&uri, &["n=1".into()]).unwrap();
        assert!(read.template.is_none());
        let link = read.template_link.unwrap();
        assert_eq!(
            link.uri.as_deref(),
            Some("https://example.invalid/t/main.json?sv=1")
        );
        assert_eq!(link.query_string.as_deref(), Some("sig=secret"));
        assert_eq!(uri.default_name(&[]).as_deref(), Some("main"));
        let spec = TemplateSourceArgs {
            template_spec: Some(
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Resources/templateSpecs/web/versions/1.0"
                    .into(),
            ),
            ..TemplateSourceArgs::default()
        };
        let read = read_template_inputs(&spec, &[]).unwrap();
        assert_eq!(read.template_link.unwrap().id, spec.template_spec);
        assert_eq!(spec.default_name(&[]).as_deref(), Some("web"));
        assert_eq!(
            TemplateSourceArgs::default()
                .default_name(&["a=1".into(), "@prod.bicepparam".into()])
                .as_deref(),
            Some("prod")
        );
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
