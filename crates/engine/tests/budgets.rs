//! Evaluation budgets in a deployment: a template whose variables double a string 39 times fails with
//! `EvaluationLimitExceeded` naming the JSON path and the limit — refused at validation when the doubling is
//! known up front, and failing the deployment when it starts from a runtime value — without the engine's memory
//! growing past the budget; the limits come from `EngineSettings::eval_limits`.

mod common;

use std::time::Duration;

use cairn_engine::{DeployOptions, EngineSettings, Providers};
use cairn_eval::{EvalLimits, LIMIT_EXCEEDED};
use common::*;
use serde_json::{Value, json};

/// The fake-extension template with `v{i}` = `v{i-1}` twice, used in widget `w`'s property; `v0` is `seed`.
fn doubling_from(seed: &str, times: usize) -> Value {
    let mut template = fake_template(
        json!({
            "a": widget("a", json!({})),
            "w": widget("w", json!({ "size": format!("[length(variables('v{times}'))]") })),
        }),
        json!({}),
    );
    template["resources"]["w"]["dependsOn"] = json!(["a"]);
    let mut variables = serde_json::Map::new();
    variables.insert("v0".into(), json!(seed));
    for i in 1..=times {
        variables.insert(
            format!("v{i}"),
            json!(format!(
                "[concat(variables('v{}'), variables('v{}'))]",
                i - 1,
                i - 1
            )),
        );
    }
    template["variables"] = Value::Object(variables);
    template
}

fn doubling(times: usize) -> Value {
    doubling_from("a", times)
}

/// Widget `w`'s property doubles `reference('a').createdBy` (known only once `a` is deployed) `times` times.
fn runtime_doubling(times: usize) -> Value {
    let size = format!(
        "[length(reduce(range(0, {times}), reference('a').createdBy, lambda('acc', 'i', concat(lambdaVariables('acc'), lambdaVariables('acc')))))]"
    );
    let mut template = fake_template(
        json!({ "a": widget("a", json!({})), "w": widget("w", json!({ "size": size })) }),
        json!({}),
    );
    template["resources"]["w"]["dependsOn"] = json!(["a"]);
    template
}

/// Every error in the record's error tree, flattened.
fn errors(error: &Value) -> Vec<&Value> {
    let mut out = vec![error];
    if let Some(details) = error["details"].as_array() {
        for d in details {
            out.extend(errors(d));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doubling_a_string_39_times_is_refused_at_validation_when_known_up_front() {
    let env = setup().await;
    let Err(refused) = env
        .engine
        .create_or_update(
            RG,
            "poison",
            request(doubling(39), json!({})),
            DeployOptions::default(),
        )
        .await
    else {
        panic!("the deployment was accepted");
    };
    let detail = format!("{refused:?}");
    assert!(detail.contains("InvalidTemplateDeployment"), "{detail}");
    assert!(detail.contains(LIMIT_EXCEEDED), "{detail}");
    assert!(detail.contains("resources.w.properties.size"), "{detail}");
    assert!(detail.contains("maxValueBytes = 4194304"), "{detail}");
    assert_eq!(env.fake.count(), 0, "nothing was sent to the extension");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doubling_a_runtime_value_39_times_fails_the_deployment_with_the_limit_error() {
    let env = setup().await;
    let record = deploy(
        &env.engine,
        RG,
        "poison",
        request(runtime_doubling(39), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    let all = errors(&record["properties"]["error"]);
    let limit = all
        .iter()
        .find(|e| e["code"] == LIMIT_EXCEEDED)
        .unwrap_or_else(|| panic!("no {LIMIT_EXCEEDED} in {record:#}"));
    let message = limit["message"].as_str().unwrap();
    assert!(message.contains("maxValueBytes = 4194304"), "{message}");
    assert!(
        limit["target"]
            .as_str()
            .is_some_and(|t| t.contains("properties.size")),
        "the target is the expression's JSON path: {limit:#}"
    );
    assert!(
        env.fake.resource("widget", "w").is_none(),
        "nothing was sent to the extension"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limits_come_from_the_engine_settings() {
    let env = setup_with(
        EngineSettings {
            eval_limits: EvalLimits {
                max_value_bytes: 1024,
                ..EvalLimits::default()
            },
            ..settings()
        },
        Duration::from_millis(5),
        Providers::empty(),
    )
    .await;
    let record = deploy(
        &env.engine,
        RG,
        "small",
        request(runtime_doubling(12), json!({})),
    )
    .await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    assert!(
        errors(&record["properties"]["error"])
            .iter()
            .any(|e| e["code"] == LIMIT_EXCEEDED
                && e["message"]
                    .as_str()
                    .unwrap()
                    .contains("maxValueBytes = 1024")),
        "{record:#}"
    );
    let ok = deploy(
        &env.engine,
        RG,
        "fits",
        request(runtime_doubling(5), json!({})),
    )
    .await;
    assert_eq!(state(&ok), "Succeeded", "{ok:#}");
}
