"""The ceiling for bench/provision.py: a plain client provisions orgs without the operator.

Threads of a plain HTTP client (httpx), authenticated as the operator's own ServiceAccount,
write for each fresh org exactly the objects the operator writes: the RoleBinding that lets
it reach the org's Secrets, then every child the operator's pure builders
(`agent_operator.builders.children`) describe, each by server-side apply; a watch on the
agents' Deployments then writes the AgentInstance's status (phase Ready) once the agent's
pod is Ready on kwok, which is what the operator's "Ready" means. Nothing is read back,
nothing is skipped: the minimum the API server must serve per org.

Used by bench/provision.py; it keeps its own counts of writes.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agent_operator import builders
from agent_operator.config import OperatorSettings
from agent_operator.kube import path_for
from humanwork_core import tokens
from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.resources import AgentInstance
from humanwork_core.signing import derive_secret, generate_secret

FIELD_MANAGER = "bench-plain-client"
DEPLOYMENTS = "/apis/apps/v1/deployments"


class PlainClient:
    """Provisions orgs by hand; records when each org's status said Ready."""

    def __init__(
        self, server: str, ca: Path, token: str, threads: int = 16, shard: str = ""
    ) -> None:
        self.server = server
        self.ctx = ssl.create_default_context(cafile=str(ca))
        self.headers = {"Authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=threads + 4, max_keepalive_connections=threads + 4)
        self.http = httpx.Client(verify=self.ctx, timeout=30.0, limits=limits)
        # the children as the operator of the orgs' shard builds them (its Deployments
        # labelled with it: only that shard's operator watches them)
        self.settings = OperatorSettings(shard=shard)
        self.key = tokens.generate_signing_key()
        self.callback_master = generate_secret()
        self.api_server: list[builders.ApiServerEndpoint] = []
        self.pool = ThreadPoolExecutor(threads)
        self.writes = 0
        self.failures: list[str] = []
        self.ready: dict[str, float] = {}
        self.waiting: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_deployments, daemon=True)

    def start(self) -> None:
        slices = self._request(
            "GET",
            path_for("discovery.k8s.io/v1", "EndpointSlice", "default"),
            params={"labelSelector": "kubernetes.io/service-name=kubernetes"},
            write=False,
        )
        self.api_server = builders.api_server_endpoints(slices.get("items") or [])
        self._watch.start()

    def stop(self) -> None:
        self._stop.set()
        self.pool.shutdown(wait=True)
        self.http.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        write: bool = True,
    ) -> dict[str, Any]:
        response = self.http.request(
            method,
            self.server + path,
            content=encode_body(body) if body is not None else None,
            headers={**self.headers, "Content-Type": content_type},
            params=params,
        )
        if write:
            with self._lock:
                self.writes += 1
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return dict(response.json())

    def _apply(self, manifest: dict[str, Any]) -> None:
        meta = manifest["metadata"]
        path = path_for(
            manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"]
        )
        self._request(
            "PATCH",
            path,
            body=manifest,
            content_type=APPLY_CONTENT_TYPE,
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
        )

    def provision(self, body: dict[str, Any]) -> None:
        """Write one org's children (the instance `body` exists already)."""
        instance = AgentInstance.model_validate(body)
        ns, name = builders.namespace_of(instance), instance.metadata.name
        with self._lock:
            self.waiting.add(ns)
        try:
            self._apply(builders.org_secrets_role_binding(ns, self.settings))
            minted = tokens.mint_agent_token(
                self.key,
                agent_id=builders.agent_id(instance),
                org_id=instance.spec.org_id,
                namespace=ns,
                ttl_seconds=instance.spec.token.ttl_seconds,
                now=datetime.now(UTC).replace(microsecond=0),
                audience=self.settings.token_audience,
                issuer=self.settings.token_issuer,
            )
            callback = derive_secret(self.callback_master, ns, name, instance.metadata.uid or "")
            for child in builders.children(
                instance, self.settings, minted, callback, self.api_server
            ):
                self._apply(child)
        except Exception as exc:  # recorded and printed: the figure then says NOT Ready
            self.failures.append(f"{ns}: {exc}")

    def _mark_ready(self, ns: str, name: str) -> None:
        try:
            self._request(
                "PATCH",
                path_for("humanwork.io/v1alpha1", "AgentInstance", ns, name) + "/status",
                body={"status": {"phase": "Ready", "replicas": 1, "readyReplicas": 1}},
                content_type="application/merge-patch+json",
                params={"fieldManager": FIELD_MANAGER},
            )
            self.ready.setdefault(f"{ns}/{name}", time.monotonic())
        except Exception as exc:
            self.failures.append(f"{ns} status: {exc}")

    def _watch_deployments(self) -> None:
        params = {
            "watch": "true",
            "labelSelector": "app.kubernetes.io/component=agent",
            "timeoutSeconds": "60",
        }
        while not self._stop.is_set():
            try:
                with self.http.stream(
                    "GET",
                    self.server + DEPLOYMENTS,
                    params=params,
                    headers=self.headers,
                    timeout=httpx.Timeout(30.0, read=90.0),
                ) as stream:
                    for line in stream.iter_lines():
                        self._seen(json.loads(line)["object"])
                        if self._stop.is_set():
                            return
            except Exception:  # a dropped watch is simply restarted
                time.sleep(0.2)

    def _seen(self, deployment: dict[str, Any]) -> None:
        meta = deployment.get("metadata") or {}
        ns = meta.get("namespace", "")
        if int((deployment.get("status") or {}).get("readyReplicas") or 0) < 1:
            return
        with self._lock:
            if ns not in self.waiting:
                return
            self.waiting.discard(ns)
        owner = next(
            (
                r["name"]
                for r in meta.get("ownerReferences") or []
                if r.get("kind") == "AgentInstance"
            ),
            None,
        )
        if owner:
            self.pool.submit(self._mark_ready, ns, owner)
