//! Real-world corpus (issue 44): minimal templates that ARM deploys, each in `tests/real_world/<case>/`, checked
//! as `cairn template validate` and `cairn template expand` judge them: the static checks, the model and the
//! expansion against the deployment context's runtime.
//!
//! A case directory holds `template.json`, optionally `parameters.json` (a parameters file) and `context.json` (a
//! deployment context), and `expected.json`:
//!
//! ```json
//! { "verdict": "valid" | "invalid",
//!   "errors": ["fragment of an expected error message", ...],
//!   "parameters": { "name": value, ... },
//!   "resources": [ { "key", "condition", "dependsOn", "deployment"?: { "resources", "outputs", "parameters" } } ],
//!   "outputs": { "name": value, ... } }
//! ```
//!
//! Only the members `expected.json` has are compared, so a case pins what it is about and stays readable: the
//! resources as their keys, conditions and dependencies (nested deployments with their child plan in the same
//! shape), outputs and parameters as values.

use std::path::{Path, PathBuf};

use cairn_template::{
    ContextRuntime, DeploymentContext, DeploymentInput, ParametersFile, Plan, Template, checks,
    expand,
};
use serde_json::{Map, Value as Json, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real_world")
}

fn read_json(path: &Path) -> Option<cairn_json::Node> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        cairn_json::parse(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display())),
    )
}

/// The readable projection of a plan that `expected.json` is compared with.
fn projection(plan: &Plan) -> Map<String, Json> {
    let resources: Vec<Json> = plan
        .resources
        .iter()
        .map(|r| {
            let mut o = Map::new();
            o.insert("key".into(), json!(r.key));
            o.insert("condition".into(), json!(r.condition));
            o.insert("dependsOn".into(), json!(r.depends_on));
            if let Some(child) = &r.deployment {
                o.insert("deployment".into(), Json::Object(projection(child)));
            }
            Json::Object(o)
        })
        .collect();
    let parameters: Map<String, Json> = plan
        .parameters
        .iter()
        .map(|(name, p)| (name.clone(), p.value.to_json()))
        .collect();
    let outputs: Map<String, Json> = plan
        .outputs
        .iter()
        .map(|(name, o)| (name.clone(), o.value.to_json()))
        .collect();
    let mut out = Map::new();
    out.insert("parameters".into(), Json::Object(parameters));
    out.insert("resources".into(), Json::Array(resources));
    out.insert("outputs".into(), Json::Object(outputs));
    out
}

/// Compares the members `expected` has (recursively for objects naming a child plan's sections).
fn compare(case: &str, at: &str, expected: &Json, actual: &Json, problems: &mut Vec<String>) {
    let same = cairn_eval::Value::from_json(expected) == cairn_eval::Value::from_json(actual);
    if !same {
        problems.push(format!(
            "{case}: {at}: expected {}\n    got {}",
            serde_json::to_string_pretty(expected).unwrap(),
            serde_json::to_string_pretty(actual).unwrap()
        ));
    }
}

fn run_case(dir: &Path) -> Vec<String> {
    let case = dir.file_name().unwrap().to_string_lossy().to_string();
    let root =
        read_json(&dir.join("template.json")).unwrap_or_else(|| panic!("{case}: no template.json"));
    let expected = read_json(&dir.join("expected.json"))
        .unwrap_or_else(|| panic!("{case}: no expected.json"))
        .to_json();
    let mut diagnostics = checks::check_template(&root);
    let (template, model) = Template::parse(root);
    diagnostics.extend(model);
    let params = match read_json(&dir.join("parameters.json")) {
        Some(node) => {
            let (file, diags) = ParametersFile::parse(&node);
            diagnostics.extend(diags);
            file
        }
        None => ParametersFile::default(),
    };
    let context: DeploymentContext = match read_json(&dir.join("context.json")) {
        Some(node) => serde_json::from_value(node.to_json())
            .unwrap_or_else(|e| panic!("{case}: bad context.json: {e}")),
        None => DeploymentContext::default(),
    };
    let runtime = ContextRuntime { context: &context };
    let (plan, expansion) = expand(
        DeploymentInput::new(&template, &params, context.clone()),
        &runtime,
    );
    diagnostics.extend(expansion);
    let errors: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{}: {}", d.target, d.message))
        .collect();

    let mut problems = Vec::new();
    let verdict = if errors.is_empty() {
        "valid"
    } else {
        "invalid"
    };
    let wanted = expected["verdict"].as_str().unwrap_or("valid");
    if verdict != wanted {
        problems.push(format!(
            "{case}: verdict {verdict}, expected {wanted}; errors:\n    {}",
            errors.join("\n    ")
        ));
    }
    if let Some(fragments) = expected.get("errors").and_then(Json::as_array) {
        for fragment in fragments.iter().filter_map(Json::as_str) {
            if !errors.iter().any(|e| e.contains(fragment)) {
                problems.push(format!(
                    "{case}: no error contains {fragment:?}; errors:\n    {}",
                    errors.join("\n    ")
                ));
            }
        }
    }
    let actual = plan.as_ref().map(projection).unwrap_or_default();
    for section in ["parameters", "resources", "outputs"] {
        let Some(want) = expected.get(section) else {
            continue;
        };
        match actual.get(section) {
            Some(got) if section == "parameters" => {
                // Only the parameters the case names.
                for (name, value) in want.as_object().into_iter().flatten() {
                    compare(
                        &case,
                        &format!("parameters.{name}"),
                        value,
                        got.get(name).unwrap_or(&Json::Null),
                        &mut problems,
                    );
                }
            }
            Some(got) => compare(&case, section, want, got, &mut problems),
            None => problems.push(format!("{case}: no plan to compare '{section}' with")),
        }
    }
    problems
}

#[test]
fn real_world_templates_are_judged_as_arm_judges_them() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("tests/real_world exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(!dirs.is_empty(), "the corpus has cases");
    let problems: Vec<String> = dirs.iter().flat_map(|d| run_case(d)).collect();
    assert!(
        problems.is_empty(),
        "{} of {} cases differ:\n{}",
        problems.len(),
        dirs.len(),
        problems.join("\n")
    );
}
