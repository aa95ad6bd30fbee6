"""The agents' tool path: the operator gives the agent `HUMANWORK_TOOL_PATH` only when its
`agent_tool_path` is not `native` (a bad value refused at start); the agent's MCP message
is what the platform's MCP endpoint reads, and the answers that endpoint builds (a result,
an approval it requires, a refusal) read back as the native path's answer and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from pydantic import ValidationError

from agent_image import mcp_calls
from agent_image.settings import AgentSettings
from agent_operator import builders
from agent_operator.config import OperatorSettings
from humanwork_core import catalog
from platform_api.agent_api.schemas import ToolCallOut
from platform_api.agent_mcp import calls, results
from platform_api.agent_mcp.view import KEY, STEP, TASK
from tests.unit.test_builders import instance

FIX = {"location_id": 1, "inventory_item_id": 2, "available_adjustment": -3}


def _env(settings: OperatorSettings) -> dict[str, Any]:
    pod = builders.pod_template(instance(), settings)
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}


def test_the_operator_gives_the_agent_its_tool_path_only_when_it_is_not_native() -> None:
    read = OperatorSettings.from_env({"HUMANWORK_OPERATOR_AGENT_TOOL_PATH": "mcp"})
    assert read.agent_tool_path == "mcp"
    assert _env(read)["HUMANWORK_TOOL_PATH"] == "mcp"
    assert "HUMANWORK_TOOL_PATH" not in _env(OperatorSettings())
    with pytest.raises(ValueError, match="AGENT_TOOL_PATH must be one of native, mcp"):
        OperatorSettings(agent_tool_path="grpc")


def _agent_settings(tmp_path: Path, **extra: Any) -> AgentSettings:
    values: dict[str, Any] = {
        "agent_id": "org-acme/agent",
        "agent_name": "agent",
        "org_id": "org-1",
        "namespace": "org-acme",
        "platform_url": "http://127.0.0.1:1",
        "callback_url": "http://127.0.0.1:1/v1/agent-events",
        "token_file": tmp_path / "token",
        "callback_secret_file": tmp_path / "secret",
        "config_file": tmp_path / "config",
        **extra,
    }
    return AgentSettings(**values)


def test_the_agent_reads_its_tool_path_and_refuses_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _agent_settings(tmp_path).tool_path == "native"
    monkeypatch.setenv("HUMANWORK_TOOL_PATH", "mcp")
    assert _agent_settings(tmp_path).tool_path == "mcp"
    monkeypatch.setenv("HUMANWORK_TOOL_PATH", "grpc")
    with pytest.raises(ValidationError):
        _agent_settings(tmp_path)


def test_the_agents_message_is_the_call_the_platform_reads() -> None:
    message = mcp_calls.request("shopify", "adjustInventoryLevel", FIX, "k-1", "task", "fix")
    parsed = types.CallToolRequest.model_validate(
        {"method": message["method"], "params": message["params"]}
    )
    assert message["jsonrpc"] == "2.0" and parsed.params.name == "shopify_adjustInventoryLevel"
    meta = parsed.params.meta
    assert meta is not None
    extra = dict(meta.model_extra or {})
    assert (extra[TASK], extra[STEP], extra[KEY]) == ("task", "fix", "k-1")
    action = catalog.TOOLS["shopify"].actions["adjustInventoryLevel"]
    body = calls.request_of(action, dict(parsed.params.arguments or {}), extra)
    assert (body.task, body.step, body.idempotencyKey, body.params) == ("task", "fix", "k-1", FIX)
    # a read names no step
    read = mcp_calls.request("shopify", "listProducts", {}, "r-1", None, None)
    assert set(read["params"]["_meta"]) == {KEY}


def _rpc(result: types.CallToolResult) -> dict[str, Any]:
    """The JSON-RPC answer the endpoint sends for `result`."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    answer: dict[str, Any] = json.loads(json.dumps({"jsonrpc": "2.0", "id": 1, "result": dumped}))
    return answer


def test_the_platforms_answers_read_as_the_native_paths() -> None:
    out = ToolCallOut(
        tool="shopify",
        action="adjustInventoryLevel",
        result={"inventory_level": {"available": 4}},
        replayed=False,
        sideEffecting=True,
        receipt={"type": "humanwork.io/tool-receipt/v1"},
    ).model_dump()
    ok = types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(out))],
        structuredContent=out,
        isError=False,
    )
    assert mcp_calls.answer(_rpc(ok)) == out

    needs = results.failure(results.APPROVAL_REQUIRED, "runs only as an approved step", {"x": "y"})
    with pytest.raises(mcp_calls.McpAnswerError) as refused:
        mcp_calls.answer(_rpc(needs))
    assert refused.value.code == "approval_required" and refused.value.details == {"x": "y"}
    unknown = results.failure("tool_call_outcome_unknown", "an expert must resolve it")
    with pytest.raises(mcp_calls.McpAnswerError) as held:
        mcp_calls.answer(_rpc(unknown))
    assert held.value.code == "tool_call_outcome_unknown"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}, "mcp_error"),
        ({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, "malformed_answer"),
        ({"jsonrpc": "2.0", "id": 1}, "malformed_answer"),
        ([], "malformed_answer"),
    ],
)
def test_an_answer_without_the_tools_result_is_an_error(body: Any, code: str) -> None:
    with pytest.raises(mcp_calls.McpAnswerError) as refused:
        mcp_calls.answer(body)
    assert refused.value.code == code
