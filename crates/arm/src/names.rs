//! Name rules for the resources cairn creates: deployments (1..64), deployment stacks and what-if results
//! (1..90) and resource groups (1..90, no trailing period), all from `^[-\w\._\(\)]+$` where `\w` is a
//! Unicode letter, digit or connector (.NET regex semantics). The server checks them on PUT; reads of an
//! invalid name simply find nothing.
//!
//! The deployment length error is ARM's (`DeploymentNameLengthLimitExceeded`, ARM's message); the other
//! codes and messages are cairn's wording.

use crate::error::ArmError;

const DEPLOYMENT_MAX: usize = 64;
const STACK_MAX: usize = 90;
const RESOURCE_GROUP_MAX: usize = 90;

/// Whether `c` is allowed in these names: `\w` (letters, digits, marks, connector punctuation), `-`, `.`,
/// `(`, `)`.
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric()
        || c == '_'
        || c == '-'
        || c == '.'
        || c == '('
        || c == ')'
        || is_connector_or_mark(c)
}

/// Connector punctuation and combining marks that .NET's `\w` also accepts (a practical subset).
fn is_connector_or_mark(c: char) -> bool {
    matches!(
        c,
        '\u{203F}' | '\u{2040}' | '\u{2054}' | '\u{FE33}' | '\u{FE34}' | '\u{FE4D}'
            ..='\u{FE4F}' | '\u{FF3F}'
    ) || ('\u{0300}'..='\u{036F}').contains(&c)
}

fn invalid_characters(name: &str) -> String {
    let mut seen = Vec::new();
    for c in name.chars().filter(|c| !is_name_char(*c)) {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.into_iter().collect()
}

/// Checks a deployment name: 1 to 64 characters from `[-\w._()]`.
pub fn validate_deployment_name(name: &str) -> Result<(), ArmError> {
    let length = name.chars().count();
    if length > DEPLOYMENT_MAX {
        return Err(ArmError::new(
            400,
            "DeploymentNameLengthLimitExceeded",
            format!(
                "The provided deployment name '{name}' has a length of '{length}' which exceeds the maximum length \
                 of '{DEPLOYMENT_MAX}'. Please see https://aka.ms/arm-deploy for usage details."
            ),
        ));
    }
    check_characters(name, "InvalidDeploymentName", "deployment")
}

/// Checks a deployment stack (or stack what-if result) name: 1 to 90 characters from `[-\w._()]`.
pub fn validate_stack_name(name: &str) -> Result<(), ArmError> {
    let length = name.chars().count();
    if length > STACK_MAX {
        return Err(ArmError::new(
            400,
            "InvalidDeploymentStackName",
            format!(
                "The deployment stack name '{name}' has a length of '{length}' which exceeds the maximum length of \
                 '{STACK_MAX}'."
            ),
        ));
    }
    check_characters(name, "InvalidDeploymentStackName", "deployment stack")
}

/// Checks a resource group name: 1 to 90 characters from `[-\w._()]`, not ending in a period.
pub fn validate_resource_group_name(name: &str) -> Result<(), ArmError> {
    const CODE: &str = "InvalidResourceGroupName";
    let length = name.chars().count();
    if length > RESOURCE_GROUP_MAX {
        return Err(ArmError::new(
            400,
            CODE,
            format!(
                "The resource group name '{name}' has a length of '{length}' which exceeds the maximum length of \
                 '{RESOURCE_GROUP_MAX}'."
            ),
        ));
    }
    check_characters(name, CODE, "resource group")?;
    if name.ends_with('.') {
        return Err(ArmError::new(
            400,
            CODE,
            format!("The resource group name '{name}' cannot end with a period."),
        ));
    }
    Ok(())
}

fn check_characters(name: &str, code: &str, what: &str) -> Result<(), ArmError> {
    if name.is_empty() {
        return Err(ArmError::new(
            400,
            code,
            format!("The {what} name must not be empty."),
        ));
    }
    let invalid = invalid_characters(name);
    if !invalid.is_empty() {
        return Err(ArmError::new(
            400,
            code,
            format!(
                "The {what} name '{name}' has these invalid characters: '{invalid}'. The name can only contain \
                 letters, digits, '-', '.', '_', '(' and ')'."
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_names() {
        assert!(validate_deployment_name("main-(1)_a.b").is_ok());
        assert!(validate_deployment_name("ünïcode").is_ok());
        assert!(validate_deployment_name(&"a".repeat(64)).is_ok());
        let long = validate_deployment_name(&"a".repeat(67)).unwrap_err();
        assert_eq!(long.code(), "DeploymentNameLengthLimitExceeded");
        assert!(
            long.detail()
                .message()
                .contains("has a length of '67' which exceeds the maximum length of '64'")
        );
        let bad = validate_deployment_name("a b/c b").unwrap_err();
        assert_eq!(bad.status(), 400);
        assert!(
            bad.detail().message().contains("' /'"),
            "{}",
            bad.detail().message()
        );
        assert!(validate_deployment_name("").is_err());
    }

    #[test]
    fn stack_and_group_names() {
        assert!(validate_stack_name(&"s".repeat(90)).is_ok());
        assert!(validate_stack_name(&"s".repeat(91)).is_err());
        assert!(validate_resource_group_name("rg.(1)").is_ok());
        assert!(validate_resource_group_name("rg.").is_err());
        assert!(validate_resource_group_name("rg#").is_err());
    }
}
