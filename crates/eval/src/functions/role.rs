//! `roleDefinitions(roleName)`: Azure's built-in role lookup, which Bicep (0.42+) emits as is for
//! `az.roleDefinitions('Contributor')`. It answers `{ id, roleDefinitionId }`: the role definition's resource ID at
//! the deployment's subscription (`/subscriptions/{sub}/providers/Microsoft.Authorization/roleDefinitions/{guid}`,
//! without a subscription the tenant-level ID) and its GUID, as a deployment in Azure returns them.

use super::{Args, FunctionDef};
use crate::error::FnError;
use crate::eval::Evaluator;
use crate::ids;
use crate::suggest::did_you_mean;
use crate::value::{Object, Value};

pub(super) const FUNCTIONS: &[FunctionDef] = &[FunctionDef::eager(
    "roleDefinitions",
    1,
    Some(1),
    role_definitions,
)];

/// Built-in roles by name, with the GUIDs Azure gives them in every tenant (the same in every cloud). Each GUID
/// was checked against several independent public listings of Azure's built-in roles; a role is added here only
/// when they agree.
const BUILT_IN_ROLES: &[(&str, &str)] = &[
    ("Owner", "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"),
    ("Contributor", "b24988ac-6180-42a0-ab88-20f7382dd24c"),
    ("Reader", "acdd72a7-3385-48ef-bd42-f606fba81ae7"),
    (
        "User Access Administrator",
        "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    ),
    (
        "Role Based Access Control Administrator",
        "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
    ),
    (
        "Network Contributor",
        "4d97b98b-1d4f-4787-a291-c67834d212e7",
    ),
    (
        "Virtual Machine Contributor",
        "9980e02c-c2be-4d73-94e8-173b1dc7cf3c",
    ),
    ("AcrPull", "7f951dda-4ed3-4680-a7ca-43fe172d538d"),
    ("AcrPush", "8311e382-0749-4cb8-b61a-304f252e45ec"),
    (
        "Key Vault Administrator",
        "00482a5a-887f-4fb3-b363-3b7fe8e74483",
    ),
    ("Key Vault Reader", "21090545-7ca7-4776-b22c-e363652d74d2"),
    (
        "Key Vault Secrets User",
        "4633458b-17de-408a-b874-0445c86b69e6",
    ),
    (
        "Key Vault Secrets Officer",
        "b86a8fe4-44ce-4948-aee5-eccb2c155cd7",
    ),
    (
        "Key Vault Crypto User",
        "12338af0-0e69-4776-bea7-57ae8d297424",
    ),
    (
        "Key Vault Crypto Officer",
        "14b46e9e-c2b7-41b4-b07b-48a6ebf60603",
    ),
    (
        "Storage Blob Data Reader",
        "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    ),
    (
        "Storage Blob Data Contributor",
        "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    ),
    (
        "Storage Blob Data Owner",
        "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    ),
    (
        "Storage Queue Data Contributor",
        "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    ),
    (
        "Storage Table Data Contributor",
        "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    ),
    ("Monitoring Reader", "43d0d8ad-25c7-4714-9337-8ba259a9fe05"),
    (
        "Monitoring Contributor",
        "749f88d5-cbae-40b8-bcfc-e573ddc772fa",
    ),
    (
        "Monitoring Metrics Publisher",
        "3913510d-42f4-4e42-8a64-420c390055eb",
    ),
    (
        "Log Analytics Reader",
        "73c42c96-874c-492b-b04d-ab87d138a893",
    ),
    (
        "Log Analytics Contributor",
        "92aaf0da-9dab-42b6-94a3-d43ce8d16293",
    ),
    (
        "Azure Service Bus Data Sender",
        "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    ),
    (
        "Azure Event Hubs Data Sender",
        "2b629674-e913-4c01-ae53-ef4638d8f975",
    ),
    (
        "Azure Event Hubs Data Receiver",
        "a638d3c7-ab3a-418d-83e6-5f17a39d4fde",
    ),
    (
        "Cognitive Services OpenAI User",
        "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd",
    ),
    (
        "Cognitive Services User",
        "a97b65f3-24c7-4388-baec-2e87135dc908",
    ),
    (
        "Search Index Data Reader",
        "1407120a-92aa-4202-b7e9-c0e197c71c8f",
    ),
    (
        "Search Index Data Contributor",
        "8ebe5a00-799e-43f5-93ac-243d3dce84a7",
    ),
];

/// The GUID of built-in role `name` (role names are matched ignoring case, as Azure's role lookups do).
pub fn built_in_role(name: &str) -> Option<&'static str> {
    BUILT_IN_ROLES
        .iter()
        .find(|(role, _)| role.eq_ignore_ascii_case(name))
        .map(|(_, guid)| *guid)
}

fn role_definitions(ev: &mut Evaluator<'_>, args: Args) -> Result<Value, FnError> {
    let name = args.string(0)?;
    let Some(guid) = built_in_role(name) else {
        // Custom roles are looked up in the tenant by Azure; this engine has no tenant to ask.
        return Err(FnError::msg(format!(
            "the role definition '{name}' is not a built-in role known to this engine.{}",
            did_you_mean(name, BUILT_IN_ROLES.iter().map(|(role, _)| *role))
        )));
    };
    let scope = ev
        .env()
        .facts()
        .subscription_id
        .as_deref()
        .map(ids::subscription_scope)
        .unwrap_or_default();
    let id = ids::resource_id(&scope, "Microsoft.Authorization/roleDefinitions", &[guid])
        .map_err(|e| FnError::msg(e.to_string()))?;
    let mut o = Object::new();
    o.insert("id", Value::String(id));
    o.insert("roleDefinitionId", Value::from(guid));
    Ok(Value::Object(o))
}

#[cfg(test)]
mod tests {
    use crate::functions::test_util::{check, check_err};

    #[test]
    fn built_in_roles_answer_their_id_and_guid() {
        check(
            "roleDefinitions('Contributor').roleDefinitionId",
            serde_json::json!("b24988ac-6180-42a0-ab88-20f7382dd24c"),
        );
        // Role names are matched ignoring case.
        check(
            "roleDefinitions('owner').roleDefinitionId",
            serde_json::json!("8e3af657-a8ff-443c-a75c-2fe8c4bcb635"),
        );
        // No subscription in the environment: the tenant-level ID.
        check(
            "roleDefinitions('Reader')",
            serde_json::json!({
                "id": "/providers/Microsoft.Authorization/roleDefinitions/acdd72a7-3385-48ef-bd42-f606fba81ae7",
                "roleDefinitionId": "acdd72a7-3385-48ef-bd42-f606fba81ae7"
            }),
        );
    }

    #[test]
    fn unknown_roles_are_errors_with_a_suggestion() {
        check_err("roleDefinitions('Contributer')", "'Contributer'");
        check_err(
            "roleDefinitions('Contributer')",
            "Did you mean 'Contributor'?",
        );
        check_err("roleDefinitions(1)", "String");
    }
}
