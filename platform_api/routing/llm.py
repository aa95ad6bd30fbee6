"""The router's second opinion: an OpenAI-compatible chat model picks among the agents the
keywords could not tell apart ("LLM-based classification", seed 000).

Configured by `HUMANWORK_ROUTER_LLM_BASE_URL` (unset: no LLM, the keywords decide alone),
`HUMANWORK_ROUTER_LLM_MODEL` and `HUMANWORK_ROUTER_LLM_API_KEY`. The model sees each
candidate's name, specialist, description and keywords and the request, and must call the
function `choose_agent` with one of the names (or `none`). Anything else (an unknown name,
no call, an error, a timeout) counts as no choice: the router then falls back as if no LLM
were configured. The reason the model gives is cut to a short single line before it is
written into the task's annotation and the audit log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx

from platform_api.routing.scoring import BY_LLM, Candidate, Choice
from platform_api.settings import Settings

TOOL = "choose_agent"
REASON_LIMIT = 200
SYSTEM = (
    "You route a client's request to the one agent of the organisation whose specialist "
    "fits it. Call choose_agent with the agent's name, or with none when no agent fits."
)


def prompt(request: str, candidates: Sequence[Candidate]) -> list[dict[str, str]]:
    """The chat messages: who the agents are, then the request."""
    lines = [
        f"- {c.name}: specialist {c.specialist}"
        + (f"; {c.description}" if c.description else "")
        + (f"; keywords: {', '.join(c.keywords)}" if c.keywords else "")
        for c in candidates
    ]
    agents = "Agents:\n" + "\n".join(lines)
    return [
        {"role": "system", "content": SYSTEM + "\n\n" + agents},
        {"role": "user", "content": request},
    ]


def tool_schema(candidates: Sequence[Candidate]) -> dict[str, Any]:
    names = [c.name for c in candidates] + ["none"]
    return {
        "type": "function",
        "function": {
            "name": TOOL,
            "description": "Send the request to this agent.",
            "parameters": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": names},
                    "reason": {"type": "string", "description": "why, in one sentence"},
                },
                "required": ["agent", "reason"],
            },
        },
    }


def short_reason(text: str) -> str:
    """One printable line of at most REASON_LIMIT characters."""
    line = re.sub(r"[^\x20-\x7e]+", " ", text).strip()
    return line[:REASON_LIMIT]


def parse_choice(answer: dict[str, Any], candidates: Sequence[Candidate]) -> Choice | None:
    """Pure: the agent the model's answer names, if it is one of `candidates`."""
    try:
        message = answer["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        raw = calls[0]["function"]["arguments"] if calls else message.get("content") or ""
        args = json.loads(raw) if isinstance(raw, str) else raw
        agent, reason = str(args["agent"]), str(args.get("reason") or "")
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None
    if agent not in {c.name for c in candidates}:
        return None
    return Choice(agent, BY_LLM, "LLM: " + (short_reason(reason) or "no reason given"))


class LlmRouter:
    """Asks the configured model to choose; None when it does not, or cannot."""

    def __init__(self, settings: Settings, http: httpx.AsyncClient) -> None:
        assert settings.router_llm_base_url
        self._url = settings.router_llm_base_url.rstrip("/") + "/chat/completions"
        self._model = settings.router_llm_model
        key = settings.router_llm_api_key
        self._headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        self._timeout = settings.router_llm_timeout_seconds
        self._http = http

    async def choose(self, request: str, candidates: Sequence[Candidate]) -> Choice | None:
        body = {
            "model": self._model,
            "temperature": 0,
            "messages": prompt(request, candidates),
            "tools": [tool_schema(candidates)],
            "tool_choice": {"type": "function", "function": {"name": TOOL}},
        }
        try:
            answer = await self._http.post(
                self._url, json=body, headers=self._headers, timeout=self._timeout
            )
            if answer.status_code != 200:
                return None
            found = answer.json()
        except (httpx.HTTPError, ValueError):
            return None
        return parse_choice(found, candidates) if isinstance(found, dict) else None
