//! Real-world corpus (issue 44): minimal templates that ARM deploys, each in `tests/real_world/<case>/`, checked
//! as `cairn template validate` and `cairn template expand` judge them: the static checks, the model and the
//! expansion against the deployment context's runtime (none by default: runtime values stay unknown).
//!
//! A case directory holds `template.json`, optionally `parameters.json` (a parameters file) and `context.json` (a
//! deployment context), and `expected.json`:
//!
//! ```json
//! { "verdict": "valid" | "invalid",
//!   "errors": ["fragment of an expected error message", ...],
//!   "parameters": { "name": value, ... },
//!   "resources": [ { "key", "condition", "dependsOn", "deployment"?: { <the same sections, for the child> } } ],
//!   "outputs": { "name": value, ... },
//!   "deferred": [ { "kind", "target", "expression" } ] }
//! ```
//!
//! Only the sections `expected.json` has are compared (in a child plan too, and a resource's child plan only when
//! the case shows one), so a case pins what it is about and stays readable: resources as their keys, conditions
//! and dependencies, nested deployments with their child plan in the same shape, outputs and parameters as values,
//! and what the plan leaves for the deployment's run (`Plan::deferred`: copy loops and nested children whose
//! count, template or parameters are runtime values). A value known only at deployment is
//! `{"$unknown": "<expression>"}`; a case may also write it as the expression string, which then matches either.

use std::path::{Path, PathBuf};

use cairn_template::{
    ContextRuntime, DeploymentContext, DeploymentInput, ParametersFile, Template, checks, expand,
};
use serde_json::{Map, Value as Json, json};

/// The sections of a plan a case may pin.
const SECTIONS: [&str; 4] = ["parameters", "resources", "outputs", "deferred"];

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

/// The readable projection of a plan that `expected.json` is compared with, from the plan's JSON form with
/// unknown values marked (`Plan::to_json_marking_unknowns`).
fn projection(plan: &Json) -> Map<String, Json> {
    let resources: Vec<Json> = plan["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let mut o = Map::new();
            for member in ["key", "condition", "dependsOn"] {
                o.insert(member.into(), r[member].clone());
            }
            if let Some(child) = r.get("deployment") {
                o.insert("deployment".into(), Json::Object(projection(child)));
            }
            Json::Object(o)
        })
        .collect();
    let values = |section: &str, member: &str| -> Map<String, Json> {
        plan[section]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, p)| (name.clone(), p[member].clone()))
            .collect()
    };
    let deferred: Vec<Json> = plan["deferred"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| json!({ "kind": d["kind"], "target": d["target"], "expression": d["expression"] }))
        .collect();
    let mut out = Map::new();
    out.insert(
        "parameters".into(),
        Json::Object(values("parameters", "value")),
    );
    out.insert("resources".into(), Json::Array(resources));
    out.insert("outputs".into(), Json::Object(values("outputs", "value")));
    out.insert("deferred".into(), Json::Array(deferred));
    out
}

/// Where [`aligned`] is in a projection.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// A plan: its sections.
    Plan,
    /// A plan's `resources` array.
    Resources,
    /// One resource: its `deployment` is a plan.
    Resource,
    /// A value.
    Value,
}

/// `actual` with the sections `expected` does not name left out (in child plans too), and each unknown value
/// written where `expected` has a string shown as that string: the expression form matches an unknown value.
fn aligned(expected: &Json, actual: &Json, level: Level) -> Json {
    match (expected, actual) {
        (Json::String(_), Json::Object(o)) if o.len() == 1 && o.contains_key("$unknown") => {
            o["$unknown"].clone()
        }
        (Json::Object(want), Json::Object(got)) => Json::Object(
            got.iter()
                .filter(|(k, _)| match level {
                    Level::Plan => want.contains_key(*k),
                    // A child plan is compared when the case shows one.
                    Level::Resource => *k != "deployment" || want.contains_key("deployment"),
                    _ => true,
                })
                .map(|(k, v)| {
                    let inner = match (level, k.as_str()) {
                        (Level::Plan, "resources") => Level::Resources,
                        (Level::Resource, "deployment") => Level::Plan,
                        _ => Level::Value,
                    };
                    let value = match want.get(k) {
                        Some(w) => aligned(w, v, inner),
                        None => v.clone(),
                    };
                    (k.clone(), value)
                })
                .collect(),
        ),
        (Json::Array(want), Json::Array(got)) => {
            let inner = if level == Level::Resources {
                Level::Resource
            } else {
                Level::Value
            };
            Json::Array(
                got.iter()
                    .enumerate()
                    .map(|(i, v)| match want.get(i) {
                        Some(w) => aligned(w, v, inner),
                        None => v.clone(),
                    })
                    .collect(),
            )
        }
        _ => actual.clone(),
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
    for fragment in expected["errors"].as_array().into_iter().flatten() {
        let fragment = fragment.as_str().unwrap_or_default();
        if !errors.iter().any(|e| e.contains(fragment)) {
            problems.push(format!(
                "{case}: no error contains {fragment:?}; errors:\n    {}",
                errors.join("\n    ")
            ));
        }
    }
    let want: Map<String, Json> = expected
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| SECTIONS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if want.is_empty() {
        return problems;
    }
    let Some(plan) = plan else {
        problems.push(format!("{case}: no plan to compare with"));
        return problems;
    };
    let want = Json::Object(want);
    let got = aligned(
        &want,
        &Json::Object(projection(&plan.to_json_marking_unknowns())),
        Level::Plan,
    );
    // Values compare as ARM compares them: keys ignoring case, 1 equal to 1.0.
    if cairn_eval::Value::from_json(&want) != cairn_eval::Value::from_json(&got) {
        problems.push(format!(
            "{case}: the plan differs; expected\n{}\ngot\n{}",
            serde_json::to_string_pretty(&want).unwrap(),
            serde_json::to_string_pretty(&got).unwrap()
        ));
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
