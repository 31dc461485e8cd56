"""The official Azure SDK for Python (azure-mgmt-resource-deploymentstacks) against `cairn serve` over TLS:
a resource group, a deployment stack created through the SDK's long-running-operation poller (a template of
built-in Local extension files), read back with its managed resources, updated without one file under
actionOnUnmanage delete (deletedResources, file gone from disk), and deleted with unmanage detach (files stay)."""

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


def files_template(names):
    """Local extension files `stack/<name>.txt` under the `root` parameter's directory."""
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
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


def stack_body(root, names, resources_action):
    return {
        "properties": {
            "template": files_template(names),
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
