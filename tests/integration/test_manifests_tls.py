"""The manifests' half of encryption in transit and of the pods' own isolation: the
platform serves HTTPS from the Secret humanwork-platform-tls (probes too) and the operator
hands the agents an https URL and the CA of humanwork-platform-ca; the cert-manager
Component asks for exactly that Secret with the names the agents use, and is kept out of
the production overlay (which must apply where cert-manager's CRDs are not installed); the
operator and the platform have NetworkPolicies of their own; the production overlay pins
every image by digest, the agents' image too.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent_operator.config import OperatorSettings
from tests.conftest import Cluster
from tests.integration.test_manifests import (
    INSTALLABLE,
    OPERATOR,
    PLATFORM,
    Doc,
    build,
    container,
    one,
)

DIGEST = re.compile(r"^[^@:]+(:[^@]+)?@sha256:[0-9a-f]{64}$")
CERT_MANAGER = "manifests/overlays/production-cert-manager"


def _env(c: Doc) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in c.get("env", [])}


def _mounted(pod: Doc, c: Doc, path: str) -> Doc:
    """The volume mounted at the folder of `path`."""
    folder = path.rsplit("/", 1)[0]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == folder]
    assert mount.get("readOnly") is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return volume


@pytest.mark.parametrize("path", INSTALLABLE)
def test_the_platform_serves_tls_and_the_operator_hands_agents_its_ca(
    cluster: Cluster, path: str
) -> None:
    docs = build(cluster, path)
    platform = one(docs, "Deployment", PLATFORM)
    pod, api = platform["spec"]["template"]["spec"], container(platform, "platform-api")
    env = _env(api)
    for variable, key in (
        ("HUMANWORK_TLS_CERT_FILE", "tls.crt"),
        ("HUMANWORK_TLS_KEY_FILE", "tls.key"),
    ):
        volume = _mounted(pod, api, env[variable])
        assert volume["secret"]["secretName"] == "humanwork-platform-tls"
        assert {"key": key, "path": env[variable].rsplit("/", 1)[1]} in volume["secret"]["items"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert api[probe]["httpGet"]["scheme"] == "HTTPS", probe
    operator = one(docs, "Deployment", OPERATOR)
    opod, oc = operator["spec"]["template"]["spec"], container(operator, "operator")
    oenv = _env(oc)
    assert oenv["HUMANWORK_OPERATOR_PLATFORM_API_SCHEME"] == "https"
    volume = _mounted(opod, oc, oenv["HUMANWORK_OPERATOR_PLATFORM_CA_FILE"])
    assert volume["configMap"]["name"] == "humanwork-platform-ca"
    # the operator may not read the serving certificate's Secret (only the CA, a ConfigMap)
    assert "humanwork-platform-tls" not in str(opod)


def test_the_cert_manager_component_asks_for_the_secret_the_platform_mounts(
    cluster: Cluster,
) -> None:
    docs = build(cluster, CERT_MANAGER)
    certificate = one(docs, "Certificate", PLATFORM)
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["spec"]["secretName"] == "humanwork-platform-tls"
    settings = OperatorSettings(platform_api_scheme="https")
    host = settings.platform_api_url.removeprefix("https://").rsplit(":", 1)[0]
    assert host in certificate["spec"]["dnsNames"]  # the name in the agents' URL
    assert "server auth" in certificate["spec"]["usages"]
    issuer = certificate["spec"]["issuerRef"]
    assert one(docs, issuer["kind"], issuer["name"])
    # the production overlay itself holds no cert-manager object (it applies without the CRDs)
    production = build(cluster, "manifests/overlays/production")
    assert not [d for d in production if d["apiVersion"].startswith("cert-manager.io/")]
    assert len(docs) == len(production) + 2


@pytest.mark.parametrize("path", INSTALLABLE)
def test_the_operator_and_the_platform_have_network_policies_of_their_own(
    cluster: Cluster, path: str
) -> None:
    docs = build(cluster, path)
    for name, ingress_ports in ((PLATFORM, {8000, 9090}), (OPERATOR, {9090})):
        policy = one(docs, "NetworkPolicy", name)
        labels = one(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"]
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
        assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
        rules = policy["spec"]["ingress"]
        assert {p["port"] for r in rules for p in r["ports"]} == ingress_ports
        assert all(r.get("from") for r in rules), "an ingress rule open to every source"
        egress_ports = {p["port"] for r in policy["spec"]["egress"] for p in r["ports"]}
        assert {53, 443} <= egress_ports
    # only agents' pods of org namespaces and labelled ingress namespaces reach the API port
    platform = one(docs, "NetworkPolicy", PLATFORM)
    (api,) = [r for r in platform["spec"]["ingress"] if r["ports"][0]["port"] == 8000]
    sources = api["from"]
    assert sources[0]["namespaceSelector"]["matchExpressions"][0]["key"] == "humanwork.io/org-id"
    assert sources[0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "humanwork-agent"}
    assert sources[1] == {
        "namespaceSelector": {"matchLabels": {"humanwork.io/platform-ingress": "true"}}
    }


def test_the_production_overlay_pins_every_image_by_digest(cluster: Cluster) -> None:
    docs = build(cluster, "manifests/overlays/production")
    images = []
    for d in docs:
        spec = d.get("spec") or {}
        if d["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        pod = (spec.get("template") or {}).get("spec")
        if pod:
            images += [c["image"] for c in pod["containers"] + pod.get("initContainers", [])]
    assert len(images) == 4  # operator, platform and its migrations, audit checkpoints
    for image in images:
        assert DIGEST.match(image), image
    agent_image = _env(container(one(docs, "Deployment", OPERATOR), "operator"))[
        "HUMANWORK_OPERATOR_AGENT_IMAGE"
    ]
    assert DIGEST.match(agent_image), agent_image
    # positive control: the dev overlay (images built locally) is not pinned
    dev = container(
        one(build(cluster, "manifests/overlays/dev"), "Deployment", PLATFORM), "platform-api"
    )
    assert not DIGEST.match(dev["image"])
