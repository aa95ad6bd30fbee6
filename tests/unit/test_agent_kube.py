"""The agent's Kubernetes client without a cluster (the integration tests use a real one):
the in-cluster URL, the token re-read on every request, the paths and verbs, server-side
apply on the status subresource, watch events and a 410 as a typed error, and the API's
Status messages in typed errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_image.kube import (
    APPLY_CONTENT_TYPE,
    KubeClient,
    KubeConflict,
    KubeForbidden,
    KubeGone,
    KubeInvalid,
    KubeNotFound,
    KubeUnreachable,
)
from tests.unit.test_agent_events import agent_settings

BASE = "/apis/humanwork.io/v1alpha1/namespaces/org-acme/agentictasks"


class Api:
    """A scripted API server behind httpx.MockTransport."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.answers: list[httpx.Response] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.answers:
            return self.answers.pop(0)
        return httpx.Response(200, json={"kind": "AgenticTask", "metadata": {"name": "t"}})


def status(code: int, reason: str, message: str) -> httpx.Response:
    return httpx.Response(
        code,
        json={
            "kind": "Status",
            "status": "Failure",
            "code": code,
            "reason": reason,
            "message": message,
        },
    )


def client(tmp_path: Path, api: Api) -> KubeClient:
    (tmp_path / "token").write_text("sa-token-1\n")
    return KubeClient(
        "https://10.0.0.1:6443",
        "org-acme",
        tmp_path / "token",
        None,
        transport=httpx.MockTransport(api.handler),
    )


def test_the_in_cluster_address_comes_from_the_pod(tmp_path: Path) -> None:
    settings = agent_settings(
        tmp_path,
        "http://platform",
        KUBERNETES_SERVICE_HOST="10.96.0.1",
        KUBERNETES_SERVICE_PORT=443,
    )
    kube = KubeClient.from_settings(settings)
    assert kube.base_url == "https://10.96.0.1:443"
    assert kube.token_file == tmp_path / "kube" / "token"
    assert kube.ca_file == tmp_path / "kube" / "ca.crt"
    assert kube.namespace == "org-acme"
    six = KubeClient.from_settings(
        agent_settings(tmp_path, "http://p", KUBERNETES_SERVICE_HOST="fd00::1")
    )
    assert six.base_url == "https://[fd00::1]:443"


async def test_the_token_is_read_again_for_every_request(tmp_path: Path) -> None:
    api = Api()
    kube = client(tmp_path, api)
    await kube.get_task("t")
    (tmp_path / "token").write_text("sa-token-2")  # the kubelet rotated it
    await kube.get_task("t")
    assert [r.headers["authorization"] for r in api.requests] == [
        "Bearer sa-token-1",
        "Bearer sa-token-2",
    ]
    (tmp_path / "token").unlink()
    with pytest.raises(KubeUnreachable):
        await kube.get_task("t")
    await kube.aclose()


async def test_create_get_and_list(tmp_path: Path) -> None:
    api = Api()
    kube = client(tmp_path, api)
    await kube.create_task({"metadata": {"name": "t"}, "spec": {"orgId": "x"}})
    create = api.requests[-1]
    assert (create.method, create.url.path) == ("POST", BASE)
    assert create.url.params["fieldManager"] == "humanwork-agent"
    sent = json.loads(create.content)
    assert sent["apiVersion"] == "humanwork.io/v1alpha1" and sent["kind"] == "AgenticTask"
    assert sent["metadata"] == {"name": "t", "namespace": "org-acme"}

    api.answers.append(status(404, "NotFound", 'agentictasks "gone" not found'))
    assert await kube.get_task("gone") is None
    assert api.requests[-1].url.path == f"{BASE}/gone"

    api.answers.append(
        httpx.Response(
            200,
            json={"items": [{"metadata": {"name": "a"}}], "metadata": {"continue": "c1"}},
        )
    )
    api.answers.append(
        httpx.Response(
            200,
            json={"items": [{"metadata": {"name": "b"}}], "metadata": {"resourceVersion": "42"}},
        )
    )
    items, version = await kube.list_tasks(label_selector="humanwork.io/agent=acme")
    assert [i["metadata"]["name"] for i in items] == ["a", "b"] and version == "42"
    first, second = api.requests[-2:]
    assert first.url.params["labelSelector"] == "humanwork.io/agent=acme"
    assert second.url.params["continue"] == "c1"
    await kube.aclose()


async def test_status_is_written_by_server_side_apply(tmp_path: Path) -> None:
    api = Api()
    kube = client(tmp_path, api)
    patch = {"status": {"steps": [{"id": "step-1", "execution": {"state": "Running"}}]}}
    await kube.apply_task_status("t", patch, field_manager="humanwork-agent")
    request = api.requests[-1]
    assert (request.method, request.url.path) == ("PATCH", f"{BASE}/t/status")
    assert request.url.params["fieldManager"] == "humanwork-agent"
    assert request.url.params["force"] == "true"
    assert request.headers["content-type"] == APPLY_CONTENT_TYPE
    body = json.loads(request.content)
    assert body == {
        "status": patch["status"],
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {"name": "t", "namespace": "org-acme"},
    }
    # a bare status is wrapped; force can be turned off
    await kube.apply_task_status("t", {"steps": []}, "m", force=False)
    assert json.loads(api.requests[-1].content)["status"] == {"steps": []}
    assert "force" not in api.requests[-1].url.params
    await kube.aclose()


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [
        (403, "Forbidden", KubeForbidden),
        (404, "NotFound", KubeNotFound),
        (409, "Conflict", KubeConflict),
        (410, "Gone", KubeGone),
        (422, "Invalid", KubeInvalid),
    ],
)
async def test_api_errors_are_typed_with_the_status_message(
    tmp_path: Path, code: int, reason: str, kind: type[Exception]
) -> None:
    api = Api()
    kube = client(tmp_path, api)
    api.answers.append(status(code, reason, "what the API server said"))
    with pytest.raises(kind) as raised:
        await kube.apply_task_status("t", {"status": {}}, "m")
    error: Any = raised.value
    assert error.status == code and error.reason == reason
    assert error.message == "what the API server said"
    await kube.aclose()


async def test_watch_yields_events_and_a_410_says_relist(tmp_path: Path) -> None:
    api = Api()
    kube = client(tmp_path, api)
    lines = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "6"}}},
        {"type": "MODIFIED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}},
    ]
    api.answers.append(
        httpx.Response(200, content="\n".join(json.dumps(x) for x in lines).encode() + b"\n")
    )
    seen = [(kind, obj["metadata"]["resourceVersion"]) async for kind, obj in kube.watch_tasks("4")]
    assert seen == [("ADDED", "5"), ("BOOKMARK", "6"), ("MODIFIED", "7")]
    params = api.requests[-1].url.params
    assert params["watch"] == "1" and params["resourceVersion"] == "4"
    assert params["allowWatchBookmarks"] == "true"

    gone = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
    }
    api.answers.append(httpx.Response(200, content=json.dumps(gone).encode() + b"\n"))
    with pytest.raises(KubeGone, match="too old"):
        async for _ in kube.watch_tasks("1"):
            pass
    api.answers.append(status(410, "Gone", "resource version too old"))
    with pytest.raises(KubeGone):
        async for _ in kube.watch_tasks("1"):
            pass
    await kube.aclose()


async def test_an_unreachable_api_server_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    kube = KubeClient("https://127.0.0.1:9", "ns", tmp_path / "token", None, timeout=2)
    with pytest.raises(KubeUnreachable):
        await kube.get_task("t")
    with pytest.raises(KubeUnreachable):
        async for _ in kube.watch_tasks("1"):
            pass
    await kube.aclose()


async def test_a_missing_cluster_ca_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    kube = KubeClient("https://127.0.0.1:9", "ns", tmp_path / "token", tmp_path / "ca.crt")
    with pytest.raises(KubeUnreachable, match=r"ca\.crt"):
        await kube.get_task("t")
    await kube.aclose()
