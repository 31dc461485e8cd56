//! The linter on Bicep's own compiled samples (shared conformance data): which configs a stack would refuse.

use std::path::PathBuf;

use cairn_stacks_lint::{LintInput, Mode, RULE_CODE, Rules, lint};
use cairn_template::{Diagnostic, SourceFile};

fn sample(path: &str) -> SourceFile {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/extensibility")
        .join(path);
    let text = std::fs::read_to_string(&full)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()));
    SourceFile::new(path, text)
}

fn run(template: &str, parameters: Option<&str>, mode: Mode) -> Vec<Diagnostic> {
    let template = sample(template);
    let parameters = parameters.map(sample);
    lint(&LintInput {
        template: &template,
        parameters: parameters.as_ref(),
        rules: &Rules::default(),
        mode,
        rules_base: None,
    })
}

fn targets(diags: &[Diagnostic]) -> Vec<&str> {
    diags.iter().map(|d| d.target.as_str()).collect()
}

/// The AKS sample passes the cluster's kubeconfig as a secure module parameter into a v1 `imports` config.
#[test]
fn aks_kubeconfig_from_a_secure_parameter() {
    let diags = run("aks/main.json", Some("aks/params.json"), Mode::Stacks);
    assert_eq!(
        targets(&diags),
        ["resources[2].properties.template.imports.kubernetes.config.kubeConfig"]
    );
    let d = &diags[0];
    assert_eq!(d.code, RULE_CODE);
    assert!(d.is_error());
    assert!(
        d.message.contains("the secure parameter 'kubeConfig'"),
        "{}",
        d.message
    );
    assert!(d.message.contains("keyVaultReference"), "{}", d.message);
    assert_eq!((d.line, d.column), (Some(181), Some(33)));
    // An ordinary deployment may do this: the same finding, as a warning.
    let standard = run("aks/main.json", Some("aks/params.json"), Mode::Standard);
    assert_eq!(standard.len(), 1);
    assert!(!standard[0].is_error());
}

/// Bicep's `Extensions` baseline: ten module `extensionConfigs` shapes.
#[test]
fn extensions_baseline() {
    let diags = run("Extensions_CRLF/main.json", None, Mode::Stacks);
    let mut got = targets(&diags);
    got.sort_unstable();
    // No parameters file: the root's Kubernetes config supplies neither 'namespace' nor 'kubeConfig'.
    assert_eq!(
        got,
        [
            "extensionConfigs.k8s",
            "extensionConfigs.k8s",
            "extensions.extWithSecureStr1.config.requiredSecureString.defaultValue",
            "resources.moduleExtConfigsConditionalMixed.properties.extensionConfigs.k8s.kubeConfig",
            "resources.moduleExtConfigsFromParams.properties.extensionConfigs.k8s.kubeConfig",
            "resources.moduleExtConfigsFromParams.properties.extensionConfigs.k8s.kubeConfig",
            "resources.moduleWithExtsWithAliases.properties.extensionConfigs.k8s.kubeConfig",
            "resources.moduleWithExtsWithoutAliases.properties.extensionConfigs.kubernetes.kubeConfig",
        ]
    );
    // Inheritance (whole, piecemeal, ternary), Key Vault references and list*/reference() outputs pass.
    for fine in [
        "moduleExtConfigFromKeyVaultReference",
        "moduleExtConfigFromReferences",
        "moduleWithExtsUsingFullInheritance",
        "moduleWithExtsUsingPiecemealInheritance",
        "moduleWithExtsEmpty",
    ] {
        assert!(
            !diags.iter().any(|d| d.target.contains(fine)),
            "{fine} should pass"
        );
    }
    // With the parameters file, the root's Kubernetes config is known to be missing.
    let with_params = run(
        "Extensions_CRLF/main.json",
        Some("Extensions_CRLF/params.json"),
        Mode::Stacks,
    );
    let missing: Vec<&Diagnostic> = with_params
        .iter()
        .filter(|d| d.target == "extensionConfigs.k8s")
        .collect();
    assert_eq!(missing.len(), 2);
    assert!(
        missing
            .iter()
            .all(|d| d.message.contains("requires the config property"))
    );
}

/// Microsoft Graph needs no config: nothing to report.
#[test]
fn microsoft_graph_has_nothing_to_report() {
    assert!(run("microsoftGraph/main.json", None, Mode::Stacks).is_empty());
    assert!(run("microsoftGraph/main.existing.json", None, Mode::Stacks).is_empty());
}
