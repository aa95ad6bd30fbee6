"""Pure rules of an org's MCP tools: names, the definition hash a step pins, the risk.

- A server's name is `[a-z][a-z0-9]{0,29}`; a step calling one of its tools names the tool
  `mcp_<server>` (`step_tool`), its `parameters.action` is the MCP tool's name, its
  `parameters.params` the arguments and its `parameters.definition` the hash of the tool's
  definition the plan was made against (`definition_hash`). In the agents' MCP view the
  tool is `mcp_<server>_<tool>` (`view_name`, `parse_view_name`).
- A tool's definition is its name, description and input schema; its hash is
  `sha256:` + the SHA-256 of their canonical JSON: any change of the three changes it.
- A tool's risk is the one the org's admin set, else `high`; the server's annotations
  (`readOnlyHint`, `destructiveHint`, ...) are kept and shown but never read here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from humanwork_core import taskflow
from humanwork_core.risk import Risk

SERVER_NAME_PATTERN = r"^[a-z][a-z0-9]{0,29}$"
PREFIX = "mcp_"
DEFAULT_RISK = Risk.HIGH
"""The risk of a tool the org's admin did not mark."""
MAX_TOOLS = 200
"""The most tools one server's `tools/list` may bring into the org's catalog."""


def step_tool(server: str) -> str:
    """The step `tool` (and AgentInstance `enabledTools` entry) of a server's tools."""
    return PREFIX + server


def server_of_step_tool(tool: str) -> str | None:
    """The server a step's `tool` names, or None for a tool that is not an MCP server's."""
    if not tool.startswith(PREFIX):
        return None
    name = tool[len(PREFIX) :]
    return name if re.fullmatch(SERVER_NAME_PATTERN, name) else None


def view_name(server: str, tool: str) -> str:
    """The name of a server's tool in the agents' MCP view."""
    return f"{PREFIX}{server}_{tool}"


def parse_view_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an MCP view name, or None when it names no server's tool."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition("_")
    if not sep or not tool or re.fullmatch(SERVER_NAME_PATTERN, server) is None:
        return None
    return server, tool


def definition_of(name: str, description: str | None, input_schema: Any) -> dict[str, Any]:
    """The part of a tool a step pins: its name, description and input schema."""
    return {"name": name, "description": description or "", "inputSchema": input_schema}


def definition_hash(definition: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of the definition's canonical JSON."""
    digest = hashlib.sha256(taskflow.canonical_json(dict(definition))).hexdigest()
    return f"sha256:{digest}"


def tool_risk(admin_risk: str | None) -> Risk:
    """The risk of a tool: the admin's, else `high` (never the server's annotations)."""
    return Risk(admin_risk) if admin_risk is not None else DEFAULT_RISK
