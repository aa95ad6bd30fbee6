"""Certificates and keys for the local control plane, made with `cryptography`.

One CA signs the API server's serving certificate and one client certificate per
component (admin in `system:masters`, the controller manager, the scheduler, kwok).
A separate key pair signs and verifies service-account tokens.

The platform API's serving certificate comes from a CA of its own (kept in
`.cluster/platform-pki`, reused by every `make up` and test run of that cluster):
:func:`platform_tls` issues it for the platform's Service names and puts it, with the CA,
into the Secret `humanwork-platform-tls` and the ConfigMap `humanwork-platform-ca` the
manifests mount. `python -m humanwork_dev.pki platform-tls DIR` prints them (a kubectl
List) for a development cluster of your own:
    python -m humanwork_dev.pki platform-tls .cluster/platform-pki | kubectl apply -f -
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class Pair:
    """Paths of a certificate and its private key."""

    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


class Authority:
    """A throwaway certificate authority that writes PEM files into one folder."""

    def __init__(
        self, folder: Path, *, reuse: bool = False, name: str = "humanwork-local-ca"
    ) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.ca = Pair(folder / "ca.crt", folder / "ca.key")
        if reuse and self.ca.cert.exists() and self.ca.key.exists():
            self._cert = x509.load_pem_x509_certificate(self.ca.cert.read_bytes())
            loaded = serialization.load_pem_private_key(self.ca.key.read_bytes(), None)
            if not isinstance(loaded, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{self.ca.key} is not an EC key")
            self._key = loaded
            return
        self._key = _key()
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        _write_key(self._key, self.ca.key)

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        org: str | None = None,
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
    ) -> Pair:
        """Issue a leaf certificate; with names or IPs it is a serving certificate."""
        key = _key()
        now = dt.datetime.now(dt.UTC)
        serving = bool(server_names or server_ips)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, org))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        ExtendedKeyUsageOID.SERVER_AUTH
                        if serving
                        else ExtendedKeyUsageOID.CLIENT_AUTH
                    ]
                ),
                critical=False,
            )
        )
        if serving:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = Pair(self.folder / f"{stem}.crt", self.folder / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair


def service_account_keys(folder: Path) -> Pair:
    """The key pair kube-apiserver signs service-account tokens with (public in `.crt`)."""
    key = _key()
    pair = Pair(folder / "sa.pub", folder / "sa.key")
    _write_key(key, pair.key)
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pair


# --- the platform API's serving certificate ---------------------------------------------

PLATFORM_SERVICE = "humanwork-platform-api"
PLATFORM_NAMESPACE = "humanwork-system"
TLS_SECRET = "humanwork-platform-tls"
CA_CONFIG_MAP = "humanwork-platform-ca"


def platform_names(
    service: str = PLATFORM_SERVICE, namespace: str = PLATFORM_NAMESPACE
) -> tuple[str, ...]:
    """The DNS names the platform's certificate carries (agents use `<svc>.<ns>.svc`)."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
    )


def platform_authority(folder: Path) -> Authority:
    """The platform's own CA in `folder`, made once and then reused."""
    return Authority(folder, reuse=True, name="humanwork-platform-local-ca")


def platform_tls(authority: Authority, ips: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A serving certificate for the platform's names, 127.0.0.1 and `ips` (e.g. its
    Service's cluster address), as the Secret and the CA ConfigMap the manifests mount."""
    pair = authority.issue(
        "platform", "humanwork-platform-api", server_names=platform_names(),
        server_ips=("127.0.0.1", *ips),
    )  # fmt: skip
    labels = {"app.kubernetes.io/part-of": "humanwork", "humanwork.io/dev-only": "true"}
    meta = {"namespace": PLATFORM_NAMESPACE, "labels": labels}
    ca = authority.ca.cert.read_text()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return [
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
         "metadata": {"name": TLS_SECRET, **meta},
         "data": {"tls.crt": b64(pair.cert.read_bytes()), "tls.key": b64(pair.key.read_bytes()),
                  "ca.crt": b64(ca.encode())}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CA_CONFIG_MAP, **meta},
         "data": {"ca.crt": ca}},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m humanwork_dev.pki")
    sub = parser.add_subparsers(dest="command", required=True)
    tls = sub.add_parser("platform-tls", help="print the platform's TLS Secret and CA ConfigMap")
    tls.add_argument("folder", type=Path, help="where the platform's CA is kept (made once)")
    tls.add_argument("--ip", action="append", default=[], help="a further address to serve")
    args = parser.parse_args(argv)
    items = platform_tls(platform_authority(args.folder), tuple(args.ip))
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
