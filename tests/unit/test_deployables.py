"""The container images are what the manifests expect: each Dockerfile is multi-stage,
runs a console script the project declares, as a numeric non-root user."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _stages(dockerfile: Path) -> list[list[str]]:
    stages: list[list[str]] = []
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def _instruction(stage: list[str], name: str) -> str | None:
    found = [line for line in stage if line.upper().startswith(name + " ")]
    return found[-1][len(name) + 1 :].strip() if found else None


@pytest.mark.parametrize(
    ("dockerfile", "entrypoint"),
    [("Dockerfile.operator", ["humanwork-operator"]), ("Dockerfile.agent", ["humanwork-agent"])],
)
def test_images_are_multi_stage_non_root_and_run_a_declared_entry_point(
    dockerfile: str, entrypoint: list[str]
) -> None:
    stages = _stages(REPO / dockerfile)
    assert len(stages) >= 2, "build tools stay in the build stage"
    final = stages[-1]
    base = _instruction(final, "FROM")
    assert base is not None and ":" in base and not base.endswith(":latest"), base
    assert not any("apt-get install" in line or "pip install" in line for line in final)
    user = _instruction(final, "USER")
    assert user is not None
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) >= 1000, user
    declared = _instruction(final, "ENTRYPOINT")
    assert declared is not None
    command = json.loads(declared)
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert command == entrypoint
    assert command[0] in scripts


def test_the_image_build_context_leaves_out_local_state() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for path in (".git", ".venv", ".cluster"):
        assert path in ignored
