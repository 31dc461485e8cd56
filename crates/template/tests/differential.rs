//! Differential corpus (`shared/conformance/differential`): each Bicep program compiled twice (classic
//! `main.json` and symbolic-name `main.symbolicnames.json`) must expand to the same resources and outputs, or
//! fail with the same errors.
//!
//! Compared per resource: ID, type, API version, name, location, properties, resolved dependencies (by ID),
//! condition outcome and nested deployment results. Not compared, because they legitimately differ: symbolic
//! names and plan keys of extensible resources (1.0 has no symbolic names), JSON paths in diagnostics
//! (`resources[3]` vs `resources.sym`), and `deployment().properties.template` (the template text itself).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cairn_template::{
    ContextRuntime, DeploymentContext, DeploymentInput, ParametersFile, Plan, Template, expand,
};
use serde_json::{Value as Json, json};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/differential")
}

fn context() -> DeploymentContext {
    DeploymentContext {
        utc_now: Some("2024-05-06T07:08:09Z".into()),
        new_guids: vec!["11111111-2222-4333-8444-555555555555".into(); 8],
        echo_provider: true,
        location: Some("westus".into()),
        management_group: Some("myManagementGroup".into()),
        ..DeploymentContext::default()
    }
}

/// The comparable shape of a plan.
fn normalize(plan: &Plan) -> Json {
    let mut resources = BTreeMap::new();
    for r in &plan.resources {
        let key = r.id.clone().unwrap_or_else(|| {
            format!("{}|{}", r.resource_type, r.name.clone().unwrap_or_default())
        });
        let body = r.body.as_ref().map(|b| b.to_json()).unwrap_or(Json::Null);
        let mut deps: Vec<String> = r
            .depends_on
            .iter()
            .map(|d| {
                plan.resource(d)
                    .and_then(|x| x.id.clone())
                    .unwrap_or_else(|| d.clone())
                    .to_ascii_lowercase()
            })
            .collect();
        deps.sort();
        deps.dedup();
        resources.insert(
            key.to_ascii_lowercase(),
            json!({
                "type": r.resource_type,
                "apiVersion": r.api_version,
                "name": r.name,
                "location": body.get("location"),
                "properties": body.get("properties").map(strip_template),
                "dependsOn": deps,
                "condition": r.condition,
                "existing": r.existing,
                "deployment": r.deployment.as_ref().map(|d| normalize(d)),
            }),
        );
    }
    json!({ "resources": resources, "outputs": plan.outputs_json() })
}

fn strip_template(props: &Json) -> Json {
    let mut p = props.clone();
    if let Some(o) = p.as_object_mut() {
        o.remove("template");
    }
    p
}

fn run(dir: &Path, file: &str) -> Result<Json, Vec<String>> {
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let (template, diags) = Template::parse(cairn_json::parse(&text).unwrap());
    let mut errors: Vec<String> = diags
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.message.clone())
        .collect();
    let params_path = ["params.json", "main.parameters.json"]
        .iter()
        .map(|p| dir.join(p))
        .find(|p| p.exists());
    let params = match params_path {
        Some(p) => {
            ParametersFile::parse(&cairn_json::parse(&std::fs::read_to_string(p).unwrap()).unwrap())
                .0
        }
        None => ParametersFile::default(),
    };
    let ctx = context();
    let runtime = ContextRuntime { context: &ctx };
    let (plan, diags) = expand(
        DeploymentInput::new(&template, &params, ctx.clone()),
        &runtime,
    );
    errors.extend(
        diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("[{}] {}", d.code, d.message)),
    );
    if !errors.is_empty() {
        errors.sort();
        errors.dedup();
        return Err(errors);
    }
    Ok(normalize(&plan.expect("plan")))
}

#[test]
fn both_encodings_expand_alike() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut mismatches = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let classic = run(dir, "main.json");
        let symbolic = run(dir, "main.symbolicnames.json");
        let status = match (&classic, &symbolic) {
            (Ok(a), Ok(b)) if a == b => "same plan".to_string(),
            (Err(a), Err(b)) if a == b => format!("same failure: {}", a.join("; ")),
            _ => {
                mismatches.push(name.clone());
                // Set CAIRN_DIFF_DUMP=dir to write both sides for a diff tool.
                if let Ok(dump) = std::env::var("CAIRN_DIFF_DUMP") {
                    for (side, result) in [("classic", &classic), ("symbolic", &symbolic)] {
                        let text = match result {
                            Ok(j) => serde_json::to_string_pretty(j).unwrap(),
                            Err(e) => e.join("\n"),
                        };
                        std::fs::write(Path::new(&dump).join(format!("{name}.{side}.json")), text)
                            .unwrap();
                    }
                }
                format!(
                    "DIFFERENT\n    main.json: {}\n    main.symbolicnames.json: {}",
                    classic
                        .as_ref()
                        .map(|j| j.to_string())
                        .unwrap_or_else(|e| e.join("; ")),
                    symbolic
                        .as_ref()
                        .map(|j| j.to_string())
                        .unwrap_or_else(|e| e.join("; "))
                )
            }
        };
        println!("{name}: {status}");
    }
    assert!(mismatches.is_empty(), "encodings differ for {mismatches:?}");
}
