//! A large template: hundreds of modules reading long variable chains. Checks that every module's finding is
//! reported (no budget ran out) and prints how long the analysis took (`--nocapture` to see it).

use std::time::Instant;

use cairn_stacks_lint::{LintInput, Mode, Rules, lint};
use cairn_template::SourceFile;
use serde_json::{Map, Value, json};

const MODULES: usize = 400;
const CHAIN: usize = 40;

fn large_template() -> String {
    let mut variables = Map::new();
    variables.insert("v0".into(), json!("[parameters('secret')]"));
    for i in 1..CHAIN {
        variables.insert(
            format!("v{i}"),
            json!(format!(
                "[if(parameters('flag'), toLower(variables('v{}')), createObject('a', variables('v{}')).a)]",
                i - 1,
                i - 1
            )),
        );
    }
    let mut resources = Map::new();
    for m in 0..MODULES {
        resources.insert(
            format!("mod{m}"),
            json!({
                "type": "Microsoft.Resources/deployments",
                "apiVersion": "2025-04-01",
                "name": format!("m{m}"),
                "properties": {
                    "expressionEvaluationOptions": { "scope": "inner" },
                    "extensionConfigs": { "k8s": {
                        "auth": { "kubeConfig": { "value": format!("[listClusterAdminCredential(resourceId('Microsoft.ContainerService/managedClusters', 'aks{m}'), '2024-02-01').kubeconfigs[0].value]") } },
                        "namespace": { "value": format!("[variables('v{}')]", CHAIN - 1) }
                    } },
                    "template": {
                        "languageVersion": "2.2-experimental",
                        "extensions": { "k8s": { "name": "Kubernetes", "version": "1.0.0" } },
                        "resources": {}
                    }
                }
            }),
        );
    }
    json!({
        "languageVersion": "2.2-experimental",
        "parameters": { "secret": { "type": "securestring" }, "flag": { "type": "bool" } },
        "variables": Value::Object(variables),
        "resources": Value::Object(resources)
    })
    .to_string()
}

#[test]
fn hundreds_of_modules() {
    let text = large_template();
    let template = SourceFile::new("main.json", text.as_str());
    let started = Instant::now();
    let diags = lint(&LintInput {
        template: &template,
        parameters: None,
        rules: &Rules::default(),
        mode: Mode::Stacks,
        rules_base: None,
    });
    let elapsed = started.elapsed();
    println!(
        "{MODULES} modules, {CHAIN}-variable chain, {} KiB: {} findings in {elapsed:?}",
        text.len() / 1024,
        diags.len()
    );
    // Each module's namespace is refused, once for the route through toLower() and once for the direct one.
    let mut targets: Vec<&str> = diags.iter().map(|d| d.target.as_str()).collect();
    targets.dedup();
    assert_eq!(
        targets.len(),
        MODULES,
        "every module's namespace is refused"
    );
    assert_eq!(diags.len(), 2 * MODULES);
    assert!(diags.iter().all(|d| d.is_error()
        && d.target.ends_with(".extensionConfigs.k8s.namespace")
        && d.message.contains("the secure parameter 'secret'")
        && d.message.contains("more steps")));
}
