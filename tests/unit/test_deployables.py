"""The container images are what the manifests expect: each Dockerfile is multi-stage on a
pinned base, installs the locked dependencies in its build stage only, runs the console
script of its component as a numeric non-root user; the lock pins every runtime dependency
the project declares (and nothing the project does not need).

These checks read the Dockerfiles; `make images` builds them (buildah, on a Debian base
passed as the BASE build argument, whose default is the pinned official image)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from humanwork_dev.locks import GROUPS, closure

REPO = Path(__file__).resolve().parents[2]
IMAGES = {
    # Dockerfile: (console script, the image name the manifests and the operator use)
    "Dockerfile.operator": ("humanwork-operator", "humanwork/operator"),
    "Dockerfile.platform": ("humanwork-platform", "humanwork/platform-api"),
    "Dockerfile.agent": ("humanwork-agent", "humanwork/agent"),
}


def _stages(dockerfile: Path) -> list[list[str]]:
    """The instructions of each stage (continuation lines joined, comments dropped), with
    the global build arguments (ARG before the first FROM) replaced by their defaults."""
    stages: list[list[str]] = []
    pending = ""
    args: dict[str, str] = {}
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if not stages and line.upper().startswith("ARG "):
            name, _, default = line[4:].strip().partition("=")
            assert default, f"{dockerfile.name}: a global ARG without a default: {line}"
            args[name] = default
            continue
        if line.upper().startswith("FROM "):
            for name, default in args.items():
                line = line.replace("${" + name + "}", default)
            stages.append([])
        assert stages, f"{dockerfile.name}: an instruction before the first FROM: {line}"
        stages[-1].append(line)
    return stages


def _instructions(stage: list[str], name: str) -> list[str]:
    return [line[len(name) + 1 :].strip() for line in stage if line.upper().startswith(name + " ")]


def _instruction(stage: list[str], name: str) -> str | None:
    found = _instructions(stage, name)
    return found[-1] if found else None


def test_every_dockerfile_is_checked() -> None:
    assert {p.name for p in REPO.glob("Dockerfile*")} == set(IMAGES)


@pytest.mark.parametrize("dockerfile", sorted(IMAGES))
def test_images_are_multi_stage_pinned_non_root_and_run_their_console_script(
    dockerfile: str,
) -> None:
    script, _ = IMAGES[dockerfile]
    stages = _stages(REPO / dockerfile)
    assert len(stages) >= 2, "build tools stay in the build stage"
    for stage in stages:
        base = _instruction(stage, "FROM")
        assert base is not None
        image = base.split()[0]
        assert "$" not in image, "the base is written out, so that it is visibly pinned"
        assert ":" in image and not image.endswith(":latest"), image
        tag = image.split(":", 1)[1]
        assert tag[0].isdigit() and tag.count(".") >= 2, f"a full version: {image}"

    build, final = stages[0], stages[-1]
    installs = " ".join(_instructions(build, "RUN"))
    # each component its own lock, binary wheels only, nothing resolved again
    lock = f"requirements-{dockerfile.removeprefix('Dockerfile.')}.lock"
    assert f"pip install --no-deps --only-binary=:all: -r {lock}" in installs
    assert "pip install --no-deps ." not in installs, "the project's distribution holds all"
    assert "pip check" in installs
    assert not _instructions(final, "RUN"), "the final stage installs nothing"
    copies = _instructions(final, "COPY")
    assert copies and all(c.startswith("--from=") for c in copies), copies

    user = _instruction(final, "USER")
    assert user is not None
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) >= 1000, user
    assert not gid or (gid.isdigit() and int(gid) >= 1000), user
    workdir = _instruction(final, "WORKDIR")
    assert workdir == "/tmp", "relative paths land on the one writable mount"

    declared = _instruction(final, "ENTRYPOINT")
    assert declared is not None
    command = json.loads(declared)  # the exec form: signals reach the process
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert command == [script]
    module = scripts[script].split(":")[0].split(".")[0]
    folder = {"agent_operator": "operator/agent_operator"}.get(module, module)
    copied = " ".join(_instructions(build, "COPY"))
    assert f"{folder} " in copied + " ", f"{dockerfile} does not copy {folder}"


@pytest.mark.parametrize("dockerfile", sorted(IMAGES))
def test_the_manifests_run_the_images_as_their_users(dockerfile: str) -> None:
    stages = _stages(REPO / dockerfile)
    uid = int((_instruction(stages[-1], "USER") or "").split(":")[0])
    script, image = IMAGES[dockerfile]
    if image == "humanwork/agent":  # the operator builds agent pods from its settings
        from agent_operator.config import OperatorSettings

        settings = OperatorSettings()
        assert settings.agent_image.split(":")[0] == image
        assert settings.agent_run_as_user == uid
        return
    component = image.split("/")[1]
    deployment = yaml.safe_load(
        (REPO / f"manifests/base/{component.removesuffix('-api')}/deployment.yaml").read_text()
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["containers"][0]["image"].split(":")[0] == image
    if script == "humanwork-platform":
        assert pod["containers"][0]["args"] == ["serve"]


def test_the_image_build_context_leaves_out_local_state() -> None:
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in (".git", ".venv", ".cluster", "tests", "docs", "**/__pycache__"):
        assert path in ignored
    for needed in [*(f"requirements-{d.removeprefix('Dockerfile.')}.lock" for d in IMAGES)]:
        assert needed not in ignored


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_runtime_dependency_in_a_version_the_project_accepts() -> None:
    pins = _locked()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = project["optional-dependencies"]
    declared = [*project["dependencies"], *(raw for group in GROUPS for raw in groups[group])]
    for raw in declared:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (raw, pins[name])


def test_the_lock_holds_exactly_the_runtime_closure() -> None:
    # names, not versions: the development environment may be newer than the lock; run
    # `make lock` to bring the lock up to it
    every, pins = closure(GROUPS), _locked()
    assert set(pins) == set(every), (
        f"missing from the lock: {sorted(set(every) - set(pins))}; "
        f"not needed: {sorted(set(pins) - set(every))} (regenerate with `make lock`)"
    )
    test_tools = {"pytest", "hypothesis", "ruff", "mypy", "schemathesis", "import-linter"}
    assert not test_tools & set(pins)
