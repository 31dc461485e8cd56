//! Issue 44's real-world shapes, deployed: what validation and what-if leave open (a nested template the parent
//! computes, a module output or a copy count known only at deployment, a `list*()` inside an expression parameter
//! entry, a resource name in a module) gets its real runtime value when the deployment runs, and what-if says what
//! it cannot tell yet.

mod common;

use std::sync::Arc;
use std::time::Duration;

use cairn_arm::models::deployment::DeploymentWhatIf;
use cairn_engine::Providers;
use common::*;
use serde_json::{Value, json};

const SCHEMA: &str =
    "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#";

/// A v2 module template with the fake extension as `fake`, `parameters`, `resources` and `outputs`.
fn fake_module(parameters: Value, resources: Value, outputs: Value) -> Value {
    json!({
        "$schema": SCHEMA,
        "languageVersion": "2.2-experimental",
        "contentVersion": "1.0.0.0",
        "extensions": { "fake": { "name": "Fake", "version": "1.0.0" } },
        "parameters": parameters,
        "resources": resources,
        "outputs": outputs
    })
}

/// An inner-scope module `name` with `parameters` entries and `template` (an object or an expression).
fn module(name: &str, parameters: Value, template: Value) -> Value {
    json!({ "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": name,
            "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                            "parameters": parameters, "template": template } })
}

/// Validates `template` through the engine (preflight with no runtime values), expecting success.
async fn validates(env: &TestEnv, name: &str, template: &Value) {
    let result = env
        .engine
        .validate(RG, name, request(template.clone(), json!({})))
        .await
        .unwrap_or_else(|e| panic!("{name} does not validate: {e:?}"));
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(
        result["properties"]["provisioningState"], "Succeeded",
        "{result:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_the_parent_computes_runs_its_escaped_expressions_in_the_child() {
    let env = setup().await;
    // The variable's `[[` strings are the child's expressions: the parent only strips the escape.
    let inner = fake_module(
        json!({ "n": { "type": "string" } }),
        json!({ "w": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                       "properties": { "name": "[[parameters('n')]" } } }),
        json!({ "made": { "type": "string", "value": "[[reference('w').createdBy]" } }),
    );
    // A template handed out by another deployment's output: evaluating that output strips the escape.
    let factory = fake_module(
        json!({}),
        json!({}),
        json!({ "tpl": { "type": "object", "value": fake_module(
            json!({ "n": { "type": "string" } }),
            json!({ "w": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                           "properties": { "name": "[[parameters('n')]" } } }),
            json!({ "made": { "type": "string", "value": "[[reference('w').createdBy]" } }),
        ) } }),
    );
    let mut template = fake_template(
        json!({
            "fromVariable": module("fromVariable", json!({ "n": { "value": "var" } }), json!("[variables('inner')]")),
            "fromParameter": {
                "copy": { "name": "fromParameter", "count": 2 },
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01",
                "name": "[format('param{0}', copyIndex())]",
                "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                "parameters": { "n": { "value": "[format('p{0}', copyIndex())]" } },
                                "template": "[parameters('tpl')]" }
            },
            "factory": module("factory", json!({}), factory),
            "fromOutput": module("fromOutput", json!({ "n": { "value": "out" } }),
                                 json!("[reference('factory').outputs.tpl.value]"))
        }),
        json!({
            "fromVariable": { "type": "string", "value": "[reference('fromVariable').outputs.made.value]" },
            "fromParameter": { "type": "string", "value": "[reference('fromParameter[1]').outputs.made.value]" },
            "fromOutput": { "type": "string", "value": "[reference('fromOutput').outputs.made.value]" }
        }),
    );
    template["variables"] = json!({ "inner": inner });
    // A parameter's value is never evaluated: its template's expressions are the child's as written.
    template["parameters"] = json!({ "tpl": { "type": "object" } });
    let tpl = fake_module(
        json!({ "n": { "type": "string" } }),
        json!({ "w": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                       "properties": { "name": "[parameters('n')]" } } }),
        json!({ "made": { "type": "string", "value": "[reference('w').createdBy]" } }),
    );
    let parameters = json!({ "tpl": { "value": tpl } });
    let result = env
        .engine
        .validate(
            RG,
            "computed",
            request(template.clone(), parameters.clone()),
        )
        .await
        .expect("validates");
    assert_eq!(
        serde_json::to_value(result).unwrap()["properties"]["provisioningState"],
        "Succeeded"
    );
    let record = deploy(&env.engine, RG, "computed", request(template, parameters)).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let outputs = &record["properties"]["outputs"];
    assert_eq!(outputs["fromVariable"]["value"], "fake");
    assert_eq!(outputs["fromParameter"]["value"], "fake");
    assert_eq!(outputs["fromOutput"]["value"], "fake");
    assert_eq!(env.fake.names(), vec!["out", "p0", "p1", "var"]);
    // The child's record shows the template it ran: the parent's computed one.
    let child = serde_json::to_value(env.engine.get(RG, "fromVariable").await.unwrap()).unwrap();
    assert_eq!(state(&child), "Succeeded", "{child:#}");
    assert_eq!(child["properties"]["outputs"]["made"]["value"], "fake");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_output_known_at_deployment_reaches_the_parent_as_its_value() {
    let env = setup().await;
    let dns =
        json!([{ "fqdn": "st.privatelink.blob.core.windows.net", "ipAddresses": ["10.0.0.4"] }]);
    let endpoint = fake_module(
        json!({}),
        json!({ "pe": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                        "properties": { "name": "pe", "customDnsConfigs": dns } } }),
        json!({
            "customDnsConfigs": { "type": "array", "value": "[reference('pe').customDnsConfigs]" },
            "madeBy": { "type": "array", "value": "[createArray(reference('pe').createdBy)]" }
        }),
    );
    let records = fake_module(
        json!({ "configs": { "type": "array" } }),
        json!({ "r": { "extension": "fake", "type": "widget", "apiVersion": "v1",
                       "properties": { "name": "records", "fqdn": "[parameters('configs')[0].fqdn]" } } }),
        json!({}),
    );
    let template = fake_template(
        json!({
            "endpoint": module("endpoint", json!({}), endpoint),
            "records": module("records",
                              json!({ "configs": { "value": "[reference('endpoint').outputs.customDnsConfigs.value]" } }),
                              records),
            "copy": widget("copy", json!({ "dns": "[reference('endpoint').outputs.customDnsConfigs.value]" }))
        }),
        json!({
            "customDnsConfigs": { "type": "array", "value": "[reference('endpoint').outputs.customDnsConfigs.value]" },
            "madeBy": { "type": "array", "value": "[reference('endpoint').outputs.madeBy.value]" }
        }),
    );
    validates(&env, "dns", &template).await;
    // What-if hands the module's outputs to its parent as a deployment does: the sibling module receives an
    // unknown array (not its expression text, which its array parameter would refuse) and is previewed.
    let what_if: DeploymentWhatIf = serde_json::from_value(
        json!({ "properties": { "mode": "Incremental", "template": template.clone() } }),
    )
    .unwrap();
    let result =
        serde_json::to_value(env.engine.what_if(RG, "dns", what_if).await.unwrap()).unwrap();
    let changes = result["properties"]["changes"].as_array().unwrap();
    for name in ["pe", "records", "copy"] {
        let change = changes
            .iter()
            .find(|c| c["identifiers"]["name"] == name)
            .unwrap_or_else(|| panic!("no change for {name}: {changes:#?}"));
        assert_eq!(change["changeType"], "Create", "{change:#}");
    }
    let record = deploy(&env.engine, RG, "dns", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let outputs = &record["properties"]["outputs"];
    assert_eq!(outputs["customDnsConfigs"]["value"], dns);
    assert_eq!(outputs["madeBy"]["value"], json!(["fake"]));
    assert_eq!(env.fake.resource("widget", "copy").unwrap()["dns"], dns);
    assert_eq!(
        env.fake.resource("widget", "records").unwrap()["fqdn"],
        "st.privatelink.blob.core.windows.net"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_counts_over_runtime_values_expand_when_the_values_exist() {
    let env = setup().await;
    // One instance per element: the count is known before the deployment, the element's id only after.
    let per_subnet = fake_module(
        json!({ "subnets": { "type": "array" } }),
        json!({ "nsg": { "copy": { "name": "nsg", "count": "[length(parameters('subnets'))]" },
                         "extension": "fake", "type": "widget", "apiVersion": "v1",
                         "properties": { "name": "[format('nsg-{0}', copyIndex())]",
                                         "subnet": "[parameters('subnets')[copyIndex()].id]" } } }),
        json!({ "count": { "type": "int", "value": "[length(parameters('subnets'))]" } }),
    );
    // A count only the deployment knows: the module's loop is expanded when it runs.
    let per_record = fake_module(
        json!({ "records": { "type": "array" } }),
        json!({
            "record": { "copy": { "name": "record", "count": "[length(parameters('records'))]" },
                        "extension": "fake", "type": "widget", "apiVersion": "v1",
                        "properties": { "name": "[parameters('records')[copyIndex()]]" } },
            "after": { "extension": "fake", "type": "widget", "apiVersion": "v1", "dependsOn": ["record"],
                       "properties": { "name": "after" } }
        }),
        json!({ "names": { "type": "array", "copy": { "count": "[length(parameters('records'))]",
                                                       "input": "[parameters('records')[copyIndex()]]" } } }),
    );
    let template = fake_template(
        json!({
            "vnet": widget("vnet", json!({ "records": ["rec-a", "rec-b"] })),
            "subnets": module("subnets",
                              json!({ "subnets": { "value": "[createArray(createObject('id', reference('vnet').createdBy))]" } }),
                              per_subnet),
            "records": {
                "copy": { "name": "records", "count": 1 },
                "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01",
                "name": "[format('records{0}', copyIndex())]",
                "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                                "parameters": { "records": { "value": "[reference('vnet').records]" } },
                                "template": per_record }
            }
        }),
        json!({
            "count": { "type": "int", "value": "[reference('subnets').outputs.count.value]" },
            "names": { "type": "array", "value": "[reference('records[0]').outputs.names.value]" }
        }),
    );
    validates(&env, "loops", &template).await;
    let record = deploy(&env.engine, RG, "loops", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(record["properties"]["outputs"]["count"]["value"], 1);
    assert_eq!(
        record["properties"]["outputs"]["names"]["value"],
        json!(["rec-a", "rec-b"])
    );
    assert_eq!(
        env.fake.resource("widget", "nsg-0").unwrap()["subnet"],
        "fake"
    );
    assert_eq!(
        env.fake.names(),
        vec!["after", "nsg-0", "rec-a", "rec-b", "vnet"]
    );
    let log = env.fake.state.log.lock().unwrap().clone();
    let at = |entry: &str| log.iter().position(|l| l == entry).unwrap();
    assert!(at("end:rec-a") < at("start:after") && at("end:rec-b") < at("start:after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_count_over_its_own_deployments_resource_is_refused_when_it_runs() {
    let env = setup().await;
    let template = fake_template(
        json!({
            "vnet": widget("vnet", json!({ "records": ["a"] })),
            "record": { "copy": { "name": "record", "count": "[length(reference('vnet').records)]" },
                        "extension": "fake", "type": "widget", "apiVersion": "v1",
                        "properties": { "name": "[format('r{0}', copyIndex())]" } }
        }),
        json!({}),
    );
    let record = deploy(&env.engine, RG, "own", request(template, json!({}))).await;
    assert_eq!(state(&record), "Failed", "{record:#}");
    let error = record["properties"]["error"].to_string();
    assert!(
        error.contains("The copy count is not known when the deployment needs it"),
        "{error}"
    );
    assert_eq!(env.fake.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_call_in_an_expression_parameter_entry_reaches_the_child() {
    let clusters = Arc::new(ClusterProvider::default());
    let providers = Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let env = setup_with(settings(), Duration::from_millis(5), providers).await;
    let credentials = "listCredentials(resourceId('Test.Rp/clusters', 'aks1'), '2024-01-01')";
    let child = json!({
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "parameters": { "creds": { "type": "object" }, "first": { "type": "object" } },
        // Preflight evaluates this body before anything is listed: the value must be unknown then, not null.
        "resources": [
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks2",
              "properties": { "size": "[length(parameters('creds').kubeconfigs)]" } }
        ],
        "outputs": {
            "count": { "type": "int", "value": "[length(parameters('creds').kubeconfigs)]" },
            "name": { "type": "string", "value": "[parameters('first').name]" }
        }
    });
    let template = json!({
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks1", "properties": { "size": 3 } },
            { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "consumer",
              "dependsOn": ["[resourceId('Test.Rp/clusters', 'aks1')]"],
              "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                              "parameters": {
                                  "creds": format!("[createObject('value', {credentials})]"),
                                  "first": format!("[createObject('value', createObject('name', {credentials}.kubeconfigs[0].name))]")
                              },
                              "template": child } }
        ],
        "outputs": {
            "count": { "type": "int", "value": "[reference('consumer').outputs.count.value]" },
            "name": { "type": "string", "value": "[reference('consumer').outputs.name.value]" }
        }
    });
    validates(&env, "listed", &template).await;
    let record = deploy(&env.engine, RG, "listed", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    assert_eq!(record["properties"]["outputs"]["count"]["value"], 1);
    assert_eq!(record["properties"]["outputs"]["name"]["value"], "admin");
    let aks2 = clusters
        .resources
        .lock()
        .unwrap()
        .iter()
        .find(|(id, _)| id.ends_with("/clusters/aks2"))
        .map(|(_, r)| r.clone())
        .expect("aks2 deployed");
    assert_eq!(aks2["properties"]["size"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_names_known_at_deployment_get_their_values_when_the_module_runs() {
    let clusters = Arc::new(ClusterProvider::default());
    let providers = Providers::empty().with(CLUSTER_TYPE, clusters.clone());
    let env = setup_with(settings(), Duration::from_millis(5), providers).await;
    let state_of = "reference(resourceId('Test.Rp/clusters', 'aks1')).provisioningState";
    // Names from parameters the parent computes with `reference()`: unknown at preflight, real when it runs.
    let child = json!({
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "parameters": { "principalId": { "type": "string" }, "principalIds": { "type": "array" } },
        "resources": [
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01",
              "name": "[format('one-{0}', parameters('principalId'))]", "properties": { "size": 1 } },
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01",
              "copy": { "name": "loop", "count": "[length(parameters('principalIds'))]" },
              "name": "[parameters('principalIds')[copyIndex()]]", "properties": { "size": 2 } },
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "after", "dependsOn": ["loop"],
              "properties": { "size": 3 } }
        ]
    });
    let template = json!({
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "Test.Rp/clusters", "apiVersion": "2024-01-01", "name": "aks1", "properties": { "size": 3 } },
            { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "rbac",
              "dependsOn": ["[resourceId('Test.Rp/clusters', 'aks1')]"],
              "properties": { "mode": "Incremental", "expressionEvaluationOptions": { "scope": "inner" },
                              "parameters": {
                                  "principalId": { "value": format!("[{state_of}]") },
                                  "principalIds": { "value": [format!("[format('{{0}}-a', {state_of})]"),
                                                              format!("[format('{{0}}-b', {state_of})]")] }
                              },
                              "template": child } }
        ]
    });
    validates(&env, "names", &template).await;
    let record = deploy(&env.engine, RG, "names", request(template, json!({}))).await;
    assert_eq!(state(&record), "Succeeded", "{record:#}");
    let mut names: Vec<String> = clusters
        .resources
        .lock()
        .unwrap()
        .keys()
        .map(|id| id.rsplit('/').next().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "after",
            "aks1",
            "one-succeeded",
            "succeeded-a",
            "succeeded-b"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_says_what_waits_for_the_deployment() {
    let env = setup().await;
    let per_record = fake_module(
        json!({ "records": { "type": "array" } }),
        json!({ "record": { "copy": { "name": "record", "count": "[length(parameters('records'))]" },
                            "extension": "fake", "type": "widget", "apiVersion": "v1",
                            "properties": { "name": "[parameters('records')[copyIndex()]]" } } }),
        json!({}),
    );
    let template = fake_template(
        json!({
            "vnet": widget("vnet", json!({ "records": ["a"] })),
            "records": module("records", json!({ "records": { "value": "[reference('vnet').records]" } }), per_record),
            "computed": module("computed", json!({}), json!("[reference('vnet').template]"))
        }),
        json!({}),
    );
    let request: DeploymentWhatIf = serde_json::from_value(
        json!({ "properties": { "mode": "Incremental", "template": template } }),
    )
    .unwrap();
    let result = env.engine.what_if(RG, "wait", request).await.unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(result["status"], "Succeeded", "{result:#}");
    let changes = result["properties"]["changes"].as_array().unwrap();
    let unsupported: Vec<&Value> = changes
        .iter()
        .filter(|c| c["changeType"] == "Unsupported")
        .collect();
    let reason = |what: &str| {
        unsupported
            .iter()
            .find(|c| {
                c["unsupportedReason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(what)
            })
            .unwrap_or_else(|| panic!("no change says {what:?}: {changes:#?}"))
    };
    let copy = reason(
        "The copy count at 'resources.record.copy.count' depends on a value known only while the deployment runs",
    );
    assert_eq!(copy["symbolicName"], "record");
    assert!(
        copy["deploymentId"]
            .as_str()
            .unwrap()
            .ends_with("/deployments/records")
    );
    let computed = reason("The nested deployment's template");
    assert_eq!(computed["symbolicName"], "computed");
    assert!(
        computed["unsupportedReason"]
            .as_str()
            .unwrap()
            .contains("[reference('vnet').template]")
    );
    assert_eq!(env.fake.count(), 0);
}
