//! The step-by-step expansion API as a deployment engine drives it: evaluate each resource after its
//! dependencies are "deployed", answer `reference()` from provider state, run nested deployments as children.

use std::cell::RefCell;
use std::collections::HashMap;

use cairn_eval::Value;
use cairn_template::{
    DeploymentContext, DeploymentInput, Expansion, KeyVaultReference, Plan, ReferenceRequest,
    RuntimeHook, Template,
};
use serde_json::json;

/// Provider state: what "deployed" resources report back (not what the template declared).
#[derive(Default)]
struct Deployed(RefCell<HashMap<String, Value>>);

impl RuntimeHook for Deployed {
    fn reference(&self, request: &ReferenceRequest<'_>) -> Option<Value> {
        self.0
            .borrow()
            .get(&request.resource_id.to_ascii_lowercase())
            .cloned()
    }
    fn list(&self, _: &str, _: &str, _: &str, _: Option<&Value>) -> Option<Value> {
        None
    }
    fn key_vault_secret(&self, _: &KeyVaultReference) -> Option<Value> {
        None
    }
}

fn deploy(expansion: Expansion<'_>, hook: &Deployed) -> Plan {
    for &i in expansion.order() {
        let identity = expansion.resource(i);
        let Some(body) = expansion.evaluate(i).unwrap_or_else(|d| panic!("{d:?}")) else {
            continue;
        };
        if identity.nested_deployment {
            let nested = expansion.nested(i).unwrap();
            let child = expansion.expand_nested(&nested, hook).unwrap();
            let plan = deploy(child, hook);
            expansion.set_nested_plan(i, plan);
            continue;
        }
        // The provider adds server-side state to what was declared.
        let mut props = body
            .as_object()
            .and_then(|b| b.get("properties"))
            .cloned()
            .unwrap_or_default();
        if let Value::Object(o) = &mut props {
            o.insert("provisioningState", Value::from("Succeeded"));
            o.insert(
                "endpoint",
                Value::from(format!(
                    "https://{}.example",
                    identity.name.clone().unwrap_or_default()
                )),
            );
        }
        hook.0
            .borrow_mut()
            .insert(identity.key.to_ascii_lowercase(), props);
    }
    let outputs = expansion.outputs().unwrap_or_else(|d| panic!("{d:?}"));
    expansion.finish(outputs)
}

#[test]
fn reference_sees_provider_state_and_nested_outputs() {
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": { "prefix": { "type": "string", "defaultValue": "app" } },
        "resources": [
            { "type": "My.Rp/stores", "apiVersion": "2024-01-01", "name": "[concat(parameters('prefix'), '-store')]", "properties": { "size": 3 } },
            { "type": "My.Rp/apps", "apiVersion": "2024-01-01", "name": "[concat(parameters('prefix'), '-web')]",
              "properties": { "storeEndpoint": "[reference(resourceId('My.Rp/stores', concat(parameters('prefix'), '-store'))).endpoint]" } },
            { "type": "Microsoft.Resources/deployments", "apiVersion": "2025-04-01", "name": "inner",
              "properties": {
                "expressionEvaluationOptions": { "scope": "inner" },
                "mode": "Incremental",
                "parameters": { "web": { "value": "[reference(resourceId('My.Rp/apps', concat(parameters('prefix'), '-web'))).storeEndpoint]" } },
                "template": {
                  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                  "contentVersion": "1.0.0.0",
                  "parameters": { "web": { "type": "string" } },
                  "resources": [],
                  "outputs": { "echo": { "type": "string", "value": "[toUpper(parameters('web'))]" } }
                } } }
        ],
        "outputs": {
            "web": { "type": "string", "value": "[reference(resourceId('My.Rp/apps', 'app-web')).storeEndpoint]" },
            "nested": { "type": "string", "value": "[reference('inner').outputs.echo.value]" }
        }
    });
    let (template, diags) = Template::parse(cairn_json::Node::from_json(&template));
    assert!(diags.is_empty(), "{diags:?}");
    let hook = Deployed::default();
    let input = DeploymentInput {
        template: &template,
        parameters: Vec::new(),
        extension_configs: Vec::new(),
        context: DeploymentContext::default(),
    };
    let expansion = Expansion::start(input, &hook).unwrap();
    let identities = expansion.resources();
    assert_eq!(identities.len(), 3);
    // Implicit dependencies from reference(): the app waits for the store, the module for the app.
    assert_eq!(identities[1].depends_on, vec![0]);
    assert_eq!(identities[2].depends_on, vec![1]);
    assert!(identities[2].nested_deployment);
    let plan = deploy(expansion, &hook);
    assert_eq!(plan.resources.len(), 3);
    assert!(
        plan.resources[2].deployment.is_some(),
        "the module's child plan is recorded"
    );
    let out = |name: &str| plan.output(name).unwrap().value.to_json();
    assert_eq!(out("web"), json!("https://app-store.example"));
    assert_eq!(out("nested"), json!("HTTPS://APP-STORE.EXAMPLE"));
}

#[test]
fn start_reports_errors() {
    let template = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "resources": [
            { "type": "A.B/c", "apiVersion": "1", "name": "a", "dependsOn": ["b"] },
            { "type": "A.B/c", "apiVersion": "1", "name": "b", "dependsOn": ["a"] }
        ]
    });
    let (template, _) = Template::parse(cairn_json::Node::from_json(&template));
    let hook = Deployed::default();
    let input = DeploymentInput {
        template: &template,
        parameters: Vec::new(),
        extension_configs: Vec::new(),
        context: DeploymentContext::default(),
    };
    let errors = Expansion::start(input, &hook)
        .err()
        .expect("a cycle is an error");
    assert!(
        errors
            .iter()
            .any(|d| d.message.contains("Circular dependency")),
        "{errors:?}"
    );
}
