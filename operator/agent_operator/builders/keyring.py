"""The operator's own key material in the platform namespace: the signing keys Secret,
the callback master key Secret, the JWKS and the revocations ConfigMaps."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from humanwork_core.tokens import SigningKey, jwks

from ..config import OperatorSettings
from .naming import (
    MANAGED_BY,
    PART_OF,
    BuildError,
    Manifest,
    _b64,
    _rfc3339,
)

CALLBACK_KEY = "key"
"""The key of the callback master key in its Secret."""


SIGNING_KEYS_INDEX = "keys.json"


JWKS_FILE = "jwks.json"


def _platform_metadata(settings: OperatorSettings, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": settings.platform_namespace,
        "labels": {
            "app.kubernetes.io/name": MANAGED_BY,
            "app.kubernetes.io/component": "token-signing",
            "app.kubernetes.io/part-of": PART_OF,
            "app.kubernetes.io/managed-by": MANAGED_BY,
        },
    }


def signing_keys_secret(
    keys: Sequence[tuple[SigningKey, datetime]], settings: OperatorSettings
) -> Manifest:
    """The operator's signing keys: `<kid>.pem` per key and `keys.json`, the index of kids
    with their creation times (what :func:`humanwork_core.tokens.key_retention` needs)."""
    index = [{"kid": key.kid, "createdAt": _rfc3339(created)} for key, created in keys]
    data = {f"{key.kid}.pem": _b64(key.to_pem()) for key, _ in keys}
    data[SIGNING_KEYS_INDEX] = _b64(json.dumps(index, separators=(",", ":")))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _platform_metadata(settings, settings.signing_keys_secret),
        "data": data,
    }


def callback_key_secret(master: str, settings: OperatorSettings) -> Manifest:
    """The master key of the callback secrets (under `key`), see
    :func:`humanwork_core.signing.derive_secret`."""
    if not master:
        raise BuildError("the callback master key must not be empty")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _platform_metadata(settings, settings.callback_key_secret),
        "data": {CALLBACK_KEY: _b64(master)},
    }


def read_signing_keys_secret(data: Mapping[str, str]) -> list[tuple[SigningKey, datetime]]:
    """The keys of a Secret written by :func:`signing_keys_secret` (its base64 `data`).

    ValueError when the index is missing or names a key the Secret does not hold, or when
    a PEM does not match its kid.
    """
    raw_index = data.get(SIGNING_KEYS_INDEX)
    if raw_index is None:
        raise ValueError(f"the signing keys Secret has no {SIGNING_KEYS_INDEX}")
    entries = json.loads(base64.b64decode(raw_index))
    if not isinstance(entries, list):
        raise ValueError(f"{SIGNING_KEYS_INDEX} must be a list")
    keys: list[tuple[SigningKey, datetime]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"kid", "createdAt"} <= entry.keys():
            raise ValueError(f"{SIGNING_KEYS_INDEX} entries need kid and createdAt")
        kid, created = str(entry["kid"]), str(entry["createdAt"])
        pem = data.get(f"{kid}.pem")
        if pem is None:
            raise ValueError(f"the signing keys Secret lacks {kid}.pem")
        key = SigningKey.from_pem(base64.b64decode(pem))
        if key.kid != kid:
            raise ValueError(f"{kid}.pem holds the key {key.kid}")
        keys.append((key, datetime.fromisoformat(created.replace("Z", "+00:00"))))
    return keys


def jwks_config_map(published: Iterable[SigningKey], settings: OperatorSettings) -> Manifest:
    """The public keys the platform API verifies agent tokens with, as `jwks.json`."""
    document = jwks(published)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _platform_metadata(settings, settings.jwks_config_map),
        "data": {JWKS_FILE: json.dumps(document, sort_keys=True, separators=(",", ":"))},
    }


def revocations_config_map(settings: OperatorSettings) -> Manifest:
    """The (initially empty) list of revoked agent token ids the platform API reads."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _platform_metadata(settings, settings.revocations_config_map),
        "data": {},
    }
