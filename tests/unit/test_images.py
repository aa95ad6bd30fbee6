"""The agent image carries only the agent (issue 13, item 1): Dockerfile.agent copies
agent_image and humanwork_core and nothing of the platform or the operator, and installs
requirements-agent.lock, which holds exactly the dependency closure of what those two
packages import, at the pins of requirements.lock. (`make images` builds the images; its
`pip check` and import of every agent module are the check in the image itself.)"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
AGENT_PACKAGES = ("agent_image", "humanwork_core")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _imported_distributions() -> set[str]:
    """The third-party distributions whose modules agent_image and humanwork_core import."""
    top: set[str] = set()
    for package in AGENT_PACKAGES:
        for source in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.Import):
                    top.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    top.add(node.module.split(".")[0])
    top -= set(sys.stdlib_module_names) | set(AGENT_PACKAGES)
    owners = importlib.metadata.packages_distributions()
    assert top <= set(owners), f"modules of no installed distribution: {top - set(owners)}"
    return {canonicalize_name(owners[module][0]) for module in top}


def _closure(roots: set[str]) -> set[str]:
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        for raw in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(raw)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return seen


def test_the_agent_lock_is_the_closure_of_the_agents_imports_at_the_main_pins() -> None:
    agent, full = _pins(REPO / "requirements-agent.lock"), _pins(REPO / "requirements.lock")
    assert {n: v for n, v in agent.items() if full.get(n) != v} == {}, "pins differ"
    assert set(agent) == _closure(_imported_distributions())


def test_the_agent_image_carries_neither_the_platform_nor_the_operator() -> None:
    agent = _pins(REPO / "requirements-agent.lock")
    for name in ("kopf", "kubernetes", "kubernetes-asyncio", "sqlalchemy", "asyncpg", "alembic"):
        assert name not in agent
    dockerfile = (REPO / "Dockerfile.agent").read_text()
    copies = [ln.split()[1] for ln in dockerfile.splitlines() if ln.startswith("COPY ")]
    assert copies == ["requirements-agent.lock", "humanwork_core", "agent_image", "--from=build"]
