"""The dependency locks: the exact versions each component's image installs.

pyproject.toml declares the dependencies by component: `[project] dependencies` are the
shared core's (`humanwork_core`, which every component imports), and one optional group per
component (`operator`, `platform`, `agent`, `plugin`) adds what that component imports
besides. From them, with the versions installed in the development environment:

- `requirements.lock`: the union, every runtime dependency of every component;
- `requirements-<component>.lock` for the three components with an image: the closure of
  the core's dependencies and the component's group, at the same pins, which its Dockerfile
  installs (and nothing else).

    python -m humanwork_dev.locks            # write the locks (`make lock`)
    python -m humanwork_dev.locks --check    # list the stale ones, exit 1 when any

`python -m humanwork_dev.deployables` writes and checks them too, with the other generated
files; `tests/unit/test_images.py` checks each lock against what its component imports.
"""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from humanwork_dev import generated

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTION = "humanwork-operator"
MAIN = Path("requirements.lock")
COMPONENTS = ("operator", "platform", "agent")
"""The components with an image, each with a lock of its own."""
GROUPS = (*COMPONENTS, "plugin")
"""Every component's optional group: the development venv and the main lock hold them all."""


def component_lock(component: str) -> Path:
    return Path(f"requirements-{component}.lock")


def closure(groups: tuple[str, ...], distribution: str = DISTRIBUTION) -> dict[str, str]:
    """{canonical name: installed version} of the core's dependencies, those of `groups`
    (optional groups of `distribution`), and theirs, with the extras each one is asked for."""
    pending: list[Requirement] = []
    for raw in importlib.metadata.distribution(distribution).requires or []:
        requirement = Requirement(raw)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": g}) for g in ("", *groups)):
            pending.append(requirement)
    wanted: dict[str, set[str]] = {}
    versions: dict[str, str] = {}
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        extras = set(requirement.extras)
        if name in versions and extras <= wanted[name]:
            continue
        wanted.setdefault(name, set()).update(extras)
        found = importlib.metadata.distribution(requirement.name)
        versions[name] = found.version
        for raw in found.requires or []:
            sub = Requirement(raw)
            applies = sub.marker is None or any(
                sub.marker.evaluate({"extra": extra}) for extra in ("", *wanted[name])
            )
            if applies:
                pending.append(sub)
    return versions


def _text(header: str, versions: dict[str, str]) -> str:
    lines = textwrap.wrap(header, width=88, initial_indent="# ", subsequent_indent="# ")
    lines += [f"{name}=={version}" for name, version in sorted(versions.items())]
    return "\n".join(lines) + "\n"


def rendered() -> dict[Path, str]:
    """{path: its content} for every lock."""
    written = (
        "Written from the development environment by `make lock` (python -m humanwork_dev.locks)"
    )
    files = {
        MAIN: _text(
            "The exact runtime dependencies of every component, the union of the component "
            "locks requirements-<component>.lock that the images install: the project's own "
            f"dependencies and theirs; no test or lint tools. {written}.",
            closure(GROUPS),
        )
    }
    for component in COMPONENTS:
        files[component_lock(component)] = _text(
            f"The exact runtime dependencies of the {component} image (Dockerfile.{component}): "
            f"the closure of the core's dependencies and the `{component}` group of "
            f"pyproject.toml, at the pins of requirements.lock. {written}; "
            "tests/unit/test_images.py checks it against what the component imports.",
            closure((component,)),
        )
    return files


def main(argv: list[str] | None = None) -> int:
    return generated.write_or_check("python -m humanwork_dev.locks", __doc__, rendered, REPO, argv)


if __name__ == "__main__":
    sys.exit(main())
