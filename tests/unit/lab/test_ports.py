"""`free_port()` hands out ports the kernel never gives an outbound socket on its own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from payflow_lab.ports import free_port


def test_free_port_is_below_the_ephemeral_range_and_binds() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    if low <= 10_000 + 200:
        pytest.skip("the ephemeral range starts too low: free_port falls back to bind(0)")
    ports = {free_port() for _ in range(50)}
    assert all(10_000 <= port < low for port in ports)
    assert len(ports) > 1  # drawn at random, not one fixed port
    for port in list(ports)[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # nothing holds it
