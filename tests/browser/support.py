"""What the browser and plugin tests share: the platform API as a real HTTP process on the
real control plane and PostgreSQL (with the session's operator running), and one fresh
org per test with its users, created through the API the way an admin would.

Everything here is synchronous (httpx's sync client): the browser tests drive Playwright's
sync API, which must not run inside an asyncio loop.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from kubernetes import client as kclient

from humanwork_dev.processes import PlatformProcess
from tests.conftest import Cluster
from tests.platform.conftest import ADMIN_PASSWORD

T = TypeVar("T")

STEP = {
    "id": "refund",
    "description": "Refund order 1042",
    "kind": "action",
    "tool": "shopify_refund",
    "parameters": {"order": 1042, "amount": "49.90", "notify": True},
    "risk": "high",
}

EXPIRES_AFTER_THE_PAGE_SHOWS = 25
"""A decision deadline (seconds) for a test that shows the step on a page, then lets it
expire: long enough for a login and a page load on a loaded two-core machine (a few
seconds were not), so the page shows it before it expires."""
EXPIRY_WAIT = EXPIRES_AFTER_THE_PAGE_SHOWS + 60
"""How long such a test waits for the operator to expire the step."""


def until(read: Callable[[], T], check: Callable[[T], bool], within: float = 30) -> T:
    """Poll `read` until `check` holds; fail with the last value otherwise."""
    deadline = time.monotonic() + within
    while True:
        value = read()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s; last: {value}")
        time.sleep(0.2)


@dataclass
class User:
    """A user of the org, logged in."""

    username: str
    password: str
    role: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass
class Org:
    """One org on the running platform, its users and a client to drive the API."""

    http: httpx.Client
    cluster: Cluster
    id: str
    namespace: str
    admin: User
    expert: User
    expert2: User
    lead: User
    requester: User
    viewer: User
    created: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return str(self.http.base_url).rstrip("/")

    def task(self, steps: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
        """A task created by the requester, once the operator gave its step a deadline (or,
        for a deadline of a second on a busy machine, already let it expire)."""
        body = {
            "orgId": self.id,
            "agentRef": "shop",
            "description": "Refund the damaged vase of order 1042",
            "steps": steps or [STEP],
            **fields,
        }
        r = self.http.post("/agentic/tasks", json=body, headers=self.requester.headers)
        assert r.status_code == 201, r.text
        made: dict[str, Any] = r.json()
        self.created.append(made["id"])
        return self.wait(
            made["id"],
            lambda t: (
                bool(t["status"].get("nextDeadline"))
                or t["status"].get("phase") == "Expired"
                or any(s.get("state") == "Expired" for s in t["status"].get("steps") or [])
            ),
        )

    def get(self, task_id: str) -> dict[str, Any]:
        r = self.http.get(f"/agentic/tasks/{task_id}", headers=self.expert.headers)
        assert r.status_code == 200, r.text
        task: dict[str, Any] = r.json()
        return task

    def wait(
        self, task_id: str, check: Callable[[dict[str, Any]], bool], within: float = 30
    ) -> dict[str, Any]:
        return until(lambda: self.get(task_id), check, within)

    def queue(self, user: User | None = None) -> dict[str, Any]:
        r = self.http.get("/human-tasks", headers=(user or self.expert).headers)
        assert r.status_code == 200, r.text
        page: dict[str, Any] = r.json()
        return page

    def wait_queue(self, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return until(lambda: self.queue(), check)

    def conversation(self, subject: str, messages: list[tuple[str, str, str]]) -> str:
        """A conversation of the org with (role, author, content) messages; its id."""
        r = self.http.post(
            f"/orgs/{self.id}/conversations", json={"subject": subject}, headers=self.admin.headers
        )
        assert r.status_code == 201, r.text
        conversation_id: str = r.json()["id"]
        for role, author, content in messages:
            r = self.http.post(
                f"/conversations/{conversation_id}/messages",
                json={"role": role, "author": author, "content": content},
                headers=self.admin.headers,
            )
            assert r.status_code == 201, r.text
        return conversation_id

    def step_entry(self, task_id: str, step_id: str) -> dict[str, Any]:
        for entry in self.get(task_id)["status"].get("steps") or []:
            if entry["id"] == step_id:
                return dict(entry)
        return {}

    def record_execution(
        self,
        task_id: str,
        step_id: str,
        result: dict[str, Any] | None,
        state: str = "Succeeded",
        error: str | None = None,
    ) -> None:
        """`record_execution` on this org's cluster."""
        record_execution(self.cluster, task_id, step_id, result, state, error)


def record_execution(
    cluster: Cluster,
    task_id: str,
    step_id: str,
    result: dict[str, Any] | None,
    state: str = "Succeeded",
    error: str | None = None,
) -> None:
    """Write a finished execution into the step's status, as its agent would (the test
    acts as a cluster admin, whom the writers policy lets repair tasks)."""
    namespace, name = task_id.split("/")
    api = kclient.CustomObjectsApi(cluster.api)
    for _ in range(20):  # the operator writes the status too: retry on a conflict
        raw = api.get_namespaced_custom_object(
            "humanwork.io", "v1alpha1", namespace, "agentictasks", name
        )
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        steps = raw["status"]["steps"]
        for entry in steps:
            if entry["id"] == step_id:
                entry["execution"] = {
                    "state": state,
                    "attempt": 1,
                    "startedAt": now,
                    "finishedAt": now,
                    **({"result": result} if result is not None else {}),
                    **({"error": error} if error is not None else {}),
                }
        patch = {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "status": {"steps": steps},
        }
        try:
            api.patch_namespaced_custom_object_status(
                "humanwork.io", "v1alpha1", namespace, "agentictasks", name, patch
            )
            return
        except kclient.ApiException as exc:
            if exc.status != 409:
                raise
            time.sleep(0.1)
    raise AssertionError(f"could not record the execution of {task_id}/{step_id}")


def _login(http: httpx.Client, username: str, password: str) -> str:
    r = http.post("/auth/token", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    token: str = r.json()["access_token"]
    return token


def make_org(http: httpx.Client, cluster: Cluster) -> Org:
    """A fresh org (its namespace made by the platform) with an admin, two experts, a lead
    (role operator: run.control), a requester (operator) and a viewer."""
    admin_token = _login(http, "admin", ADMIN_PASSWORD)
    root = {"Authorization": f"Bearer {admin_token}"}
    slug = f"w-{uuid.uuid4().hex[:6]}"
    r = http.post("/orgs", json={"slug": slug, "name": f"Shop {slug}"}, headers=root)
    assert r.status_code == 201, r.text
    org = r.json()
    users: dict[str, User] = {}
    for key, role in (
        ("admin", "admin"),
        ("expert", "expert"),
        ("expert2", "expert"),
        ("lead", "operator"),
        ("requester", "operator"),
        ("viewer", "viewer"),
    ):
        username, password = f"{key}-{slug}", f"pw-{key}-{slug}-0123456789"
        r = http.post(
            "/users",
            json={"username": username, "password": password, "role": role, "org_ids": [org["id"]]},
            headers=root,
        )
        assert r.status_code == 201, r.text
        users[key] = User(username, password, role, _login(http, username, password))
    return Org(http=http, cluster=cluster, id=org["id"], namespace=org["namespace"], **users)


def org_fixture(server: PlatformProcess, cluster: Cluster) -> Iterator[Org]:
    """`make_org` on `server`; its namespace is deleted afterwards."""
    with httpx.Client(base_url=server.url, timeout=60) as http:
        org = make_org(http, cluster)
        try:
            yield org
        finally:
            try:
                kclient.CoreV1Api(cluster.api).delete_namespace(org.namespace)
            except kclient.ApiException as exc:
                if exc.status != 404:
                    raise
