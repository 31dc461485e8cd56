"""The official Azure SDK for Python against three `cairn serve` replicas on one PostgreSQL database (the
`replicas` fixture): whatever a request starts on one replica, any other answers for — a deployment created through
replica A is polled and read through B and deleted through C (its delete's `Location` polled through A), and a
deployment stack created through A is read through B and deleted through C."""

import time
import uuid

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.core.rest import HttpRequest
from azure.mgmt.resource.deployments import DeploymentsMgmtClient
from azure.mgmt.resource.deploymentstacks import DeploymentStacksClient
from azure.mgmt.resource.resources import ResourceManagementClient

SUBSCRIPTION = "00000000-0000-0000-0000-0000000000bb"
DEPLOYMENTS_API = "2025-04-01"


class StaticToken:
    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes, **kwargs) -> AccessToken:
        return AccessToken(self._token, int(time.time()) + 3600)


class Replica:
    """The SDK's clients for one replica."""

    def __init__(self, server):
        credential = StaticToken(server.token)
        options = dict(base_url=server.url, connection_verify=str(server.cert), polling_interval=1)
        self.url = server.url
        self.groups = ResourceManagementClient(credential, SUBSCRIPTION, **options)
        self.deployments = DeploymentsMgmtClient(credential, SUBSCRIPTION, **options)
        self.stacks = DeploymentStacksClient(credential, SUBSCRIPTION, **options)

    def send(self, method: str, url: str, body=None):
        """A raw request through the SDK's pipeline (authentication, TLS) to this replica; `url` may be another
        replica's absolute URL, whose path and query are sent here."""
        path = url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url.lstrip("/")
        request = HttpRequest(method, f"{self.url}/{path}", json=body)
        return self.deployments._client.send_request(request)


def file_template(path: str, content: str):
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.0",
        "contentVersion": "1.0.0.0",
        "parameters": {"root": {"type": "string"}},
        "imports": {
            "local": {"provider": "Local", "version": "1.0.0", "config": {"rootDirectory": "[parameters('root')]"}}
        },
        "resources": {"note": {"import": "local", "type": "File", "properties": {"path": path, "content": content}}},
        "outputs": {"written": {"type": "string", "value": "[reference('note').path]"}},
    }


def test_a_deployment_created_on_a_is_polled_and_read_on_b_and_deleted_on_c(replicas):
    a, b, c = (Replica(server) for server in replicas)
    group = f"replicas-{uuid.uuid4().hex[:8]}"
    root = replicas[0].workdir / "files"
    a.groups.resource_groups.create_or_update(group, {"location": "westus"})
    assert b.groups.resource_groups.get(group).name == group

    # Created through A: the PUT's Azure-AsyncOperation is polled through B until it ends.
    body = {
        "properties": {
            "mode": "Incremental",
            "template": file_template("replicas/note.txt", "written through A"),
            "parameters": {"root": {"value": str(root)}},
        }
    }
    path = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/providers/Microsoft.Resources/deployments/shared"
    created = a.send("PUT", f"{path}?api-version={DEPLOYMENTS_API}", body)
    assert created.status_code == 201, created.text()
    status_url = created.headers["Azure-AsyncOperation"]
    assert status_url.startswith(a.url)
    for _ in range(120):
        status = b.send("GET", status_url)
        assert status.status_code == 200, status.text()
        if status.json()["status"] in ("Succeeded", "Failed", "Canceled"):
            break
        time.sleep(0.5)
    assert status.json()["status"] == "Succeeded", status.text()

    # Read through B with the SDK's models.
    fetched = b.deployments.deployments.get(group, "shared")
    assert fetched.properties.provisioning_state == "Succeeded"
    assert fetched.properties.outputs["written"]["value"] == "replicas/note.txt"
    operations = list(b.deployments.deployment_operations.list(group, "shared"))
    assert operations and all(op.properties.provisioning_state == "Succeeded" for op in operations)
    assert "shared" in [d.name for d in c.deployments.deployments.list_by_resource_group(group)]
    assert (root / "replicas" / "note.txt").read_text() == "written through A"

    # A what-if through B, the SDK's poller following B's Location.
    what_if = b.deployments.deployments.begin_what_if(group, "shared", body).result()
    assert what_if.status == "Succeeded"

    # Deleted through C: its Location is answered by A.
    deleted = c.send("DELETE", f"{path}?api-version={DEPLOYMENTS_API}")
    assert deleted.status_code == 202, deleted.text()
    location = deleted.headers["Location"]
    assert location.startswith(c.url) and "/operationresults/" in location
    answered = a.send("GET", location)
    assert answered.status_code == 204, answered.text()
    for replica in (a, b, c):
        assert not replica.deployments.deployments.check_existence(group, "shared")
    with pytest.raises(ResourceNotFoundError):
        b.deployments.deployments.get(group, "shared")

    c.groups.resource_groups.begin_delete(group).result()
    assert not a.groups.resource_groups.check_existence(group)


def test_a_stack_created_on_a_is_read_on_b_and_deleted_on_c(replicas):
    a, b, c = (Replica(server) for server in replicas)
    group = f"replicas-stack-{uuid.uuid4().hex[:8]}"
    root = replicas[0].workdir / "stack-files"
    a.groups.resource_groups.create_or_update(group, {"location": "westus"})
    body = {
        "properties": {
            "template": file_template("stack/note.txt", "managed by a stack"),
            "parameters": {"root": {"value": str(root)}},
            "actionOnUnmanage": {"resources": "delete"},
            "denySettings": {"mode": "none"},
        }
    }
    created = a.stacks.deployment_stacks.begin_create_or_update_at_resource_group(group, "shared", body).result()
    assert created.properties.provisioning_state == "succeeded"
    assert (root / "stack" / "note.txt").exists()

    read = b.stacks.deployment_stacks.get_at_resource_group(group, "shared")
    assert read.properties.provisioning_state == "succeeded"
    assert [r.id for r in read.properties.resources] == [r.id for r in created.properties.resources]
    assert "shared" in [s.name for s in c.stacks.deployment_stacks.list_at_resource_group(group)]

    c.stacks.deployment_stacks.begin_delete_at_resource_group(
        group, "shared", unmanage_action_resources="delete"
    ).result()
    with pytest.raises(ResourceNotFoundError):
        a.stacks.deployment_stacks.get_at_resource_group(group, "shared")
    assert not (root / "stack" / "note.txt").exists()
    b.groups.resource_groups.begin_delete(group).result()
