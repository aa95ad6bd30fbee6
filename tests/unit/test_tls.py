"""TLS between the agent and the platform, on real sockets (no cluster needed).

The platform side: `humanwork-platform serve`'s uvicorn configuration
(platform_api.tls.ReloadingConfig) serves HTTPS only; a plain-HTTP request to its port gets
no HTTP answer and never reaches the app; a renewed certificate written over the files is
served to new connections without a restart. The agent side: the agent's platform client
(agent_image.tls, what build_runtime uses) refuses a platform whose certificate its mounted
CA did not sign, accepts the right one, and follows a rotated CA file without a restart.
The operator side: the agent pod gets the CA by volume and an https URL, and the CA's
content is not in the pod template (a rotation restarts nothing). The platform's settings
read secrets from files (HUMANWORK_SECRETS_DIR) laid out as the kubelet mounts them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from agent_image.tls import ReloadingCATransport, platform_client
from agent_operator import builders
from agent_operator.config import OperatorSettings
from humanwork_core.tokens import generate_signing_key, mint_agent_token
from humanwork_dev import pki
from platform_api.settings import Settings
from platform_api.tls import ReloadingConfig
from tests.unit.test_builders import NOW, ORG, instance


@dataclass
class Served:
    """A uvicorn server of ReloadingConfig on a free loopback port, and its app's count of
    requests that reached it."""

    port: int
    cert: Path
    key: Path
    config: ReloadingConfig
    reached: list[str]

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}/healthz"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _issue(authority: pki.Authority, stem: str) -> pki.Pair:
    return authority.issue(stem, "platform", server_names=("localhost",), server_ips=("127.0.0.1",))


def _install(pair: pki.Pair, cert: Path, key: Path) -> None:
    """Replace the served files the way the kubelet does: new files, then a rename."""
    for source, target in ((pair.cert, cert), (pair.key, key)):
        tmp = target.with_suffix(".new")
        shutil.copyfile(source, tmp)
        tmp.replace(target)


@pytest.fixture
def authorities(tmp_path: Path) -> tuple[pki.Authority, pki.Authority]:
    return pki.Authority(tmp_path / "ca-a"), pki.Authority(tmp_path / "ca-b", name="other-ca")


@pytest.fixture
def served(tmp_path: Path, authorities: tuple[pki.Authority, pki.Authority]) -> Iterator[Served]:
    reached: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _install(_issue(authorities[0], "first"), cert, key)
    port = _free_port()
    config = ReloadingConfig(
        app, host="127.0.0.1", port=port, ssl_certfile=str(cert), ssl_keyfile=str(key),
        log_level="warning", lifespan="off",
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield Served(port, cert, key, config, reached)
    server.should_exit = True
    thread.join(timeout=30)


def _trusting(authority: pki.Authority) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(authority.ca.cert))


def test_the_platform_serves_https_only(
    served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    # the attacker's side: plain HTTP to the TLS port gets no HTTP answer, reaches no route
    with pytest.raises(httpx.HTTPError) as refused:
        httpx.get(f"http://127.0.0.1:{served.port}/healthz", timeout=10)
    assert isinstance(refused.value, httpx.RemoteProtocolError | httpx.ReadError), refused.value
    assert served.reached == []
    # positive control: HTTPS, verified against the CA that signed the certificate
    r = httpx.get(served.url, verify=_trusting(authorities[0]), timeout=10)
    assert r.status_code == 200 and served.reached == ["/healthz"]
    assert served.config.served is not None and served.config.served.loads == 1


def test_a_renewed_certificate_is_served_without_a_restart(
    served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    first, second = authorities
    assert httpx.get(served.url, verify=_trusting(first), timeout=10).status_code == 200
    # the certificate is renewed by another CA: new connections get it, same process
    _install(_issue(second, "second"), served.cert, served.key)

    def serves_second() -> bool:
        try:
            return httpx.get(served.url, verify=_trusting(second), timeout=10).status_code == 200
        except httpx.ConnectError:
            return False

    deadline = time.monotonic() + 30
    while not serves_second():
        assert time.monotonic() < deadline, "the renewed certificate was not served"
        time.sleep(0.2)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(served.url, verify=_trusting(first), timeout=10)
    assert served.config.served is not None and served.config.served.loads == 2


def test_a_half_written_pair_keeps_the_previous_certificate(
    served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    other = _issue(authorities[1], "other")
    shutil.copyfile(other.cert, served.cert)  # a new certificate, its key not yet written
    assert served.config.served is not None
    assert served.config.served.refresh() is False  # not loaded: it does not match the key
    r = httpx.get(served.url, verify=_trusting(authorities[0]), timeout=10)
    assert r.status_code == 200


async def _status(client: httpx.AsyncClient, url: str) -> int | str:
    try:
        return (await client.get(url, timeout=10)).status_code
    except httpx.ConnectError as exc:
        return str(exc)


async def test_the_agent_refuses_a_platform_its_ca_did_not_sign(
    tmp_path: Path, served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    ca_file = tmp_path / "platform-ca.crt"
    shutil.copyfile(authorities[1].ca.cert, ca_file)  # the wrong CA
    async with platform_client(ca_file) as client:
        outcome = await _status(client, served.url)
        assert "CERTIFICATE_VERIFY_FAILED" in str(outcome)
        assert served.reached == []
    # positive control: the CA that signed the platform's certificate
    shutil.copyfile(authorities[0].ca.cert, ca_file)
    async with platform_client(ca_file) as client:
        assert await _status(client, served.url) == 200
    assert served.reached == ["/healthz"]


async def test_the_agent_follows_a_rotated_ca_without_a_restart(
    tmp_path: Path, served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    first, second = authorities
    folder = tmp_path / "volume"
    ca_file = _kubelet_file(folder, "ca.crt", first.ca.cert.read_text(), "v1")
    async with platform_client(ca_file) as client:
        transport = client._transport  # what build_runtime's client holds
        assert isinstance(transport, ReloadingCATransport)
        assert await _status(client, served.url) == 200
        # the CA ConfigMap now holds only the new CA: the old certificate is refused at once
        _kubelet_file(folder, "ca.crt", second.ca.cert.read_text(), "v2")
        outcome = await _status(client, served.url)
        assert "CERTIFICATE_VERIFY_FAILED" in str(outcome), outcome
        # the platform's certificate is renewed by the new CA: the same client accepts it
        _install(_issue(second, "second"), served.cert, served.key)
        deadline = time.monotonic() + 30
        while await _status(client, served.url) != 200:
            assert time.monotonic() < deadline, "the agent did not accept the new certificate"
            await asyncio.sleep(0.2)
        assert client._transport is transport and transport.loads == 2


async def test_an_unreadable_ca_file_keeps_the_last_good_one(
    tmp_path: Path, served: Served, authorities: tuple[pki.Authority, pki.Authority]
) -> None:
    ca_file = tmp_path / "ca.crt"
    async with platform_client(ca_file) as client:
        # no CA at all yet: a connection error (retried by the platform client), no request
        assert "no platform CA" in str(await _status(client, served.url))
        shutil.copyfile(authorities[0].ca.cert, ca_file)
        assert await _status(client, served.url) == 200
        ca_file.write_text("not a certificate")
        assert await _status(client, served.url) == 200  # the last good bundle stays
    assert served.reached == ["/healthz", "/healthz"]


def _kubelet_file(folder: Path, name: str, text: str, version: str, **more: str) -> Path:
    """A ConfigMap or Secret volume as the kubelet writes it: `..<version>/<file>`, `..data`
    pointing at it, each file pointing through `..data`; a new version swaps `..data`
    atomically. `more`: further files of the same version."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"..{version}"
    data.mkdir()
    for each, content in {name: text, **more}.items():
        (data / each).write_text(content)
        link = folder / each
        if not link.is_symlink():
            link.symlink_to(f"..data/{each}")
    tmp = folder / "..data_tmp"
    tmp.symlink_to(data.name)
    tmp.replace(folder / "..data")
    return folder / name


# --- the operator gives the agent the CA by volume ------------------------------------------


def test_the_agent_pod_gets_the_platform_ca_by_volume_and_an_https_url() -> None:
    settings = OperatorSettings(platform_api_scheme="https", platform_ca_file="/etc/ca.crt")
    agent = instance()
    pod = builders.deployment(agent, settings)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["HUMANWORK_PLATFORM_URL"].startswith("https://humanwork-platform-api.")
    assert env["HUMANWORK_CALLBACK_URL"].startswith("https://")
    path = Path(env["HUMANWORK_PLATFORM_CA_FILE"])
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(path.parent))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert mount["readOnly"] is True
    assert volume["configMap"]["name"] == "acme-ecommerce-platform-ca"
    # without the setting: no CA, no volume (local processes)
    plain = builders.deployment(agent, OperatorSettings())["spec"]["template"]["spec"]
    assert "HUMANWORK_PLATFORM_CA_FILE" not in str(plain)
    assert {v["name"] for v in plain["volumes"]} == {v["name"] for v in pod["volumes"]} - {
        mount["name"]
    }


def test_the_ca_configmap_follows_the_bundle_and_the_pod_template_does_not() -> None:
    key, agent_id = generate_signing_key(), "org-acme/acme-ecommerce"
    token = mint_agent_token(
        key, agent_id=agent_id, org_id=ORG, namespace="org-acme", ttl_seconds=86_400, now=NOW
    )
    settings = OperatorSettings(platform_api_scheme="https", platform_ca_file="/etc/ca.crt")
    agent = instance()

    def made(bundle: str | None) -> dict[str, dict[str, Any]]:
        kids = builders.children(agent, settings, token, "c0ffee" * 10, (), platform_ca=bundle)
        return {f"{k['kind']}/{k['metadata']['name']}": k for k in kids}

    one, two = made("-----BEGIN CERTIFICATE-----\nA\n"), made("-----BEGIN CERTIFICATE-----\nB\n")
    name = "ConfigMap/acme-ecommerce-platform-ca"
    assert one[name]["data"]["ca.crt"].endswith("A\n") and two[name]["data"]["ca.crt"].endswith(
        "B\n"
    )
    assert one[name]["metadata"]["ownerReferences"][0]["kind"] == "AgentInstance"
    # a rotated CA changes the ConfigMap only: the agents' pods are not rolled
    (deployment,) = [key for key in one if key.startswith("Deployment/")]
    assert one[deployment] == two[deployment]
    assert name not in made(None)


# --- the platform's secrets as files -----------------------------------------------------------


def test_the_platform_reads_its_secrets_from_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "secrets"
    secret = "s3cret-jwt-key-from-a-mounted-file-0123456789"
    _kubelet_file(
        folder, "HUMANWORK_JWT_SECRET", secret + "\n", "v1",
        HUMANWORK_DATABASE_URL="postgresql+asyncpg://app:pw@db/x",
        HUMANWORK_CREDENTIALS_KEYS='{"k1": "' + "A" * 44 + '"}',
    )  # fmt: skip
    for name in ("HUMANWORK_JWT_SECRET", "HUMANWORK_DATABASE_URL", "HUMANWORK_SECRETS_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().jwt_secret is None  # positive control: no folder, no secret
    monkeypatch.setenv("HUMANWORK_SECRETS_DIR", str(folder))
    settings = Settings()
    assert settings.jwt_secret is not None and settings.jwt_secret.get_secret_value() == secret
    assert settings.database_url == "postgresql+asyncpg://app:pw@db/x"
    assert settings.credentials_keys["k1"].get_secret_value() == "A" * 44
    assert secret not in repr(settings)
    # an environment variable of the same name wins over its file
    monkeypatch.setenv("HUMANWORK_DATABASE_URL", "sqlite+aiosqlite:///x.db")
    assert Settings().database_url == "sqlite+aiosqlite:///x.db"
    assert os.environ.get("HUMANWORK_JWT_SECRET") is None


def test_a_certificate_without_its_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="HUMANWORK_TLS_KEY_FILE"):
        Settings(tls_cert_file=tmp_path / "tls.crt")


def test_the_operator_reapplies_every_agents_ca_when_its_file_changes(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from agent_operator import handlers
    from agent_operator.kube import KubeError
    from agent_operator.reconcile import read_platform_ca

    folder = tmp_path / "platform-ca"
    ca = _kubelet_file(folder, "ca.crt", "-----BEGIN CERTIFICATE-----\nold\n", "v1")
    settings = OperatorSettings(platform_ca_file=str(ca))
    state = handlers.State(None, settings, None)  # type: ignore[arg-type]
    later = datetime.now(UTC) + timedelta(seconds=300)
    state.due = {("org-a", "agent"): (later, "resync"), ("org-b", "agent"): (later, "resync")}
    now = datetime.now(UTC)
    handlers._platform_ca_changed(state, now)  # unchanged: nothing moves
    assert set(state.due.values()) == {(later, "resync")}
    _kubelet_file(folder, "ca.crt", "-----BEGIN CERTIFICATE-----\nnew\n", "v2")
    handlers._platform_ca_changed(state, now)
    assert set(state.due.values()) == {(now, "platform-ca")}
    assert read_platform_ca(settings) == "-----BEGIN CERTIFICATE-----\nnew\n"
    # a CA file that is not there (or holds no certificate) fails the reconcile, never
    # hands the agents an empty bundle
    with pytest.raises(KubeError, match="PlatformCAUnreadable"):
        read_platform_ca(OperatorSettings(platform_ca_file=str(tmp_path / "missing")))
    assert read_platform_ca(OperatorSettings()) is None
