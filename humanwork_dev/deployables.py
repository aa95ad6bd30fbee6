"""The generated parts of the deployables, so that they never drift from the code:

- `docs/openapi.json`: the platform API's OpenAPI document;
- the tables of `docs/configuration.md`: every setting of the platform API, the operator and
  the agent (variable, type, default, meaning), read from their settings classes;
- the tables of `docs/api.md`: every endpoint with the credential and capability it needs,
  and every error code;
- the dependency locks (`requirements.lock` and one per component's image), written by
  :mod:`humanwork_dev.locks`.

    python -m humanwork_dev.deployables            # write them all
    python -m humanwork_dev.deployables --check    # list the stale ones, exit 1 when any

`tests/unit/test_docs.py` fails when a generated part differs from what this writes.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from humanwork_dev import generated, locks

REPO = Path(__file__).resolve().parents[1]
OPENAPI = Path("docs/openapi.json")
CONFIGURATION = Path("docs/configuration.md")
API = Path("docs/api.md")

BEGIN = "<!-- generated: {name} (python -m humanwork_dev.deployables); do not edit -->"
END = "<!-- end generated: {name} -->"


# --- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting as the configuration reference shows it."""

    field: str
    variables: tuple[str, ...]
    type: str
    default: str
    meaning: str


FALLBACK_MEANINGS: dict[tuple[str, str], str] = {
    # Fields whose class gives them no description or docstring yet. Better: a docstring
    # under the field (or a Field description); the entry here then has to go (a test
    # refuses entries that are no longer needed).
    ("platform", "jwt_issuer"): "`iss` of the tokens the built-in issuer mints (`POST "
    "/auth/token`) and the issuer a token must name to be verified with the built-in key",
    ("platform", "jwt_audience"): "`aud` of the built-in issuer's tokens; also the audience "
    "OIDC tokens must carry when `HUMANWORK_OIDC_AUDIENCE` is unset",
    ("platform", "token_lifetime_seconds"): "lifetime of a token from `POST /auth/token` "
    "(at most 86400)",
    ("platform", "oidc_issuer"): "the `iss` of the external OIDC issuer whose tokens are "
    "verified with `HUMANWORK_OIDC_JWKS_URL`",
    ("platform", "oidc_audience"): "the `aud` OIDC tokens must carry (unset: "
    "`HUMANWORK_JWT_AUDIENCE`)",
    ("platform", "oidc_algorithms"): "signature algorithms accepted from the OIDC issuer "
    "(JSON list)",
    ("platform", "host"): "address `humanwork-platform serve` binds (`0.0.0.0` in a pod)",
    ("platform", "port"): "port it listens on (the Service and the agents' NetworkPolicies "
    "assume 8000)",
    ("operator", "platform_api_service"): "name of the platform API's Service in "
    "`platform_namespace`: agents reach `<scheme>://<service>.<namespace>.svc:<port>`",
    ("operator", "platform_api_scheme"): "`http` or `https`, for the platform URL agents are given",
    ("operator", "agent_port"): "port of the agent's HTTP server (its command API and "
    "health) and of its Service",
    ("operator", "agent_image"): "image of the agent containers when the AgentInstance names "
    "none (`spec.image`)",
    ("operator", "agent_image_pull_policy"): "`imagePullPolicy` of the agent containers",
    ("operator", "agent_run_as_user"): "numeric user (and group) the agent containers run as",
    ("operator", "default_cpu_request"): "agent container CPU request when "
    "`spec.resources` sets none",
    ("operator", "default_memory_request"): "agent container memory request when "
    "`spec.resources` sets none",
    ("operator", "default_cpu_limit"): "agent container CPU limit when `spec.resources` sets none",
    ("operator", "default_memory_limit"): "agent container memory limit when "
    "`spec.resources` sets none",
    ("operator", "tmp_size_limit"): "size limit of the agent pods' `/tmp` emptyDir",
    ("operator", "token_issuer"): "`iss` of the agent tokens the operator signs",
    ("operator", "token_audience"): "`aud` of the agent tokens (the platform's "
    "`HUMANWORK_AGENT_TOKEN_AUDIENCE` must equal it)",
    ("agent", "agent_id"): "the agent's id, `<namespace>/<AgentInstance name>` (set by the "
    "operator)",
    ("agent", "agent_name"): "the AgentInstance's name (set by the operator)",
    ("agent", "org_id"): "the org's id, `spec.orgId` (set by the operator)",
    ("agent", "namespace"): "the org's namespace, where its AgenticTasks live (set by the "
    "operator)",
    ("agent", "platform_url"): "base URL of the platform API (set by the operator from its "
    "`platform_api_*` settings)",
    ("agent", "callback_url"): "where signed agent events go: `<platform_url>/v1/agent-events` "
    "(set by the operator)",
    ("agent", "agent_port"): "port of the agent's HTTP server (set by the operator)",
    ("agent", "token_file"): "file of the agent's platform token (its Secret, mounted; "
    "re-read on every use, so a rotated token is picked up without a restart)",
    ("agent", "callback_secret_file"): "file of the HMAC key agent events are signed with "
    "(its Secret, mounted; re-read on every use)",
    ("agent", "config_file"): "the agent's configuration, `config.json` of its ConfigMap "
    "(mounted as a directory, so that changes reach the running pod)",
    ("agent", "kube_host"): "the Kubernetes API's host (the kubelet sets "
    "`KUBERNETES_SERVICE_HOST` in every pod)",
    ("agent", "kube_port"): "the Kubernetes API's port (the kubelet sets "
    "`KUBERNETES_SERVICE_PORT`)",
    ("agent", "llm_base_url"): "OpenAI-compatible endpoint of the LLM (`spec.llm.baseURL`)",
    ("agent", "llm_api_key"): "the LLM key, from the Secret `spec.llm.apiKeySecretRef` names: "
    "the only third-party secret an agent holds",
    ("agent", "host"): "address the agent's HTTP server binds",
    ("agent", "config_poll_seconds"): "how often the configuration file is checked for changes",
    ("agent", "llm_timeout_seconds"): "timeout of one LLM request",
    ("agent", "llm_max_retries"): "retries of a failed LLM request",
}


EXTRA_SETTINGS: dict[str, list[Setting]] = {
    # Variables read straight from the environment rather than through the settings class
    # (`environ_reads` finds them in the source; a test wants each one listed here).
    "operator": [
        Setting(
            "metrics_port",
            ("HUMANWORK_OPERATOR_METRICS_PORT",),
            "int",
            "`9090`",
            "port of the Prometheus `/metrics` endpoint; `0` turns it off (read by "
            "`agent_operator.handlers`, not by `OperatorSettings`)",
        ),
        Setting(
            "metrics_address",
            ("HUMANWORK_OPERATOR_METRICS_ADDRESS",),
            "str",
            "`0.0.0.0`",
            "address the `/metrics` endpoint binds (read by `agent_operator.handlers`)",
        ),
        Setting(
            "test_fault_point",
            ("HUMANWORK_TEST_FAULT_POINT",),
            "str",
            "unset (off)",
            "for the fault tests only, never in a deployment: the named point at which the "
            "operator kills itself (SIGKILL) the first time it gets there "
            "(`provision.before_status_write`, `rotation.before_status_write`; read once at "
            "start by `agent_operator.faultpoints`)",
        ),
    ],
    "platform": [
        Setting(
            "pg_bin",
            ("HUMANWORK_PG_BIN",),
            "str",
            "PostgreSQL's binaries on the `PATH`",
            "folder of `pg_dump` and `pg_restore` for `python -m platform_api.backup` "
            "(after `--pg-bin`; read by `platform_api.backup.database`)",
        ),
        Setting(
            "test_fault_point",
            ("HUMANWORK_TEST_FAULT_POINT",),
            "str",
            "unset (off)",
            "for the fault tests only, never in a deployment: the named point at which the "
            "process kills itself (SIGKILL) the first time it gets there "
            "(`decision.before_status_write`, `decision.after_status_write`; read once at "
            "start by `platform_api.faultpoints`)",
        ),
    ],
}

ENVIRON_READ = re.compile(r"""environ(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]*)["']""")
SOURCES = {
    "platform": "platform_api",
    "operator": "operator/agent_operator",
    "agent": "agent_image",
}


def environ_reads(component: str, repo: Path = REPO) -> set[str]:
    """The variables a component's code reads from `os.environ` directly."""
    found: set[str] = set()
    for path in sorted((repo / SOURCES[component]).rglob("*.py")):
        found.update(ENVIRON_READ.findall(path.read_text()))
    return found


def _field_docs(cls: type) -> dict[str, tuple[str, str]]:
    """{field: (annotation as written, attribute docstring)} from the class's source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, tuple[str, str]] = {}
    statements = body.body
    for index, node in enumerate(statements):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        doc = ""
        following = statements[index + 1] if index + 1 < len(statements) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            doc = inspect.cleandoc(following.value.value)
        found[node.target.id] = (ast.unparse(node.annotation), doc)
    return found


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, Path):
        return f"`{value}`"
    if isinstance(value, int | float):
        return f"`{value}`"
    return f"`{json.dumps(value)}`"


def _meaning(component: str, name: str, *candidates: str | None) -> str:
    for text in candidates:
        if text:
            return " ".join(text.split())
    return FALLBACK_MEANINGS.get((component, name), "")


def pydantic_settings(component: str, cls: Any, prefix: str) -> list[Setting]:
    """The settings of a pydantic-settings class, in declaration order."""
    from pydantic import AliasChoices
    from pydantic_core import PydanticUndefined

    docs = _field_docs(cls)
    rows: list[Setting] = []
    for name, info in cls.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            variables = tuple(str(choice) for choice in alias.choices)
        elif isinstance(alias, str):
            variables = (alias,)
        else:
            variables = (prefix + name.upper(),)
        if info.default_factory is not None:
            default = _show(info.default_factory())
        elif info.default is PydanticUndefined:
            default = "required"
        else:
            default = _show(info.default)
        annotation, doc = docs.get(name, ("", ""))
        rows.append(
            Setting(
                name,
                variables,
                annotation,
                default,
                _meaning(component, name, doc, info.description),
            )
        )
    return rows


def dataclass_settings(component: str, cls: Any, prefix: str) -> list[Setting]:
    """The settings of a dataclass read as `<prefix><FIELD>` variables."""
    docs = _field_docs(cls)
    rows: list[Setting] = []
    for field in dataclasses.fields(cls):
        annotation, doc = docs.get(field.name, ("", ""))
        rows.append(
            Setting(
                field.name,
                (prefix + field.name.upper(),),
                annotation,
                _show(field.default),
                _meaning(component, field.name, doc),
            )
        )
    return rows


def all_settings() -> dict[str, list[Setting]]:
    """{component: its settings}: the platform API, the operator, the agent."""
    from agent_image.settings import AgentSettings
    from agent_operator.config import ENV_PREFIX, OperatorSettings
    from platform_api.settings import Settings

    found = {
        "platform": pydantic_settings("platform", Settings, "HUMANWORK_"),
        "operator": dataclass_settings("operator", OperatorSettings, ENV_PREFIX),
        "agent": pydantic_settings("agent", AgentSettings, "HUMANWORK_"),
    }
    for component, extra in EXTRA_SETTINGS.items():
        found[component] = found[component] + extra
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def settings_table(rows: Iterable[Setting]) -> str:
    lines = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for row in rows:
        variables = " or ".join(f"`{v}`" for v in row.variables)
        lines.append(
            f"| {variables} | `{_cell(row.type)}` | {_cell(row.default)} | {_cell(row.meaning)} |"
        )
    return "\n".join(lines)


# --- the API ------------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    """The platform API's OpenAPI document (the app is built, not started)."""
    from platform_api.app import create_app
    from platform_api.settings import Settings

    document: dict[str, Any] = create_app(Settings.model_construct()).openapi()
    return document


AGENT_SCOPE = re.compile(r"Agent token with `([a-z_]+:[a-z_]+)`")
METHODS = ("get", "post", "put", "patch", "delete")


def credential(operation: dict[str, Any]) -> str:
    """Who may call an operation, from its `x-capability` (platform_api/openapi.py) and,
    for an agent token's scope, its description."""
    from platform_api.openapi import AGENT_SIGNATURE, AGENT_TOKEN, EXTENSION, PLATFORM_ADMIN

    opens: list[str] = operation.get(EXTENSION) or []
    schemes = {name for entry in operation.get("security") or [] for name in entry}
    roles = [c for c in opens if c not in (PLATFORM_ADMIN, AGENT_TOKEN, AGENT_SIGNATURE)]
    if AGENT_TOKEN in opens or "AgentToken" in schemes:
        scope = AGENT_SCOPE.search(operation.get("description") or "")
        return f"agent token, scope `{scope.group(1)}`" if scope else "agent token"
    if AGENT_SIGNATURE in opens:
        return "HMAC signature of the agent"
    if roles:
        return "user token, capability " + " or ".join(f"`{c}`" for c in roles)
    if PLATFORM_ADMIN in opens:
        return "user token, platform administrator"
    return "user token, any user" if "HTTPBearer" in schemes else "none"


def endpoints_table(document: dict[str, Any]) -> str:
    lines = ["| method | path | who may call | what it does |", "| --- | --- | --- | --- |"]
    for path, item in document["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            summary = operation.get("summary") or ""
            lines.append(
                f"| {method.upper()} | `{path}` | {credential(operation)} | {_cell(summary)} |"
            )
    return "\n".join(lines)


def errors_table() -> str:
    from platform_api.errors import PlatformError

    def walk(cls: type[PlatformError]) -> Iterable[type[PlatformError]]:
        for sub in cls.__subclasses__():
            yield sub
            yield from walk(sub)

    lines = ["| code | HTTP status | meaning |", "| --- | --- | --- |"]
    seen: set[str] = set()
    classes: list[type[PlatformError]] = [PlatformError, *walk(PlatformError)]
    for cls in classes:
        if cls.code in seen:
            continue
        seen.add(cls.code)
        doc = " ".join(inspect.cleandoc(cls.__doc__ or "").split())
        if cls is PlatformError:
            doc = "An unexpected failure; the answer says nothing more, the platform's log does."
        lines.append(f"| `{cls.code}` | {cls.status_code} | {_cell(doc)} |")
    return "\n".join(lines)


# --- writing and checking -------------------------------------------------------------------


def splice(text: str, name: str, content: str) -> str:
    """`text` with the generated section `name` replaced by `content`."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    if begin not in text or end not in text:
        raise ValueError(f"no generated section {name!r} (markers {begin} ... {end})")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{content.strip()}\n{end}{tail}"


def rendered(repo: Path = REPO) -> dict[Path, str]:
    """{path: its content as generated} for every generated file (in the markdown files,
    the generated sections are replaced and the rest kept as it is)."""
    document = openapi()
    files = {
        OPENAPI: json.dumps(document, indent=2, ensure_ascii=False) + "\n",
        **locks.rendered(),
    }
    configuration = (repo / CONFIGURATION).read_text()
    for component, rows in all_settings().items():
        configuration = splice(configuration, f"settings-{component}", settings_table(rows))
    files[CONFIGURATION] = configuration
    api = (repo / API).read_text()
    api = splice(api, "endpoints", endpoints_table(document))
    api = splice(api, "errors", errors_table())
    files[API] = api
    return files


def stale(repo: Path = REPO, only: Callable[[Path], bool] = lambda _: True) -> list[Path]:
    out = []
    for path, text in rendered(repo).items():
        if not only(path):
            continue
        current = repo / path
        if not current.exists() or current.read_text() != text:
            out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    return generated.write_or_check(
        "python -m humanwork_dev.deployables", __doc__, rendered, REPO, argv
    )


if __name__ == "__main__":
    sys.exit(main())
