"""Wait for CustomResourceDefinitions to be Established, for the tests, `make up` and the
benches: a definition read just after its creation has `status.conditions: null`, which
`kubectl wait --for=condition=Established` reports as an error instead of waiting (it failed a
CI run so), so this polls instead."""

from __future__ import annotations

import json
import os
import subprocess
import time


def wait_established(
    kubectl: str, kubeconfig: str, names: tuple[str, ...] = (), timeout: float = 60.0
) -> None:
    """Wait until the named CustomResourceDefinitions (every one when `names` is empty) are
    Established; TimeoutError after `timeout` seconds."""
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    argv = [kubectl, "get", "customresourcedefinitions", *names, "-o", "json"]
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        pending = ["(not readable)"] if done.returncode else _not_established(done.stdout)
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"not Established after {timeout:.0f} s: {', '.join(pending)}")
        time.sleep(0.2)


def _not_established(listing: str) -> list[str]:
    doc = json.loads(listing)
    items = doc.get("items", [doc])
    return [
        item["metadata"]["name"]
        for item in items
        if not any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (item.get("status") or {}).get("conditions") or ()
        )
    ]
