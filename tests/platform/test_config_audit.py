"""Configuration changes are audit rows with the values before and after (issue 14,
item 5; seed 002 section 4.4): a tool's permission and configuration, an integration's
credentials (by key id and field names, never a value), the org's approval policy."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.platform.conftest import TwoOrgs


async def _rows(client: httpx.AsyncClient, two_orgs: TwoOrgs, action: str) -> list[Any]:
    r = await client.get(
        "/audit", params={"action": action, "limit": 500}, headers=two_orgs.admin_a.headers
    )
    assert r.status_code == 200, r.text
    rows = [i for i in r.json()["items"] if i["org_id"] == str(two_orgs.org_a)]
    return list(reversed(rows))  # oldest first


async def test_tool_configuration_changes_keep_before_and_after(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    url = f"/orgs/{org}/tool-permissions/shopify"
    for body in ({"enabled": True, "config": {"ratePerHour": 100}}, {"enabled": False}):
        assert (await client.put(url, json=body, headers=h)).status_code == 200
    first, second = await _rows(client, two_orgs, "tool_permission.updated")
    assert first["details"]["before"] is None
    assert first["details"]["after"] == {"enabled": True, "config": {"ratePerHour": 100}}
    assert second["details"]["before"] == {"enabled": True, "config": {"ratePerHour": 100}}
    assert second["details"]["after"] == {"enabled": False, "config": {}}


async def test_credential_changes_keep_key_ids_never_values(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    url = f"/orgs/{org}/integrations/amazon"
    for value in ("first-secret-value", "second-secret-value"):
        body = {"credentials": {"key": value}}
        assert (await client.put(url, json=body, headers=h)).status_code == 200
    assert (await client.delete(url, headers=h)).status_code == 204
    created, replaced = await _rows(client, two_orgs, "integration.updated")
    (deleted,) = await _rows(client, two_orgs, "integration.deleted")
    assert created["details"]["before"] is None
    assert created["details"]["after"]["fields"] == ["key"]
    key_id = created["details"]["after"]["key_id"]
    assert replaced["details"]["before"] == {"key_id": key_id}
    assert deleted["details"] == {"before": {"key_id": key_id}, "after": None}
    assert "secret-value" not in json.dumps([created, replaced, deleted])


async def test_policy_changes_keep_before_and_after(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    h, org = two_orgs.admin_a.headers, two_orgs.org_a
    r = await client.put(f"/orgs/{org}/policy", json={"autoApproveLow": True}, headers=h)
    assert r.status_code == 200, r.text
    (row,) = await _rows(client, two_orgs, "org.policy.updated")
    assert row["details"]["before"]["autoApproveLow"] is False
    assert row["details"]["after"]["autoApproveLow"] is True
