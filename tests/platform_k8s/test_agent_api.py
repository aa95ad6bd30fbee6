"""The agent-facing API accepts an agent's current token and refuses, from the attacker's
side, every token that should not work: forged, expired, foreign-audience, tampered,
rotated out after its grace, and the token of a deleted agent (at once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from kubernetes import client as kclient

from agent_operator.builders import read_signing_keys_secret
from humanwork_core import tokens
from tests.agents import agent_token, wait_rotated
from tests.conftest import Cluster
from tests.support import eventually

WHOAMI = "/v1/agent-api/whoami"


async def call(http: httpx.AsyncClient, token: str) -> httpx.Response:
    return await http.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})


async def test_the_current_token_is_accepted_and_forgeries_are_refused(
    client: httpx.AsyncClient,
    cluster: Cluster,
    ready_agent: tuple[str, str],
) -> None:
    ns, org_id = ready_agent
    token = agent_token(cluster, ns)
    accepted = await call(client, token)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["agentId"] == f"{ns}/agent" and accepted.json()["orgId"] == org_id

    claims = tokens.read_minted_token(token).claims
    now = datetime.now(UTC)
    forger = tokens.generate_signing_key()
    forged = tokens.mint_agent_token(
        forger, agent_id=claims.subject, org_id=org_id, namespace=ns, ttl_seconds=600, now=now
    ).token
    header, _payload, signature = token.split(".")
    tampered_payload = forged.split(".")[1]
    cases = {
        "forged key": (forged, "token_unknown_key"),
        "tampered payload": (f"{header}.{tampered_payload}.{signature}", "token_invalid_signature"),
        "garbage": ("not-a-token", "token_malformed"),
    }
    for label, (bad, reason) in cases.items():
        refused = await call(client, bad)
        assert refused.status_code == 401, label
        body = refused.json()
        assert body["code"] == "unauthenticated", label
        assert body["details"]["reason"] == reason, (label, body)
        assert bad not in refused.text  # nothing echoes the token back

    missing = await client.get(WHOAMI)
    assert missing.status_code == 401 and missing.json()["details"]["reason"] == "token_missing"


async def test_a_deleted_agents_token_is_refused_at_once(
    client: httpx.AsyncClient,
    cluster: Cluster,
    ready_agent: tuple[str, str],
) -> None:
    ns, _ = ready_agent
    token = agent_token(cluster, ns)
    assert (await call(client, token)).status_code == 200
    kclient.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
    )
    started = datetime.now(UTC)
    refused = await call(client, token)
    assert refused.status_code == 401
    assert refused.json()["details"]["reason"] == "token_revoked"
    assert datetime.now(UTC) - started < timedelta(seconds=1)


async def test_refresh_rotates_and_the_old_token_lives_only_through_its_grace(
    client: httpx.AsyncClient,
    cluster: Cluster,
    ready_agent: tuple[str, str],
) -> None:
    ns, _ = ready_agent
    old = agent_token(cluster, ns)
    old_jti = tokens.read_minted_token(old).claims.jti
    asked = await client.post(
        "/v1/agent-api/token/refresh", headers={"Authorization": f"Bearer {old}"}
    )
    assert asked.status_code == 202, asked.text
    rotated = wait_rotated(cluster, ns, old_jti, timeout=20)
    assert rotated["previousJti"] == old_jti
    new = eventually(lambda: (t := agent_token(cluster, ns)) != old and t, timeout=10)
    assert (await call(client, new)).status_code == 200
    assert (await call(client, old)).status_code == 200  # still within its grace

    # the grace ends: the operator records an earlier end (as after a compromise)
    # and the old token is refused while the new one still works
    instance = kclient.CustomObjectsApi(cluster.api)
    status = instance.get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
    )["status"]
    status["token"]["previousGraceEndsAt"] = (datetime.now(UTC) - timedelta(seconds=1)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    instance.patch_namespaced_custom_object_status(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent", {"status": status}
    )
    refused = await call(client, old)
    assert refused.status_code == 401 and refused.json()["details"]["reason"] == "token_revoked"
    assert (await call(client, new)).status_code == 200


async def test_another_audience_is_refused(
    client: httpx.AsyncClient,
    cluster: Cluster,
    ready_agent: tuple[str, str],
) -> None:
    # a token signed with the operator's real key but for another audience: read the
    # operator's key from its Secret (as only a cluster admin could) and mint one
    ns, org_id = ready_agent
    keys = kclient.CoreV1Api(cluster.api).read_namespaced_secret(
        "humanwork-agent-signing-keys", "humanwork-system"
    )
    key = read_signing_keys_secret(keys.data)[-1][0]
    other = tokens.mint_agent_token(
        key,
        agent_id=f"{ns}/agent",
        org_id=org_id,
        namespace=ns,
        ttl_seconds=600,
        now=datetime.now(UTC),
        audience="some-other-service",
    ).token
    refused = await call(client, other)
    assert refused.status_code == 401
    assert refused.json()["details"]["reason"] == "token_wrong_audience"
