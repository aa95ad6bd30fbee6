"""The import contracts (pyproject.toml, `make lint` runs them) cover the whole platform:
every package of `platform_api` with a router, a service or a repository, at any depth (the
shared floor's `floor/audit` too), is a container of the router-over-service-over-repository
contract, so a new slice cannot sit outside it."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = "Inside each platform slice: router over service over repository"


def _slices() -> set[str]:
    root = REPO / "platform_api"
    return {
        ".".join(("platform_api", *d.relative_to(root).parts))
        for d in root.rglob("*")
        if d.is_dir()
        and any((d / f"{m}.py").is_file() for m in ("router", "service", "repository"))
    }


def test_every_platform_slice_is_in_the_layers_contract() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == LAYERS]
    slices = _slices()
    # the walk found the slices, nested ones included
    assert len(slices) >= 25 and {"platform_api.tasks", "platform_api.floor.audit"} <= slices
    missing = sorted(slices - set(contract["containers"]))
    assert not missing, f"add to the contract {LAYERS!r} in pyproject.toml: {missing}"
