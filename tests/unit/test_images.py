"""Each image carries only its component: Dockerfile.<component> copies humanwork_core and
the component's own package, and installs requirements-<component>.lock, which holds exactly
the closure of the core's dependencies and the component's group of pyproject.toml, at the
pins of requirements.lock, and nothing the component imports is missing from it: every
module of the component imports in a virtualenv that holds that lock's distributions and
nothing else. (`make images` builds the images; their `pip check` and import of every
module are the check in the image itself.)"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from humanwork_dev.locks import COMPONENTS, closure, component_lock

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    # component: {import package: its folder}
    "operator": {"humanwork_core": "humanwork_core", "agent_operator": "operator/agent_operator"},
    "platform": {"humanwork_core": "humanwork_core", "platform_api": "platform_api"},
    "agent": {"humanwork_core": "humanwork_core", "agent_image": "agent_image"},
}
LOADED_BY_NAME = {
    # declared without an import of their own: what loads them, by name
    "platform": {
        "asyncpg": "SQLAlchemy, for postgresql+asyncpg:// URLs",
        "aiosqlite": "SQLAlchemy, for sqlite+aiosqlite:// URLs",
        "uvloop": "uvicorn's loop='uvloop'",
        "httptools": "uvicorn's http='httptools'",
    },
}
NOT_IMPORTABLE_ALONE = ("platform_api.migrations.env",)
"""The Alembic environment, which runs only inside a migration (as in Dockerfile.platform)."""
NOT_USED_BY = {
    # modules of the shared core a component's image carries but never imports (a contract
    # of pyproject.toml forbids it), so its lock need not hold their dependencies
    "agent": ("humanwork_core.kube_client",),  # the lean client over aiohttp
}
FOREIGN = {
    # what each image must not carry (the other components' frameworks and clients)
    "operator": (
        *("fastapi", "sqlalchemy", "asyncpg", "alembic", "uvicorn", "mcp"),
        *("kubernetes", "kubernetes-asyncio", "pykube-ng"),  # none for kopf to find
    ),
    "platform": ("kopf", "kubernetes", "kubernetes-asyncio"),  # its client: the lean one
    "agent": ("kopf", "kubernetes", "kubernetes-asyncio", "sqlalchemy", "asyncpg", "alembic"),
}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _imported_modules(component: str) -> set[str]:
    """The top-level third-party modules the component's packages import."""
    top: set[str] = set()
    unused = {REPO / (m.replace(".", "/") + ".py") for m in NOT_USED_BY.get(component, ())}
    for folder in PACKAGES[component].values():
        for source in (REPO / folder).rglob("*.py"):
            if source in unused:
                continue
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.Import):
                    top.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    top.add(node.module.split(".")[0])
    return top - set(sys.stdlib_module_names) - set(PACKAGES[component])


@functools.cache
def _distributions() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _owners(module: str) -> set[str]:
    owners = _distributions()
    assert module in owners, f"{module} belongs to no installed distribution"
    return {canonicalize_name(name) for name in owners[module]}


def _declared(component: str) -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    raws = [*project["dependencies"], *project["optional-dependencies"][component]]
    return {canonicalize_name(Requirement(raw).name) for raw in raws}


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_lock_is_the_closure_of_its_group_at_the_main_pins(component: str) -> None:
    lock, full = _pins(REPO / component_lock(component)), _pins(REPO / "requirements.lock")
    assert {n: v for n, v in lock.items() if full.get(n) != v} == {}, "pins differ"
    assert lock == closure((component,)), "stale: run `make lock`"
    for name in FOREIGN[component]:
        assert name not in lock


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_group_declares_what_its_component_imports_and_no_more(component: str) -> None:
    lock, declared = _pins(REPO / component_lock(component)), _declared(component)
    used: set[str] = set()
    for module in _imported_modules(component):
        owners = _owners(module)
        assert owners & set(lock), f"{component} imports {module}, which its lock lacks"
        used |= owners
    # the shared core's dependencies count as used by every component (humanwork_core is in
    # every image), the rest of the group by this component's own imports
    unused = declared - used - set(LOADED_BY_NAME.get(component, {}))
    assert unused == set(), f"declared in the {component} group but never imported"


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_dockerfile_copies_its_lock_and_its_packages_only(component: str) -> None:
    dockerfile = (REPO / f"Dockerfile.{component}").read_text()
    copies = [ln.split()[1] for ln in dockerfile.splitlines() if ln.startswith("COPY ")]
    assert copies == [str(component_lock(component)), *PACKAGES[component].values(), "--from=build"]


def _venv_of(lock: dict[str, str], packages: dict[str, str], root: Path) -> Path:
    """A virtualenv whose site-packages hold the lock's distributions (the files of their
    RECORD, linked from this environment, at the same versions) and the component's
    packages, nothing else."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    for name, version in lock.items():
        distribution = importlib.metadata.distribution(name)
        assert distribution.version == version, f"the venv holds {name} {distribution.version}"
        for file in distribution.files or []:
            if ".." in file.parts:
                continue  # console scripts, outside site-packages
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(Path(str(distribution.locate_file(file))).resolve())
    for package, folder in packages.items():
        (site / package).symlink_to(REPO / folder)
    return python


def _import_every_module(
    python: Path, packages: list[str], unused: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    names = ", ".join(packages)
    skipped = (*NOT_IMPORTABLE_ALONE, *unused)
    skip = " and ".join(f"not m.name.startswith({n!r})" for n in skipped)
    code = (
        f"import importlib, pkgutil, {names}; "
        f"[importlib.import_module(m.name) for p in ({names},) "
        'for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".") '
        f'if not m.name.endswith("__main__") and {skip}]'
    )
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}
    return subprocess.run(
        [python, "-B", "-I", "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_module_of_a_component_imports_from_its_lock_alone(
    component: str, tmp_path: Path
) -> None:
    lock = _pins(REPO / component_lock(component))
    python = _venv_of(lock, PACKAGES[component], tmp_path / "venv")
    unused = NOT_USED_BY.get(component, ())
    done = _import_every_module(python, list(PACKAGES[component]), unused)
    assert done.returncode == 0, done.stderr[-3000:]
    # the control: the venv sees nothing of this one (another component's package and the
    # frameworks it does not lock fail to import there)
    others = [p for c, ps in PACKAGES.items() if c != component for p in ps]
    others = [p for p in others if p != "humanwork_core"]
    foreign = [{"pykube-ng": "pykube"}.get(n, n.replace("-", "_")) for n in FOREIGN[component]]
    for module in (*others, *foreign):
        probe = subprocess.run([python, "-I", "-c", f"import {module}"], capture_output=True)
        assert probe.returncode != 0, f"{module} importable in the {component} venv"
