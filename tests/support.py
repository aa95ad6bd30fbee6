"""Small helpers shared by the integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client


def eventually(check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.25) -> Any:
    """Poll `check` until it returns a truthy value; fail with its last error otherwise."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (client.ApiException, AssertionError) as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last error: {last}")


def service_account_token(
    api: client.ApiClient, namespace: str, account: str, seconds: int = 600
) -> str:
    """A TokenRequest token of a ServiceAccount, to act as that identity in a test."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
    )
    token = client.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, request
    )
    return str(token.status.token)
