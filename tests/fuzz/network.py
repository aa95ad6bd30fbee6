"""A guard that records every name lookup and connection a process makes to anything but
the local machine (a Python audit hook: it changes nothing, it only watches).

The fuzzers generate URL-typed fields (integration endpoints, OIDC issuers, LLM
endpoints); none of them may make the platform, the agent or the fuzzer itself resolve or
contact a host on the network. `install()` adds the hook once per process; `foreign()`
is what it saw since the last `reset()`."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}

_seen: list[str] = []
_installed = False


def is_local(host: Any) -> bool:
    if not isinstance(host, str | bytes):
        return host is None
    name = host.decode(errors="replace") if isinstance(host, bytes) else host
    if name.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.getaddrinfo":
        if not is_local(args[0]):
            _seen.append(f"lookup {args[0]!r}:{args[1]!r}")
    elif event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and not is_local(address[0]):
            _seen.append(f"connect {address!r}")


def install() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def reset() -> None:
    _seen.clear()


def foreign() -> list[str]:
    return list(_seen)
