"""The lean client's writes whose answer nobody reads, against a local HTTP server
scripted as the API server: a success's body is not decoded (an answer that is not even
JSON still succeeds, and the decoder is never called), while a refusal still raises its
typed error with the reason and message of its decoded Status body, as with an answer
wanted. The decoder gives what `json.loads` gives. The operator's own writes that drop
their answers are in tests/integration/test_operator_writes.py (they must keep working on
the real server)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from humanwork_core import kube_client
from humanwork_core.kube_client import Kube
from humanwork_core.kube_credentials import Credentials
from humanwork_core.kube_errors import KubeConflict, KubeInvalid

CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"namespace": "org-a", "name": "agent-a"},
    "data": {"k": "v"},
}
OBJECT = b'{"kind":"ConfigMap","metadata":{"name":"agent-a","managedFields":[]}}'


class Script:
    """Each request answered with the next (status, body, content type)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, bytes, str]] = []
        self.methods: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.methods.append(request.method)
        await request.read()
        status, body, content_type = self.answers.pop(0)
        return web.Response(status=status, body=body, content_type=content_type)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Script, Kube]]:
    script = Script()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", script.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    creds = Credentials(server=f"http://127.0.0.1:{port}", ssl_context=False)
    kube = Kube.open(creds, field_manager="t", user_agent="t", connections=2)
    yield script, kube
    await kube.close()
    await runner.cleanup()


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every body the client decodes."""
    seen: list[bytes] = []
    real = kube_client._document

    def spy(raw: bytes) -> dict[str, Any]:
        seen.append(raw)
        return real(raw)

    monkeypatch.setattr(kube_client, "_document", spy)
    return seen


def status_body(code: int, reason: str, message: str) -> bytes:
    return b'{"kind":"Status","status":"Failure","code":%d,"reason":"%s","message":"%s"}' % (
        code,
        reason.encode(),
        message.encode(),
    )


async def test_an_answer_not_wanted_is_not_decoded(
    served: tuple[Script, Kube], decoded: list[bytes]
) -> None:
    script, kube = served
    script.answers = [
        (200, b"this is not JSON {", "text/plain"),
        (201, OBJECT, "application/json"),
        (200, OBJECT, "application/json"),
        (200, OBJECT, "application/json"),
    ]
    assert await kube.apply(CONFIG_MAP, answer=False) == {}
    assert await kube.create(CONFIG_MAP, answer=False) == {}
    patch = {"data": {"k": "w"}}
    assert await kube.merge_patch("v1", "ConfigMap", "org-a", "agent-a", patch, answer=False) == {}
    assert decoded == []  # nothing decoded
    # positive control: the same answer wanted is decoded and returned
    assert (await kube.apply(CONFIG_MAP))["metadata"]["name"] == "agent-a"
    assert decoded == [OBJECT]
    assert script.methods == ["PATCH", "POST", "PATCH", "PATCH"]


@pytest.mark.parametrize("answer", [False, True])
async def test_a_refusal_still_raises_its_typed_error(
    served: tuple[Script, Kube], answer: bool
) -> None:
    script, kube = served
    script.answers = [
        (409, status_body(409, "Conflict", "the object has been modified"), "application/json"),
        (422, status_body(422, "Invalid", "spec.replicas: Invalid value"), "application/json"),
    ]
    with pytest.raises(KubeConflict) as conflict:
        await kube.apply(CONFIG_MAP, answer=answer)
    assert (conflict.value.status, conflict.value.reason) == (409, "Conflict")
    assert conflict.value.message == "the object has been modified"
    with pytest.raises(KubeInvalid) as invalid:
        await kube.merge_patch("v1", "ConfigMap", "org-a", "agent-a", {}, answer=answer)
    assert (invalid.value.status, invalid.value.reason) == (422, "Invalid")
    assert "spec.replicas" in invalid.value.message


EVENT_LINE = (
    '{"type":"MODIFIED","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":'
    '{"name":"agent-a","namespace":"org-a","resourceVersion":"18446744073709551617",'
    '"generation":3,"labels":{"app.kubernetes.io/component":"agent"},"annotations":'
    '{"note":"caf\\u00e9 \\ud83d\\ude00 \\"quoted\\" \\\\ back\\/slash\\n"},"managedFields":'
    '[{"manager":"humanwork-operator","operation":"Apply","fieldsV1":{"f:spec":{".":{}}}},'
    '{"manager":"kube-controller-manager","subresource":"status","fieldsV1":{}}]},'
    '"spec":{"replicas":1,"ratio":0.25,"big":1e300,"neg":-12,"none":null,"on":true,'
    '"off":false,"empty":[],"nested":[[1,2],{"a":[{}]}]},'
    '"status":{"replicas":1,"readyReplicas":1,"conditions":[{"type":"Available",'
    '"status":"True"}]}}}'
)


@pytest.mark.parametrize("as_bytes", [True, False])
def test_the_decoder_gives_what_json_loads_gives(as_bytes: bool) -> None:
    raw: bytes | str = EVENT_LINE.encode() if as_bytes else EVENT_LINE
    decoded = kube_client.decode_json(raw)
    assert decoded == json.loads(raw)
    meta = decoded["object"]["metadata"]
    assert meta["annotations"]["note"] == 'café 😀 "quoted" \\ back/slash\n'
    assert meta["resourceVersion"] == "18446744073709551617"
    assert decoded["object"]["spec"]["big"] == 1e300
    for bad in (b"this is not JSON {", b'{"a":1}{', b"\xff\xfe"):
        with pytest.raises(ValueError):
            kube_client.decode_json(bad)


async def test_a_body_that_is_not_json_becomes_its_message(served: tuple[Script, Kube]) -> None:
    script, kube = served
    script.answers = [
        (200, b"not JSON at all", "text/plain"),
        (503, b"upstream connect error", "text/plain"),
    ]
    assert await kube.call("GET", "/api/v1/namespaces") == {"message": "not JSON at all"}
    with pytest.raises(kube_client.KubeError) as refused:
        await kube.call("GET", "/api/v1/namespaces")
    assert (refused.value.status, refused.value.message) == (503, "upstream connect error")
