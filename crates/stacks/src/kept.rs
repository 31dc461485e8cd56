//! What a stack record keeps of the parameters it was given: never a secret value, but a Key Vault reference.

use cairn_arm::models::stack::DeploymentStackProperties;
use serde_json::Value;

/// The parameters a stack may keep: values of parameters the template declares secure are dropped (a stack
/// record never holds secrets; the engine keeps them sealed for its own run), while a secure parameter given as
/// a Key Vault `reference` keeps the reference alone (it names the secret, it is not one), as ARM's stacks do: the
/// stack then shows where the value comes from, and a later what-if with the same parameters file sees the same
/// set of parameters.
pub fn kept_parameters(
    properties: &DeploymentStackProperties,
) -> Option<cairn_arm::models::parameters::DeploymentParameters> {
    let parameters = properties.parameters.clone()?;
    let declared = properties
        .template
        .as_ref()
        .and_then(|t| t.get("parameters"))
        .and_then(Value::as_object);
    let is_secure = |name: &str| {
        declared
            .and_then(|d| d.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)))
            .and_then(|(_, p)| p.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|t| {
                t.eq_ignore_ascii_case("securestring") || t.eq_ignore_ascii_case("secureobject")
            })
    };
    Some(cairn_arm::models::parameters::DeploymentParameters(
        parameters
            .0
            .into_iter()
            .filter_map(|(name, parameter)| {
                if !is_secure(&name) {
                    return Some((name, parameter));
                }
                let reference = parameter.get("reference")?.clone();
                Some((name, serde_json::json!({ "reference": reference })))
            })
            .collect(),
    ))
}
