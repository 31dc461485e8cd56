"""The official Azure SDK for Python (azure-mgmt-resource-deploymentstacks) against `cairn serve` over TLS:
a resource group, a deployment stack created through the SDK's long-running-operation poller (a template of
built-in Local extension files), read back with its managed resources, updated without one file under
actionOnUnmanage delete (deletedResources, file gone from disk), and deleted with unmanage detach (files stay); a
management-group stack (validate as an LRO, create, list, update deleting a file, delete) and a stack what-if result
predicting a delete."""

import time
import uuid

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.resource.deploymentstacks import DeploymentStacksClient
from azure.mgmt.resource.resources import ResourceManagementClient

SUBSCRIPTION = "00000000-0000-0000-0000-0000000000ab"


class StaticToken:
    """A TokenCredential that always returns the token the server was started with."""

    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes, **kwargs) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)


def clients(server):
    credential = StaticToken(server.token)
    options = dict(base_url=server.url, connection_verify=str(server.cert), polling_interval=1)
    return (
        ResourceManagementClient(credential, SUBSCRIPTION, **options),
        DeploymentStacksClient(credential, SUBSCRIPTION, **options),
    )


RESOURCE_GROUP_SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
MANAGEMENT_GROUP_SCHEMA = (
    "https://schema.management.azure.com/schemas/2019-08-01/managementGroupDeploymentTemplate.json#"
)


def files_template(names, schema=RESOURCE_GROUP_SCHEMA):
    """Local extension files `stack/<name>.txt` under the `root` parameter's directory."""
    return {
        "$schema": schema,
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": {"root": {"type": "string"}},
        "imports": {
            "local": {"provider": "Local", "version": "1.0.0", "config": {"rootDirectory": "[parameters('root')]"}}
        },
        "resources": {
            name: {
                "import": "local",
                "type": "File",
                "properties": {"path": f"stack/{name}.txt", "content": f"{name} from a stack"},
            }
            for name in names
        },
    }


def stack_body(root, names, resources_action, schema=RESOURCE_GROUP_SCHEMA):
    return {
        "properties": {
            "template": files_template(names, schema),
            "parameters": {"root": {"value": str(root)}},
            "actionOnUnmanage": {"resources": resources_action},
            "denySettings": {"mode": "none"},
            "description": "files managed by a stack",
        }
    }


def described(reference):
    """What a managed-resource reference names: its ARM ID, else the extension resource's identifiers."""
    return str(reference.id or reference.identifiers)


def test_stack_lifecycle_with_local_files(server):
    groups, stacks = clients(server)
    group_name = f"sdk-stack-rg-{uuid.uuid4().hex[:8]}"
    stack_name = "sdk-stack"
    root = server.workdir / "stack-root"
    root.mkdir()
    groups.resource_groups.create_or_update(group_name, {"location": "westus"})

    poller = stacks.deployment_stacks.begin_create_or_update_at_resource_group(
        group_name, stack_name, stack_body(root, ["alpha", "beta", "gamma"], "detach")
    )
    created = poller.result()
    assert created.name == stack_name
    assert created.properties.provisioning_state.lower() == "succeeded", created.properties.error
    for name in ["alpha", "beta", "gamma"]:
        assert (root / "stack" / f"{name}.txt").read_text() == f"{name} from a stack"

    read = stacks.deployment_stacks.get_at_resource_group(group_name, stack_name)
    assert read.properties.description == "files managed by a stack"
    assert read.properties.action_on_unmanage.resources == "detach"
    managed = [described(r) for r in read.properties.resources]
    assert len(managed) == 3, managed
    for name in ["alpha", "beta", "gamma"]:
        assert any(f"{name}.txt" in m for m in managed), managed
    assert stack_name in [s.name for s in stacks.deployment_stacks.list_at_resource_group(group_name)]

    updated = stacks.deployment_stacks.begin_create_or_update_at_resource_group(
        group_name, stack_name, stack_body(root, ["alpha", "gamma"], "delete")
    ).result()
    assert updated.properties.provisioning_state.lower() == "succeeded", updated.properties.error
    deleted = [described(r) for r in updated.properties.deleted_resources]
    assert len(deleted) == 1 and "beta.txt" in deleted[0], deleted
    assert not (root / "stack" / "beta.txt").exists()
    remaining = [described(r) for r in updated.properties.resources]
    assert len(remaining) == 2 and not any("beta.txt" in m for m in remaining), remaining

    stacks.deployment_stacks.begin_delete_at_resource_group(
        group_name, stack_name, unmanage_action_resources="detach"
    ).result()
    with pytest.raises(ResourceNotFoundError):
        stacks.deployment_stacks.get_at_resource_group(group_name, stack_name)
    # Detached, not deleted: the files outlive the stack.
    assert (root / "stack" / "alpha.txt").exists()
    assert (root / "stack" / "gamma.txt").exists()


def test_management_group_stack_validate_and_what_if(server):
    """Management-group stacks through the SDK's `*_at_management_group` calls, validate as an LRO, and a stack
    what-if result at resource-group scope (2025-07-01) predicting a delete."""
    groups, stacks = clients(server)
    mg = f"sdk-mg-{uuid.uuid4().hex[:8]}"
    root = server.workdir / "mg-root"
    root.mkdir()
    body = stack_body(root, ["one", "two"], "delete", MANAGEMENT_GROUP_SCHEMA)
    body["location"] = "westus"

    validated = stacks.deployment_stacks.begin_validate_stack_at_management_group(mg, "mg-stack", body).result()
    assert validated.error is None, validated.error
    assert len(validated.properties.validated_resources) == 2

    created = stacks.deployment_stacks.begin_create_or_update_at_management_group(mg, "mg-stack", body).result()
    assert created.properties.provisioning_state.lower() == "succeeded", created.properties.error
    assert created.properties.deployment_scope.lower() == f"/providers/microsoft.management/managementgroups/{mg}"
    assert (root / "stack" / "one.txt").exists() and (root / "stack" / "two.txt").exists()
    assert [s.name for s in stacks.deployment_stacks.list_at_management_group(mg)] == ["mg-stack"]

    smaller = stack_body(root, ["one"], "delete", MANAGEMENT_GROUP_SCHEMA)
    smaller["location"] = "westus"
    updated = stacks.deployment_stacks.begin_create_or_update_at_management_group(mg, "mg-stack", smaller).result()
    deleted = [described(r) for r in updated.properties.deleted_resources]
    assert len(deleted) == 1 and "two.txt" in deleted[0], deleted
    assert not (root / "stack" / "two.txt").exists()

    stacks.deployment_stacks.begin_delete_at_management_group(mg, "mg-stack", unmanage_action_resources="delete").result()
    with pytest.raises(ResourceNotFoundError):
        stacks.deployment_stacks.get_at_management_group(mg, "mg-stack")
    assert not (root / "stack" / "one.txt").exists()

    # What-if at resource-group scope: a stack managing two files, asked about a template with one.
    group_name = f"sdk-wi-rg-{uuid.uuid4().hex[:8]}"
    groups.resource_groups.create_or_update(group_name, {"location": "westus"})
    wi_root = server.workdir / "wi-root"
    wi_root.mkdir()
    stacks.deployment_stacks.begin_create_or_update_at_resource_group(
        group_name, "wi-stack", stack_body(wi_root, ["keep", "drop"], "delete")
    ).result()
    stack_id = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group_name}/providers/Microsoft.Resources/deploymentStacks/wi-stack"
    request = stack_body(wi_root, ["keep"], "delete")
    request["properties"]["deploymentStackResourceId"] = stack_id
    request["properties"]["retentionInterval"] = "P1D"
    result = stacks.deployment_stacks_what_if_results_at_resource_group.begin_create_or_update(
        group_name, "wi-check", request
    ).result()
    changes = result.properties.changes.resource_changes
    by_type = {}
    for change in changes:
        by_type.setdefault(change.change_type.lower(), []).append(str(change.identifiers or change.id))
    assert len(by_type.get("delete", [])) == 1 and "drop.txt" in by_type["delete"][0], by_type
    assert len(by_type.get("nochange", [])) == 1 and "keep.txt" in by_type["nochange"][0], by_type
    assert (wi_root / "stack" / "drop.txt").exists(), "a what-if deletes nothing"
    fetched = stacks.deployment_stacks_what_if_results_at_resource_group.get(group_name, "wi-check")
    assert fetched.name == "wi-check"
