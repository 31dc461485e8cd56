"""The official Azure SDK for Python against `cairn serve` over TLS with a static bearer token:
resource group, a deployment through the SDK's long-running-operation poller (a template using the
built-in Local extension), outputs, operations, what-if, export, template hash, and deletes."""

import time
import uuid

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.mgmt.resource.deployments import DeploymentsMgmtClient
from azure.mgmt.resource.resources import ResourceManagementClient

SUBSCRIPTION = "00000000-0000-0000-0000-0000000000aa"


class StaticToken:
    """A TokenCredential that always returns the token the server was started with."""

    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes, **kwargs) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)


def clients(server, token=None):
    credential = StaticToken(token or server.token)
    options = dict(base_url=server.url, connection_verify=str(server.cert), polling_interval=1)
    return (
        ResourceManagementClient(credential, SUBSCRIPTION, **options),
        DeploymentsMgmtClient(credential, SUBSCRIPTION, **options),
    )


def local_file_template():
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": {
            "root": {"type": "string"},
            "greeting": {"type": "string", "defaultValue": "hello"},
        },
        "imports": {
            "local": {"provider": "Local", "version": "1.0.0", "config": {"rootDirectory": "[parameters('root')]"}}
        },
        "resources": {
            "note": {
                "import": "local",
                "type": "File",
                "properties": {"path": "sdk/note.txt", "content": "[format('{0} from the SDK', parameters('greeting'))]"},
            }
        },
        "outputs": {
            "path": {"type": "string", "value": "[reference('note').path]"},
            "message": {"type": "string", "value": "[format('{0}, world', parameters('greeting'))]"},
        },
    }


def test_wrong_token_is_rejected_in_arm_shape(server):
    groups, _ = clients(server, token="not-the-token")
    with pytest.raises(ClientAuthenticationError) as raised:
        groups.resource_groups.get("anything")
    assert raised.value.status_code == 401
    assert raised.value.error.code == "InvalidAuthenticationToken"


def test_resource_group_and_deployment_lifecycle(server):
    groups, deployments = clients(server)
    group_name = f"sdk-rg-{uuid.uuid4().hex[:8]}"
    deployment_name = "sdk-deployment"
    root = server.workdir / "local-root"

    group = groups.resource_groups.create_or_update(group_name, {"location": "westus", "tags": {"suite": "sdk"}})
    assert group.name == group_name
    assert group.properties.provisioning_state == "Succeeded"
    assert groups.resource_groups.check_existence(group_name)
    assert group_name in [g.name for g in groups.resource_groups.list()]

    body = {
        "properties": {
            "mode": "Incremental",
            "template": local_file_template(),
            "parameters": {"root": {"value": str(root)}, "greeting": {"value": "hi"}},
        }
    }

    # Validate and what-if before deploying.
    validated = deployments.deployments.begin_validate(group_name, deployment_name, body).result()
    assert validated.error is None
    what_if = deployments.deployments.begin_what_if(group_name, deployment_name, body).result()
    assert what_if.status == "Succeeded"
    assert [c.change_type for c in what_if.changes] == ["Create"]

    # Deploy through the SDK's long-running-operation poller (Azure-AsyncOperation polling).
    poller = deployments.deployments.begin_create_or_update(group_name, deployment_name, body)
    result = poller.result()
    assert poller.status() == "Succeeded"
    assert result.properties.provisioning_state == "Succeeded"
    assert result.properties.outputs["message"]["value"] == "hi, world"
    assert result.properties.outputs["path"]["value"] == "sdk/note.txt"
    assert (root / "sdk" / "note.txt").read_text() == "hi from the SDK"

    fetched = deployments.deployments.get(group_name, deployment_name)
    assert fetched.properties.outputs == result.properties.outputs
    assert deployments.deployments.check_existence(group_name, deployment_name)
    assert deployment_name in [d.name for d in deployments.deployments.list_by_resource_group(group_name)]

    operations = list(deployments.deployment_operations.list(group_name, deployment_name))
    assert operations, "a deployment that created a resource lists its operations"
    assert all(op.properties.provisioning_state == "Succeeded" for op in operations)
    first = deployments.deployment_operations.get(group_name, deployment_name, operations[0].operation_id)
    assert first.operation_id == operations[0].operation_id

    exported = deployments.deployments.export_template(group_name, deployment_name)
    assert exported.template["resources"]["note"]["type"] == "File"
    hashed = deployments.deployments.calculate_template_hash(local_file_template())
    assert hashed.template_hash == result.properties.template_hash

    # A deployment that is not running can be deleted; its resources stay.
    deployments.deployments.begin_delete(group_name, deployment_name).result()
    assert not deployments.deployments.check_existence(group_name, deployment_name)
    with pytest.raises(ResourceNotFoundError):
        deployments.deployments.get(group_name, deployment_name)
    assert (root / "sdk" / "note.txt").exists()

    groups.resource_groups.begin_delete(group_name).result()
    assert not groups.resource_groups.check_existence(group_name)


def test_failed_deployment_fails_through_the_poller(server):
    groups, deployments = clients(server)
    group_name = f"sdk-fail-{uuid.uuid4().hex[:8]}"
    groups.resource_groups.create_or_update(group_name, {"location": "westus"})
    body = {
        "properties": {
            "mode": "Incremental",
            "template": {
                "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
                "contentVersion": "1.0.0.0",
                "resources": [],
                "outputs": {"bad": {"type": "int", "value": "[div(1, 0)]"}},
            },
        }
    }
    # The PUT is accepted; the failure arrives through the poller, from the operation status.
    poller = deployments.deployments.begin_create_or_update(group_name, "broken", body)
    with pytest.raises(HttpResponseError) as raised:
        poller.result()
    assert raised.value.error.code == "DeploymentOutputEvaluationFailed"
    failed = deployments.deployments.get(group_name, "broken")
    assert failed.properties.provisioning_state == "Failed"
    assert failed.properties.error.code == "DeploymentOutputEvaluationFailed"
    groups.resource_groups.begin_delete(group_name).result()
