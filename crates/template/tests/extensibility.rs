//! Extensibility corpus (`shared/conformance/extensibility`): every template parses, resolves its extension
//! aliases and configs, and expands into a plan without error (no provider needed); the bicepparam-generated
//! parameters file loads with its `extensionConfigs`.

use std::path::{Path, PathBuf};

use cairn_eval::Value;
use cairn_template::{
    DeploymentContext, DeploymentInput, Offline, ParameterValue, ParametersFile, Plan, Template,
    expand,
};

fn placeholder(decl: &cairn_json::Node) -> Value {
    let ty = decl
        .get_ci("type")
        .and_then(cairn_json::Node::as_str)
        .unwrap_or("string")
        .to_ascii_lowercase();
    match ty.as_str() {
        "int" => Value::Int(1),
        "bool" => Value::Bool(false),
        "object" | "secureobject" => Value::Object(Default::default()),
        "array" => Value::Array(Vec::new()),
        _ => Value::from("placeholder"),
    }
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/extensibility")
}

fn templates(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            templates(&path, out);
        } else if path.extension().is_some_and(|e| e == "json")
            && !["params.json", "parameters.json"]
                .contains(&path.file_name().unwrap().to_str().unwrap())
        {
            out.push(path);
        }
    }
}

fn expand_file(path: &Path) -> Result<Plan, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let (template, diags) = Template::parse(cairn_json::parse(&text).unwrap());
    let mut errors: Vec<String> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.clone())
        .collect();
    let params_path = path.with_file_name("params.json");
    let params = if params_path.exists() && path.file_name().is_some_and(|n| n == "main.json") {
        ParametersFile::parse(
            &cairn_json::parse(&std::fs::read_to_string(params_path).unwrap()).unwrap(),
        )
        .0
    } else {
        ParametersFile::default()
    };
    let context = DeploymentContext {
        location: Some("westus".into()),
        ..DeploymentContext::default()
    };
    let mut input = DeploymentInput::new(&template, &params, context);
    // Module templates have no parameters file of their own: give required parameters placeholders, as
    // template analyzers do.
    for p in &template.parameters {
        if p.node.get_ci("defaultValue").is_none()
            && !input.parameters.iter().any(|(n, _)| n == &p.name)
        {
            input
                .parameters
                .push((p.name.clone(), ParameterValue::Value(placeholder(&p.node))));
        }
    }
    let (plan, diags) = expand(input, &Offline);
    errors.extend(
        diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{} [{}] {}", d.target, d.code, d.message)),
    );
    match plan {
        Some(plan) if errors.is_empty() => Ok(plan),
        _ => Err(errors),
    }
}

#[test]
fn every_extension_template_expands() {
    let mut files = Vec::new();
    templates(&corpus(), &mut files);
    files.sort();
    assert!(
        files.len() >= 6,
        "expected the extensibility templates, found {files:?}"
    );
    let mut failures = Vec::new();
    for f in &files {
        match expand_file(f) {
            Ok(plan) => println!(
                "{}: {} resources, {} extensions",
                f.display(),
                plan.resources.len(),
                plan.extensions.len()
            ),
            Err(errors) => failures.push(format!("{}: {}", f.display(), errors.join("; "))),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn module_extension_configs_are_merged_and_inherited() {
    let plan = expand_file(&corpus().join("Extensions_CRLF/main.json"))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let module = |prefix: &str| {
        plan.resources
            .iter()
            .find(|r| r.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
            .and_then(|r| r.deployment.as_deref())
            .unwrap_or_else(|| panic!("module {prefix}"))
    };
    let config = |plan: &Plan, alias: &str| {
        plan.extensions
            .iter()
            .find(|e| e.alias == alias)
            .map(|e| e.config.to_wire())
    };
    let child = module("moduleWithExtsWithAliases-");
    assert_eq!(
        config(child, "k8s").unwrap()["kubeConfig"],
        serde_json::json!({ "value": "kubeConfig2" })
    );
    let kv = module("moduleExtConfigFromKeyVaultReference-");
    let kube = &config(kv, "k8s").unwrap()["kubeConfig"];
    assert!(
        kube["keyVaultReference"]["keyVault"]["id"]
            .as_str()
            .unwrap()
            .ends_with("/providers/Microsoft.KeyVault/vaults/kv1"),
        "{kube}"
    );
}
