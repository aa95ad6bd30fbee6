"""Issue 18: every list's offset and limit is bounded, declared in the OpenAPI document
and enforced; out of range is 422 with the stable error body, never a 500.

The three server errors the issue found (`/human-tasks`, `/audit` and
`/orgs/{id}/knowledge` with a huge offset) are the first cases; every paginated list is
checked the same way, on the real control plane and PostgreSQL. The checks that only
read share one platform (`shared`); those that write have their own."""

from __future__ import annotations

import httpx
import pytest

from tests.platform_k8s.conftest import Orgs, Shared, TaskApi

HUGE_INT64 = 9223372036854775807
HUGER = 332979816161984446464

LISTS = ["/human-tasks", "/agentic/tasks", "/audit", "/orgs/{org}/knowledge"]


def _paths(orgs: Orgs) -> list[str]:
    return [p.format(org=orgs.org_a) for p in LISTS]


def _refusal(r: httpx.Response) -> tuple[int, str, list[list[str]]]:
    """(status, code, the locations of the errors) of an answer."""
    body = r.json()
    errors = body.get("details", {}).get("errors", [])
    return r.status_code, body.get("code", ""), [e["loc"] for e in errors]


@pytest.mark.parametrize("offset", [HUGE_INT64, HUGER, 1_000_001, -1])
async def test_an_offset_out_of_range_is_a_422_never_a_500(
    reader: httpx.AsyncClient, shared: Shared, offset: int
) -> None:
    orgs = shared.orgs
    answers = {
        path: _refusal(
            await reader.get(
                path, params={"offset": offset, "limit": 5}, headers=orgs.admin_a.headers
            )
        )
        for path in _paths(orgs)
    }
    assert answers == dict.fromkeys(_paths(orgs), (422, "validation_failed", [["query", "offset"]]))


@pytest.mark.parametrize("limit", [0, 501, HUGE_INT64, HUGER])
async def test_a_limit_out_of_range_is_a_422(
    reader: httpx.AsyncClient, shared: Shared, limit: int
) -> None:
    orgs = shared.orgs
    answers = {
        path: _refusal(
            await reader.get(path, params={"limit": limit}, headers=orgs.admin_a.headers)
        )
        for path in _paths(orgs)
    }
    assert answers == dict.fromkeys(_paths(orgs), (422, "validation_failed", [["query", "limit"]]))


async def test_the_largest_offset_answers_an_empty_page(
    reader: httpx.AsyncClient, shared: Shared
) -> None:
    orgs = shared.orgs
    for path in _paths(orgs):
        r = await reader.get(
            path,
            params={"offset": 1_000_000, "limit": 500 if "knowledge" not in path else 200},
            headers=orgs.admin_a.headers,
        )
        assert r.status_code == 200, (path, r.text)
        assert r.json()["items"] == [], path


async def test_the_bounds_are_in_the_openapi_document(reader: httpx.AsyncClient) -> None:
    document = (await reader.get("/openapi.json")).json()
    for path in LISTS:
        parameters = {
            p["name"]: p["schema"]
            for p in document["paths"][path.replace("{org}", "{org_id}")]["get"]["parameters"]
        }
        assert parameters["offset"]["minimum"] == 0, path
        assert parameters["offset"]["maximum"] == 1_000_000, path
        assert parameters["limit"]["minimum"] == 1, path
        assert parameters["limit"]["maximum"] == (200 if "knowledge" in path else 500), path


async def test_a_refusal_of_a_long_path_is_audited_not_a_500(
    client: httpx.AsyncClient, orgs: Orgs
) -> None:
    """Found by the fuzzer on PostgreSQL: an expert's refused request on a path longer
    than the audit log's `target` column (300) was a 500 (the refusal's audit row did not
    fit); SQLite never noticed. The target is cut to fit, the refusal is a 403."""
    name = "0" * 253
    for path in (
        f"/orgs/{orgs.org_a}/agents/{name}/token/revoke",
        f"/orgs/{orgs.org_a}/agents/{name}/tasks",
    ):
        # a viewer: experts hold run.control since every decision needs it (issue 15)
        r = await client.post(path, json={"request": "r"}, headers=orgs.viewer.headers)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), r.text
    audit = await client.get(
        "/audit", params={"action": "access.denied"}, headers=orgs.admin_a.headers
    )
    targets = [e["target"] for e in audit.json()["items"]]
    assert len(targets) == 2 and all(len(t) == 300 and t.endswith("…") for t in targets), targets
    assert targets[0].startswith(f"POST /orgs/{orgs.org_a}/agents/000"), targets


@pytest.mark.parametrize("feedback", ["Not in October 🙂", "F\U000f054eP©", "漢字 \u202e"])
async def test_any_unicode_in_a_decision_is_written_as_is_not_a_502(
    client: httpx.AsyncClient, orgs: Orgs, tasks: TaskApi, feedback: str
) -> None:
    """Found by the fuzzer: a character outside the Basic Multilingual Plane (an emoji) in
    a rejection's feedback was a 502: the decision is written with server-side apply,
    whose body the API server reads as YAML, and the client's JSON escaped the character
    as a surrogate pair that YAML refuses. The body now travels as UTF-8."""
    task = await tasks.create(orgs.requester, orgs.org_a)
    r = await tasks.decide(orgs.expert, task["id"], "read", "reject", {"feedback": feedback})
    assert r.status_code == 200, r.text
    stored = await tasks.until(orgs.expert, task["id"], lambda t: t["phase"] == "Rejected")
    decisions = [s.get("decision") for s in stored["status"]["steps"] if s["id"] == "read"]
    assert decisions[0]["feedback"] == feedback
