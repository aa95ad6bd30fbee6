"""The fuzz tests' network guard (tests/fuzz/network.py) sees what it must: a lookup of a
name or address that is not local, and nothing for loopback."""

from __future__ import annotations

import socket

from tests.fuzz import network


def test_the_guard_records_a_lookup_that_leaves_the_machine() -> None:
    network.install()
    network.reset()
    socket.getaddrinfo("127.0.0.1", 80)
    socket.getaddrinfo("localhost", 80)
    assert network.foreign() == []
    socket.getaddrinfo("10.20.30.40", 443)  # numeric: no packet is sent, the hook still sees it
    assert network.foreign() == ["lookup '10.20.30.40':443"]
    network.reset()
    assert network.foreign() == []


def test_local_names_and_addresses() -> None:
    assert all(network.is_local(h) for h in ("localhost", "127.0.0.1", "127.5.5.5", "::1", None))
    assert not any(network.is_local(h) for h in ("example.com", "10.0.0.1", "169.254.169.254"))
