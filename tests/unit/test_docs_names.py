"""The docs and the code name the same things: no ticket tag ("issue N") in product code or
docs (a comment says its reason), every migration that README.md or docs/*.md names is a
file of `platform_api/migrations/versions` (by its full name, `NNNN_topic`, with that
revision id, `NNNN` or `NNNN_topic`), every capability they name is one the platform checks,
and every endpoint they name (`POST /orgs/{id}/agents`) is a route of the platform's API
(docs/openapi.json) or of the agent's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from agent_image.routes import ROUTERS as AGENT_ROUTERS
from platform_api import app as _app  # noqa: F401  (importing the routers declares capabilities)
from platform_api.floor.capabilities import known
from platform_api.models import Base

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
VERSIONS = REPO / "platform_api" / "migrations" / "versions"
PRODUCT = (".py", ".md", ".js", ".html", ".yaml", ".yml")
TICKET = re.compile(r"\b[Ii]ssue\s+(?:#\s*|//\s*)?\d+")
MIGRATION = re.compile(r"[Mm]igrations?\s+`?(\d{4})(_[a-z0-9_]+)?`?")
DOTTED = re.compile(r"`([a-z_]+)\.([a-z_]+)`")
ENDPOINT = re.compile(
    r"\b((?:GET|POST|PUT|PATCH|DELETE)(?:\|(?:GET|POST|PUT|PATCH|DELETE))*) "
    r"(/[A-Za-z0-9_{}/:.\-]*(?:\[/[A-Za-z0-9_{}/.\-]+\])?)"
)
SEED_ONLY = {
    ("GET", "/memory/search"),
    ("POST", "/v1/knowledge/ingest"),
    ("POST", "/v1/tasks/{}/steps/{}/go"),
}
"""The seeds' endpoints that docs/seed-deviations.md names as what this project replaced."""
RETIRED = {"tasks.decide": "run.control"}
"""Capabilities that no longer exist, each with the one that replaced it: a doc names one
only in a sentence that names its replacement too (what a migration moved)."""
NOT_CAPABILITIES = {
    "access.denied": "an audit action",
    "org.client_settings": "an audit action",
    "org.deactivated": "an audit action",
    "org.reactivated": "an audit action",
    "agents.planning": "a module, platform_api/agents/planning.py",
    "replies.settle": "a function, platform_api/replies/service.py",
    "users.grants": "the reason of a refusal",
}
"""Dotted names in the docs that share a capability's first word but are something else
(table columns are recognised from the models)."""


def _product_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [
        REPO / name
        for name in listed
        if name.endswith(PRODUCT) and not name.startswith("tests/") and (REPO / name).is_file()
    ]


def test_no_ticket_tag_in_product_code_or_docs() -> None:
    files = _product_files()
    assert len(files) > 100  # the walk reached the product, not an empty folder
    tagged = [
        f"{path.relative_to(REPO)}:{text[: found.start()].count(chr(10)) + 1}: {found.group()}"
        for path in files
        for text in [path.read_text(errors="replace")]
        for found in TICKET.finditer(text)
    ]
    assert not tagged, "say the reason, not the ticket:\n" + "\n".join(tagged)


def test_the_ticket_pattern_catches_a_tag_even_across_a_line_break() -> None:
    # positive control of the pattern the test above relies on
    for tagged in ("(issue 15, item 9)", "Issue 17: memory", "(issue\n15)", "issue #12"):
        assert TICKET.search(tagged), tagged
    for clean in ("an issue with 3 retries", "tissue 5", "the issues"):
        assert not TICKET.search(clean), clean


def _revisions() -> dict[str, str]:
    """`NNNN_topic` -> the revision id its file declares."""
    found = {}
    for path in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"):
        revision = re.search(r'^revision\s*=\s*"([^"]+)"', path.read_text(), re.M)
        assert revision is not None, path
        found[path.stem] = revision.group(1)
    return found


SENTENCE_END = re.compile(r"\.\s|\n\n|\|")


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence (or table cell) of `text` around [start, end)."""
    before = [m.end() for m in SENTENCE_END.finditer(text, 0, start)]
    after = SENTENCE_END.search(text, end)
    return text[before[-1] if before else 0 : after.start() if after else len(text)]


def _mentions(pattern: re.Pattern[str]) -> list[tuple[str, int, re.Match[str], str]]:
    """Each match of `pattern` in the docs: the doc, its line, the match, its sentence."""
    hits = []
    for doc in DOCS:
        text = doc.read_text()
        for found in pattern.finditer(text):
            line = text[: found.start()].count("\n") + 1
            hits.append((doc.name, line, found, _sentence(text, found.start(), found.end())))
    return hits


def test_every_migration_the_docs_name_exists_by_its_full_name() -> None:
    revisions = _revisions()
    assert len(revisions) >= 15
    for name, revision in revisions.items():
        assert revision in (name.split("_", 1)[0], name), (name, revision)
    mentions = _mentions(MIGRATION)
    assert len(mentions) >= 10
    wrong = [
        f"{doc}:{line}: {m.group().strip()}"
        for doc, line, m, _ in mentions
        if f"{m.group(1)}{m.group(2) or ''}" not in revisions
    ]
    assert not wrong, f"no such migration (name it `NNNN_topic`, {sorted(revisions)}): {wrong}"


def _columns() -> set[str]:
    return {f"{t.name}.{c.name}" for t in Base.metadata.tables.values() for c in t.columns}


def _stale(name: str, sentence: str, columns: set[str]) -> bool:
    """Whether `name`, a dotted name in `sentence` of a doc, is a capability that does not exist
    (a retired one is allowed beside its replacement; columns and the listed others are not
    capabilities)."""
    if name in columns or name in NOT_CAPABILITIES or name in known():
        return False
    return not (name in RETIRED and f"`{RETIRED[name]}`" in sentence)


def test_every_capability_the_docs_name_is_one_the_platform_checks() -> None:
    words = {c.split(".")[0] for c in known()}
    columns = _columns()
    named = set()
    wrong = []
    for doc, line, m, text in _mentions(DOTTED):
        if m.group(1) not in words:
            continue
        name = f"{m.group(1)}.{m.group(2)}"
        named.add(name)
        if _stale(name, text, columns):
            wrong.append(f"{doc}:{line}: {name}")
    assert not wrong, f"not a capability the platform checks ({sorted(known())}): {wrong}"
    assert named >= {"run.control", "tasks.read", "conversations.participate"}


@pytest.mark.parametrize(
    "line, stale",
    [
        ("an expert with `tasks.decide` calls retry", True),
        ("moved every `tasks.decide` holder to `run.control`", False),
        ("an expert with `tasks.approve` calls retry", True),
        ("an expert with `run.control` calls retry", False),
        ("`users.platform_admin` is a column", False),
    ],
)
def test_the_capability_rule_on_one_line(line: str, stale: bool) -> None:
    # the controls of the rule above: a stale name is caught, a true one passes
    m = DOTTED.search(line)
    assert m is not None
    assert _stale(f"{m.group(1)}.{m.group(2)}", line, _columns()) is stale


def _route_key(method: str, path: str) -> tuple[str, str]:
    """A route as the docs may spell it: each parameter `{}` (`{id}`, `{org_id}`, the seed's
    `:id`); a human task's `{id}` stands for its `{namespace}/{name}/{step_id}`."""
    path = re.sub(r"\{[^}]*\}|:[a-z_]+", "{}", path.rstrip("/.\\"))
    path = re.sub(r"^/human-tasks/\{\}(?=/[a-z]+$|$)", "/human-tasks/{}/{}/{}", path)
    return method, path


def _routes() -> set[tuple[str, str]]:
    spec = json.loads((REPO / "docs" / "openapi.json").read_text())
    routes = {_route_key(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    for router in AGENT_ROUTERS:
        for route in router.routes:
            routes |= {_route_key(m, route.path) for m in getattr(route, "methods", ())}
    return routes


def _named_endpoints(text: str) -> list[tuple[str, str]]:
    """Each (method, path) a text names; `GET|PUT /a[/{b}]` names four."""
    named = []
    for m in ENDPOINT.finditer(text):
        base, _, optional = m.group(2).partition("[")
        paths = [base, base + optional.rstrip("]")] if optional else [base]
        named += [_route_key(method, p) for method in m.group(1).split("|") for p in paths]
    return [key for key in named if key[1] not in ("/", "/...")]


def test_every_endpoint_the_docs_name_is_a_route() -> None:
    routes = _routes()
    assert ("POST", "/orgs/{}/agents") in routes and ("POST", "/v1/tasks") in routes
    wrong, named = [], 0
    for doc in DOCS:
        for key in _named_endpoints(doc.read_text()):
            named += 1
            if key not in routes and key not in SEED_ONLY:
                wrong.append(f"{doc.name}: {' '.join(key)}")
    assert named > 100  # the docs were read
    assert not wrong, f"no such route: {sorted(set(wrong))}"


@pytest.mark.parametrize(
    "text, keys",
    [
        ("`GET|DELETE /orgs/{id}/webhooks[/{name}]`", [
            ("GET", "/orgs/{}/webhooks"), ("GET", "/orgs/{}/webhooks/{}"),
            ("DELETE", "/orgs/{}/webhooks"), ("DELETE", "/orgs/{}/webhooks/{}"),
        ]),
        ("then `POST /human-tasks/{id}/retry`.", [("POST", "/human-tasks/{}/{}/{}/retry")]),
        ("the seed's `GET /agentic/tasks/:id`", [("GET", "/agentic/tasks/{}")]),
    ],
)  # fmt: skip
def test_the_endpoint_rule_on_one_line(text: str, keys: list[tuple[str, str]]) -> None:
    assert _named_endpoints(text) == keys
