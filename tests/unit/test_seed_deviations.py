"""docs/seed-deviations.md cannot drift: every endpoint it names as this project's (the
"this project does" column) exists in the platform API's OpenAPI document, or in the
agent's for those written `agent METHOD /path`; the README links the page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agent_image.app import create_app as create_agent_app
from agent_image.settings import AgentSettings
from humanwork_dev.deployables import REPO, openapi
from tests.unit.test_agent_config import write_config

DOC = REPO / "docs" / "seed-deviations.md"
ENDPOINT = re.compile(r"`(agent )?(GET|POST|PUT|PATCH|DELETE) (/[^`\s?]*)[^`]*`")
HEADER = "| topic | the seed says | this project does | why |"


def rows(text: str) -> list[list[str]]:
    """The cells of every row of the page's tables (header and rule rows left out)."""
    found = []
    for line in text.splitlines():
        if not line.startswith("| ") or line == HEADER or line.startswith("| ---"):
            continue
        found.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return found


def named_endpoints(text: str) -> set[tuple[str, str, str]]:
    """(component, method, path) of each endpoint the "this project does" cells name."""
    named = set()
    for cells in rows(text):
        assert len(cells) == 4, f"a row of four cells, not {len(cells)}: {cells}"
        for agent, method, path in ENDPOINT.findall(cells[2]):
            named.add(("agent" if agent else "platform", method.lower(), path))
    return named


def operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {(m, p) for p, item in document["paths"].items() for m in item}


def agent_openapi(tmp_path: Path) -> dict[str, Any]:
    write_config(tmp_path / "config.json")
    settings = AgentSettings(
        agent_id="org-acme/acme",
        agent_name="acme",
        org_id="3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17",
        namespace="org-acme",
        platform_url="http://platform.invalid",
        callback_url="http://platform.invalid/v1/agent-events",
        token_file=tmp_path / "token",
        callback_secret_file=tmp_path / "secret",
        config_file=tmp_path / "config.json",
    )
    document: dict[str, Any] = create_agent_app(settings).openapi()
    return document


def test_every_endpoint_the_page_names_exists(tmp_path: Path) -> None:
    named = named_endpoints(DOC.read_text(encoding="utf-8"))
    known = {
        "platform": operations(openapi()),
        "agent": operations(agent_openapi(tmp_path)),
    }
    missing = sorted(e for e in named if (e[1], e[2]) not in known[e[0]])
    assert not missing, f"docs/seed-deviations.md names endpoints that do not exist: {missing}"
    # the page names the UID routes and both components' endpoints (a page without
    # endpoints would pass the check above)
    assert ("platform", "get", "/agentic/tasks/{task_uid}") in named
    assert ("platform", "post", "/agentic/tasks/{task_uid}/steps/{step_id}/approve") in named
    assert len({e for e in named if e[0] == "agent"}) >= 5
    assert len(named) >= 30


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (
            "`GET /agentic/tasks/{namespace}/{name}`",
            {("platform", "get", "/agentic/tasks/{namespace}/{name}")},
        ),
        ("`agent POST /v1/tasks`", {("agent", "post", "/v1/tasks")}),
        ("`GET /v1/agent-api/context?query=`", {("platform", "get", "/v1/agent-api/context")}),
        ("`GET /no/such/route`", {("platform", "get", "/no/such/route")}),
        ("`HUMANWORK_TOKEN_FILE`, not an endpoint", set()),
    ],
)
def test_the_check_reads_what_the_page_writes(
    cell: str, expected: set[tuple[str, str, str]]
) -> None:
    assert named_endpoints(f"| t | s | {cell} | w |") == expected


def test_an_endpoint_that_is_gone_is_reported() -> None:
    named = named_endpoints("| t | s | `GET /agentic/tasks/{id}/gone` | w |")
    assert named and not named & {("platform", m, p) for m, p in operations(openapi())}


def test_the_readme_links_the_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/seed-deviations.md)" in readme
