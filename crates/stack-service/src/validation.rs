//! Stacks-mode validation of a stack body before it deploys: rule `stacks-extensibility-compat` (cairn-stacks-lint)
//! over the stack's template (inline, or the one its `templateLink` resolves to: a template spec version's main
//! template or a downloaded URI), its parameters (inline or from `parametersLink`) and its `extensionConfigs`.
//!
//! A stack keeps managing extension resources long after the deployment, so every extension config it is given must
//! be storable or re-fetchable (REP 0006). Findings of error level refuse the operation with 400
//! `InvalidTemplateDeployment` whose `details` are the findings (code, JSON path, message; never a value).

use cairn_arm::ArmError;
use cairn_arm::models::deployment::{DeploymentMode, DeploymentProperties};
use cairn_arm::models::parameters::DeploymentParameters;
use cairn_arm::models::stack::{
    DeploymentStack, DeploymentStackProperties, DeploymentStackValidateProperties,
    DeploymentStackValidateResult, ResourceReference,
};
use cairn_engine::Engine;
use cairn_engine::stacks_rules::stacks_mode_findings;
use serde_json::Value;

use crate::request::{
    deployment_of, deployment_scope_of, link_without_credentials, public_parameters, stack_id,
    validate_body,
};
use crate::service::StackService;

/// Lints an inline stack template (a `templateLink` is linted by [`check_stack_template`], which resolves it).
/// `Ok` when nothing of error level is found.
pub(crate) fn check_stack_extension_configs(
    stack_name: &str,
    properties: &DeploymentStackProperties,
) -> Result<(), ArmError> {
    let Some(template) = &properties.template else {
        return Ok(());
    };
    lint(
        stack_name,
        template,
        properties.parameters.as_ref(),
        properties,
        "properties.template",
    )
}

/// Lints the template the stack deploys: the inline one, or the template its `templateLink` resolves to through
/// `engine` (a missing template spec version or a failed download is refused with the engine's ARM error), with
/// the parameters its `parametersLink` holds. `Ok` when nothing of error level is found.
/// The stack service's PUT and validate run it before anything is deployed.
pub(crate) async fn check_stack_template(
    engine: &Engine,
    stack_name: &str,
    properties: &DeploymentStackProperties,
) -> Result<(), ArmError> {
    if properties.template_link.is_none() && properties.parameters_link.is_none() {
        return check_stack_extension_configs(stack_name, properties);
    }
    let (template, parameters) = engine
        .resolve_template(&deployment_properties(properties))
        .await?;
    let target = if properties.template_link.is_some() {
        "properties.templateLink"
    } else {
        "properties.template"
    };
    lint(
        stack_name,
        &template,
        parameters.as_ref(),
        properties,
        target,
    )
}

/// The deployment request parts of a stack body that name its template and parameters.
fn deployment_properties(properties: &DeploymentStackProperties) -> DeploymentProperties {
    let mut deployment = DeploymentProperties::new(DeploymentMode::Incremental);
    deployment.template = properties.template.clone();
    deployment.template_link = properties.template_link.clone();
    deployment.parameters = properties.parameters.clone();
    deployment.parameters_link = properties.parameters_link.clone();
    deployment.extension_configs = properties.extension_configs.clone();
    deployment
}

/// Runs seed 000's stacks-mode rules (the engine's, which it applies again to the deployment) over `template`
/// with `parameters` and the stack's extension configs; template findings are reported under `template_target`.
fn lint(
    stack_name: &str,
    template: &Value,
    parameters: Option<&DeploymentParameters>,
    properties: &DeploymentStackProperties,
    template_target: &str,
) -> Result<(), ArmError> {
    let findings = stacks_mode_findings(
        template,
        parameters,
        properties.extension_configs.as_ref(),
        (template_target, "properties"),
    );
    if findings.is_empty() {
        return Ok(());
    }
    Err(ArmError::new(
        400,
        "InvalidTemplateDeployment",
        format!(
            "The template deployment of deployment stack '{stack_name}' is not valid for a deployment stack: {} \
             extension config value(s) can neither be stored nor fetched again when the stack deletes resources. \
             See inner errors for details.",
            findings.len()
        ),
    )
    .with_details(findings))
}

impl StackService {
    /// Validates a stack body and its deployment without running anything (`POST .../validate`). An invalid
    /// request is `Err` (400 with the error; the server wraps it in a `DeploymentStackValidateResult`).
    pub async fn validate(
        &self,
        scope: &str,
        name: &str,
        request: DeploymentStack,
    ) -> Result<DeploymentStackValidateResult, ArmError> {
        cairn_arm::names::validate_deployment_name(name)?;
        let id = stack_id(scope, name)?;
        validate_body(&request.properties)?;
        check_stack_template(&self.engine(), name, &request.properties).await?;
        let deployment_scope = deployment_scope_of(scope, &request.properties)?;
        let validated = self
            .inner
            .engine
            .validate(&deployment_scope, name, deployment_of(&request))
            .await
            .map_err(|e| e.to_arm())?;
        if let Some(error) = validated.error {
            return Err(ArmError::from_detail(400, error));
        }
        let props = validated.properties.unwrap_or_default();
        let validated_resources = props
            .validated_resources
            .iter()
            .flatten()
            .map(ResourceReference::from_output_resource)
            .collect();
        let p = &request.properties;
        Ok(DeploymentStackValidateResult {
            id: Some(id.to_string()),
            name: Some(name.to_owned()),
            resource_type: Some(DeploymentStack::TYPE.to_owned()),
            system_data: None,
            error: None,
            properties: Some(DeploymentStackValidateProperties {
                action_on_unmanage: Some(p.action_on_unmanage.clone()),
                correlation_id: props.correlation_id,
                deny_settings: Some(p.deny_settings.clone()),
                deployment_scope: Some(deployment_scope),
                description: p.description.clone(),
                parameters: public_parameters(p),
                template_link: p.template_link.as_ref().map(link_without_credentials),
                validated_resources: Some(validated_resources),
                deployment_extensions: props.extensions,
                validation_level: p.validation_level.clone(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_arm::ResourceId;
    use cairn_engine::{EngineSettings, Providers};
    use cairn_host::{ExtensionHost, HostSettings, Registry};
    use cairn_store::Store;
    use serde_json::json;

    use super::*;

    const RG: &str = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg1";

    async fn engine(dir: &std::path::Path) -> Engine {
        let store: Arc<dyn Store> = Arc::new(
            cairn_store_sqlite::SqliteStore::open(dir)
                .await
                .expect("store"),
        );
        let host = Arc::new(ExtensionHost::new(
            Arc::new(Registry::new()),
            HostSettings::default(),
            "http://localhost/cairn-test",
        ));
        Engine::new(store, host, Providers::empty(), EngineSettings::default()).expect("engine")
    }

    /// A template whose nested deployment configures the Kubernetes extension's `auth.kubeConfig` from `source`
    /// (a secure parameter is a value a stack can neither store nor fetch again).
    fn secure_config_template(source: Value) -> Value {
        json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.2-experimental",
            "contentVersion": "1.0.0.0",
            "parameters": {"secureParam": {"type": "securestring"}},
            "resources": {"cluster": {
                "type": "Microsoft.Resources/deployments",
                "apiVersion": "2025-04-01",
                "name": "cluster",
                "properties": {
                    "expressionEvaluationOptions": {"scope": "inner"},
                    "mode": "Incremental",
                    "extensionConfigs": {"k8s": {
                        "auth": {"kubeConfig": source},
                        "namespace": {"value": "default"}
                    }},
                    "template": {
                        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                        "languageVersion": "2.2-experimental",
                        "contentVersion": "1.0.0.0",
                        "extensions": {"k8s": {"name": "Kubernetes", "version": "1.0.0", "config": {
                            "namespace": {"type": "string", "defaultValue": "default"},
                            "kubeConfig": {"type": "secureString"}
                        }}},
                        "resources": {}
                    }
                }
            }}
        })
    }

    async fn put_spec(engine: &Engine, version: &str, main: Value) -> String {
        let spec = format!("{RG}/providers/Microsoft.Resources/templateSpecs/stackspec");
        let version_id = format!("{spec}/versions/{version}");
        for (id, body) in [
            (spec.clone(), json!({"location": "westus"})),
            (
                version_id.clone(),
                json!({"location": "westus", "properties": {"mainTemplate": main}}),
            ),
        ] {
            let id = ResourceId::parse(&id).expect("id");
            let provider = engine
                .providers()
                .get(&id.resource_type())
                .expect("provider")
                .clone();
            provider.put(&id, "2022-02-01", &body).await.expect("put");
        }
        version_id
    }

    fn stack_properties(link: Value) -> DeploymentStackProperties {
        serde_json::from_value(json!({
            "templateLink": link,
            "parameters": {"secureParam": {"value": "kube-secret-material"}},
            "actionOnUnmanage": {"resources": "detach"},
            "denySettings": {"mode": "none"}
        }))
        .expect("stack properties")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_linked_template_is_linted_once_resolved() {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = engine(dir.path()).await;
        let bad = put_spec(
            &engine,
            "1.0",
            secure_config_template(json!({"value": "[parameters('secureParam')]"})),
        )
        .await;
        let properties = stack_properties(json!({"id": bad}));
        // The inline check cannot see it; the resolving one refuses it.
        assert!(check_stack_extension_configs("s", &properties).is_ok());
        let error = check_stack_template(&engine, "s", &properties)
            .await
            .expect_err("a secure parameter in an extension config");
        assert_eq!(
            (error.status(), error.detail().code()),
            (400, "InvalidTemplateDeployment")
        );
        let response = serde_json::to_value(error.to_response()).expect("json");
        let details = &response["error"]["details"];
        assert_eq!(details.as_array().map(Vec::len), Some(1), "{response:#}");
        assert!(
            details[0]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("secureParam")
        );
        assert_eq!(details[0]["code"], "stacks-extensibility-compat");
        let target = details[0]["target"].as_str().unwrap_or_default();
        assert!(
            target.starts_with(
                "properties.templateLink.resources.cluster.properties.extensionConfigs.k8s"
            ),
            "{target}"
        );
        assert!(!response.to_string().contains("kube-secret-material"));

        let fine = secure_config_template(json!({"keyVaultReference": {
            "keyVault": {"id": format!("{RG}/providers/Microsoft.KeyVault/vaults/ops")},
            "secretName": "kubeconfig"
        }}));
        let good = put_spec(&engine, "2.0", fine).await;
        check_stack_template(&engine, "s", &stack_properties(json!({"id": good})))
            .await
            .expect("nothing to refuse");

        let missing =
            format!("{RG}/providers/Microsoft.Resources/templateSpecs/stackspec/versions/9.0");
        let error = check_stack_template(&engine, "s", &stack_properties(json!({"id": missing})))
            .await
            .expect_err("no such version");
        assert_eq!(
            (error.status(), error.detail().code()),
            (404, "TemplateSpecVersionNotFound")
        );
    }
}
