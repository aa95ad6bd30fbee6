"""`POST /orgs` with `id` (issue 15, item 6): the org takes the id a GitOps-created
namespace's `humanwork.io/org-id` label carries, so the namespace is adopted as it is
(tests/e2e/test_samples.py adopts the shipped sample's namespace on the real control
plane, and is refused one labelled for another org); an id already taken is a conflict."""

from __future__ import annotations

import uuid

import httpx

from tests.platform.conftest import Api, RecordingNamespaces


async def test_an_org_created_with_an_id_keeps_it_and_an_id_is_taken_once(
    client: httpx.AsyncClient, api: Api, namespaces: RecordingNamespaces
) -> None:
    admin = await api.admin()
    chosen = str(uuid.uuid4())
    r = await client.post(
        "/orgs", json={"slug": "acme", "name": "Acme", "id": chosen}, headers=admin.headers
    )
    assert r.status_code == 201, r.text
    assert (r.json()["id"], r.json()["namespace"]) == (chosen, "org-acme")
    assert namespaces.calls == [("org-acme", uuid.UUID(chosen))]
    r = await client.post(
        "/orgs", json={"slug": "other", "name": "Other", "id": chosen}, headers=admin.headers
    )
    assert r.status_code == 409 and r.json()["code"] == "conflict", r.text
    assert r.json()["details"] == {"id": chosen}
    assert len(namespaces.calls) == 1
    r = await client.post(
        "/orgs", json={"slug": "bad", "name": "Bad", "id": "not-a-uuid"}, headers=admin.headers
    )
    assert r.status_code == 422 and r.json()["code"] == "validation_failed"
