"""The read-only `web.fetch` tool in the agent (issue 15, item 10): the planner's prompt and
the chat functions read it from the action catalog, and a plan step calling it validates
as a low-risk read the expert approves like any other."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_image.planning.llm import plan_prompt, validate_plan
from agent_image.responder import chat_functions
from humanwork_core import catalog
from humanwork_core.risk import Risk
from tests.unit.test_agent_planner import CONFIG


def test_web_fetch_is_a_low_risk_read_safe_to_retry() -> None:
    entry = catalog.find("web", "fetch")
    assert entry is not None
    assert (entry.side_effect, entry.min_risk, entry.retry_safe) == (False, Risk.LOW, True)
    assert entry.required == ("url",)


def test_the_agent_plans_and_chats_with_web_fetch() -> None:
    prompt = plan_prompt(CONFIG, "What does our returns page say?", None, datetime.now(UTC))
    assert "- tool `web`" in prompt and "`fetch` [read-only]" in prompt
    [function] = chat_functions(["web"])
    assert function["function"]["name"] == "web__fetch"
    assert function["function"]["parameters"]["required"] == ["url"]
    steps, _ = validate_plan(
        {
            "steps": [
                {
                    "description": "Read the returns page",
                    "tool": "web",
                    "action": "fetch",
                    "params": {"url": "https://docs.acme.example/returns"},
                    "risk": "low",
                }
            ]
        },
        tools=["web"],
    )
    assert steps[0].tool == "web"
    assert steps[0].parameters == {
        "action": "fetch",
        "params": {"url": "https://docs.acme.example/returns"},
    }
