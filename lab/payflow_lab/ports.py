"""Free TCP ports for the private servers that tests, benchmarks and chaos runs start.

A port from the kernel's ephemeral range (`bind(0)`) is only free for a moment: every
outbound connection on the machine draws its local port from that same range. A server
that is restarted (a chaos RabbitMQ or PostgreSQL restart) leaves its port unbound for a
while, and a client socket may take it meanwhile; the restarted server then fails with
"address in use" (seen: RabbitMQ's `dist_port_already_used`). So `free_port()` draws from
below the ephemeral range, where the kernel never assigns a local port on its own.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 10_000
_TRIES = 200


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, below the ephemeral range.

    Returns: the port number. Falls back to a kernel-chosen port when no port below the
    ephemeral range binds within a few hundred tries (a machine with a tiny low range).
    """
    high = _ephemeral_low() - 1
    rng = random.SystemRandom()
    for _ in range(_TRIES if high > _LOWEST else 0):
        port = rng.randint(_LOWEST, high)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        chosen: int = sock.getsockname()[1]
        return chosen
