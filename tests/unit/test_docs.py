"""The generated documentation matches the code: docs/openapi.json is the API's OpenAPI
document, the tables of docs/configuration.md are the settings classes, the tables of
docs/api.md are the endpoints and error codes. Regenerate with
`python -m humanwork_dev.deployables`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from humanwork_dev import deployables
from humanwork_dev.deployables import (
    API,
    CONFIGURATION,
    EXTRA_SETTINGS,
    FALLBACK_MEANINGS,
    OPENAPI,
    REPO,
    all_settings,
    environ_reads,
    openapi,
)

HINT = "stale: run `python -m humanwork_dev.deployables`"


@pytest.mark.parametrize("path", [OPENAPI, CONFIGURATION, API])
def test_the_generated_docs_match_the_code(path: Path) -> None:
    assert deployables.stale(only=lambda p: p == path) == [], HINT


def test_every_setting_has_a_meaning_and_no_fallback_is_left_over() -> None:
    settings = all_settings()
    missing = [(c, s.field) for c, rows in settings.items() for s in rows if not s.meaning]
    assert not missing, (
        f"settings without a description: {missing}; give each a docstring under the field "
        "(or a Field description) in its settings class"
    )
    fields = {(c, s.field) for c, rows in settings.items() for s in rows}
    assert set(FALLBACK_MEANINGS) <= fields, sorted(set(FALLBACK_MEANINGS) - fields)
    described_in_code = set()
    for component, rows in settings.items():
        for row in rows:
            key = (component, row.field)
            if key in FALLBACK_MEANINGS and row.meaning != FALLBACK_MEANINGS[key]:
                described_in_code.add(key)
    assert not described_in_code, (
        f"{sorted(described_in_code)} now have their own description: remove them from "
        "FALLBACK_MEANINGS in humanwork_dev/deployables.py"
    )


@pytest.mark.parametrize("component", ["platform", "operator", "agent"])
def test_variables_read_outside_the_settings_classes_are_documented(component: str) -> None:
    listed = {v for s in EXTRA_SETTINGS.get(component, []) for v in s.variables}
    assert environ_reads(component) == listed


def test_settings_have_distinct_variables_and_a_default_or_are_required() -> None:
    for rows in all_settings().values():
        variables = [v for s in rows for v in s.variables]
        assert len(variables) == len(set(variables))
        for row in rows:
            assert row.default, row


def test_every_endpoint_for_people_names_its_capability() -> None:
    document = openapi()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            who = deployables.credential(operation)
            if who == "user token, any user":
                assert (method, path) == ("get", "/users/me"), (method, path)
            assert who != "none" or (method, path) in {
                ("get", "/healthz"),
                ("post", "/auth/token"),
                ("get", "/v1/receipt-keys"),  # public keys only, for offline verification
            }, (method, path)


@pytest.mark.parametrize("name", ["architecture", "configuration", "api", "operations"])
def test_the_docs_link_to_files_that_exist(name: str) -> None:
    for doc in [REPO / "docs" / f"{name}.md"]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"


def test_the_argo_cd_example_installs_an_overlay_server_side() -> None:
    app = yaml.safe_load((REPO / "docs/argocd-application.yaml").read_text())
    assert app["kind"] == "Application"
    path = REPO / app["spec"]["source"]["path"]
    assert (path / "kustomization.yaml").exists(), path
    assert app["spec"]["destination"]["namespace"] == "humanwork-system"
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
