//! Benchmark: expand a generated 800-resource template (copy loops, expression-heavy properties) and compare with
//! a baseline measured in the same run: `serde_json` parsing the template text plus serializing the expanded plan.
//!
//! Run: `cargo bench -p cairn-template --bench expand`. Prints the median of many iterations for each and the
//! ratio. Target (issue): expansion under 50 ms and at most 10x the baseline.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cairn_template::{
    DeploymentContext, DeploymentInput, Offline, ParametersFile, Template, expand,
};

/// 8 copy loops of 100 resources each, with string, array, object and lambda functions in every body.
fn generated_template() -> String {
    let mut resources = Vec::new();
    for loop_no in 0..8 {
        resources.push(format!(
            r#"{{
      "type": "Microsoft.Storage/storageAccounts",
      "apiVersion": "2023-01-01",
      "name": "[format('{{0}}{loop_no}x{{1}}', variables('prefix'), copyIndex())]",
      "location": "[parameters('location')]",
      "copy": {{ "name": "loop{loop_no}", "count": "[parameters('count')]" }},
      "dependsOn": [{dep}],
      "tags": {{
        "index": "[string(copyIndex())]",
        "hash": "[uniqueString(resourceGroup().id, string(copyIndex()), '{loop_no}')]",
        "[concat('k', copyIndex())]": "[toUpper(concat(variables('prefix'), '-', string(mul(copyIndex(), 3))))]"
      }},
      "sku": {{ "name": "[if(equals(mod(copyIndex(), 2), 0), 'Standard_LRS', 'Standard_GRS')]" }},
      "properties": {{
        "id": "[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet', format('sn{{0}}', copyIndex()))]",
        "guid": "[guid(subscription().id, string(copyIndex()))]",
        "list": "[map(range(0, 5), lambda('i', add(lambdaVariables('i'), copyIndex())))]",
        "merged": "[union(variables('base'), createObject('n', copyIndex(), 'even', equals(mod(copyIndex(), 2), 0)))]",
        "copy": [{{ "name": "rules", "count": 3, "input": {{ "priority": "[add(100, copyIndex('rules'))]", "name": "[format('rule-{{0}}', copyIndex('rules'))]" }} }}]
      }}
    }}"#,
            dep = if loop_no == 0 { String::new() } else { format!("\"loop{}\"", loop_no - 1) }
        ));
    }
    format!(
        r#"{{
  "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0",
  "parameters": {{
    "location": {{ "type": "string", "defaultValue": "westus" }},
    "count": {{ "type": "int", "defaultValue": 100 }}
  }},
  "variables": {{ "prefix": "bench", "base": {{ "a": 1, "b": {{ "c": [1, 2, 3] }} }} }},
  "resources": [{}],
  "outputs": {{ "first": {{ "type": "string", "value": "[reference(resourceId('Microsoft.Storage/storageAccounts', 'bench0x0'), '2023-01-01', 'Full').name]" }} }}
}}"#,
        resources.join(",\n")
    )
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn time<T>(iterations: usize, mut f: impl FnMut() -> T) -> Duration {
    for _ in 0..3 {
        black_box(f());
    }
    median(
        (0..iterations)
            .map(|_| {
                let start = Instant::now();
                black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let text = generated_template();
    // `cargo bench` passes `--bench`; under `cargo test --all-targets` this runs once as a smoke test.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let iterations = if benchmarking { 30 } else { 1 };
    let expand_once = || {
        let root = cairn_json::parse(&text).expect("generated template parses");
        let (template, _) = Template::parse(root);
        let params = ParametersFile::default();
        let (plan, diags) = expand(
            DeploymentInput::new(&template, &params, DeploymentContext::default()),
            &Offline,
        );
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        plan.expect("plan")
    };
    let plan = expand_once();
    assert_eq!(plan.resources.len(), 800);
    let plan_json = plan.to_json();
    let expand_time = time(iterations, expand_once);
    let baseline_time = time(iterations, || {
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        black_box(parsed);
        serde_json::to_string(&plan_json).expect("serializes")
    });
    let ratio = expand_time.as_secs_f64() / baseline_time.as_secs_f64();
    println!(
        "template: {} bytes, 800 resources (8 copy loops x 100)",
        text.len()
    );
    println!(
        "expand (parse + model + expand):      median {:>8.2} ms",
        expand_time.as_secs_f64() * 1e3
    );
    println!(
        "baseline (serde_json parse + to_string): median {:>8.2} ms",
        baseline_time.as_secs_f64() * 1e3
    );
    println!("ratio: {ratio:.2}x (target: expand < 50 ms and ratio <= 10x)");
}
