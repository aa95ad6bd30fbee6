"""The credentials of the lean Kubernetes client (the operator's and the platform's), read
without a client library (`humanwork_core.kube_credentials`): a kubeconfig's current
context (token, CA, client certificate), in-cluster ServiceAccount credentials, and a
clear error for a kubeconfig it cannot use or a pod it is not in."""

from __future__ import annotations

import base64
import datetime
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from humanwork_core import kube_credentials as credentials


def _certificate() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _kubeconfig(path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "other", "cluster": {"server": "https://wrong"}},
            {"name": "c", "cluster": cluster},
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "other", "context": {"cluster": "other", "user": "u"}},
            {"name": "ctx", "context": {"cluster": "c", "user": "u"}},
        ],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_current_context_gives_the_server_the_ca_and_the_token(tmp_path: Path) -> None:
    cert, _ = _certificate()
    config = _kubeconfig(
        tmp_path / "config",
        {
            "server": "https://api.example:6443/",
            "certificate-authority-data": base64.b64encode(cert).decode(),
        },
        {"token": "t0ken"},
    )
    creds = credentials.load(str(config), environ={})
    assert creds.server == "https://api.example:6443/"
    assert creds.authorization() == "Bearer t0ken"
    assert isinstance(creds.ssl_context, ssl.SSLContext)
    assert creds.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert len(creds.ssl_context.get_ca_certs()) == 1


def test_a_client_certificate_from_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    cert, key = _certificate()
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "client.crt").write_bytes(cert)
    (tmp_path / "client.key").write_bytes(key)
    config = _kubeconfig(
        tmp_path / "config",
        {"server": "https://api.example", "certificate-authority": "ca.crt"},
        {"client-certificate": "client.crt", "client-key": "client.key"},
    )
    creds = credentials.load(environ={"KUBECONFIG": str(config)})
    assert creds.authorization() is None
    assert isinstance(creds.ssl_context, ssl.SSLContext)
    assert len(creds.ssl_context.get_ca_certs()) == 1


def test_verification_is_skipped_only_when_the_kubeconfig_says_so(tmp_path: Path) -> None:
    config = _kubeconfig(
        tmp_path / "config",
        {"server": "https://api.example", "insecure-skip-tls-verify": True},
        {"token": "t"},
    )
    assert credentials.load(str(config), environ={}).ssl_context is False


@pytest.mark.parametrize(
    ("cluster", "message"),
    [({}, "names no server"), (None, "no cluster named")],
)
def test_an_unusable_kubeconfig_is_a_clear_error(
    tmp_path: Path, cluster: dict[str, Any] | None, message: str
) -> None:
    config = _kubeconfig(tmp_path / "config", cluster or {}, {"token": "t"})
    if cluster is None:
        text = config.read_text().replace("name: c\n", "name: gone\n")
        config.write_text(text)
    with pytest.raises(credentials.CredentialsError, match=message):
        credentials.load(str(config), environ={})
    with pytest.raises(credentials.CredentialsError, match="no kubeconfig"):
        credentials.load(str(tmp_path / "missing"), environ={})


def test_in_cluster_the_token_file_is_read_again_as_it_rotates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, _ = _certificate()
    (tmp_path / "ca.crt").write_bytes(cert)
    (tmp_path / "token").write_text("first\n")
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    creds = credentials.load(environ=env)
    assert creds.server == "https://10.0.0.1:443"
    assert creds.authorization() == "Bearer first"
    (tmp_path / "token").write_text("second\n")
    assert creds.authorization() == "Bearer first"  # read again once a minute, not per call
    monkeypatch.setattr(credentials, "TOKEN_REREAD_SECONDS", 0.0)
    assert creds.authorization() == "Bearer second"


def test_in_cluster_outside_a_pod_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", tmp_path)  # no token there
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(credentials.CredentialsError, match="not in a pod"):
        credentials.in_cluster(env)
    (tmp_path / "token").write_text("t\n")
    (tmp_path / "ca.crt").write_bytes(_certificate()[0])
    assert credentials.in_cluster(env).authorization() == "Bearer t"  # the control
