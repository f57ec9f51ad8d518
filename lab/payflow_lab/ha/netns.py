"""Hosts made of Linux network namespaces on one private bridge (dev tooling).

Each host is a namespace `pf-<name>` with a veth pair: one end inside (its address in
the lab's private /24), the other on the bridge `pf-br0` in the root namespace, which
holds the subnet's `.1` so the harness (and a test) reach every host directly. A host
may get its own `/etc/hosts` (`ip netns exec` mounts `/etc/netns/<ns>/hosts` over it),
which the RabbitMQ nodes need for their short node names.

Everything created is named with `PREFIX`; `cleanup()` removes whatever carries it
(namespaces, links, `/etc/netns` entries), also leftovers of a run that was killed, and
is safe to call any number of times.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

IP = "/usr/sbin/ip"
PREFIX = "pf-"
BRIDGE = f"{PREFIX}br0"
SUBNET = "10.77.0"  # a private /24; the root namespace is .1
NETNS_ETC = Path("/etc/netns")


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here (no root, no `ip`, or the kernel refuses)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - fixed binary, our own arguments
        [IP, *args], capture_output=True, text=True, check=check, timeout=30
    )


def namespaces() -> list[str]:
    """The network namespaces that exist now."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def cleanup(prefix: str = PREFIX) -> None:
    """Remove every namespace, link and `/etc/netns` entry named with `prefix`
    (idempotent: a missing one is no error)."""
    for name in namespaces():
        if name.startswith(prefix):
            # The lab's own processes on that host (a killed run's leftovers included).
            pids = _ip("netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _ip("netns", "del", name, check=False)
    links = _ip("-o", "link", "show", check=False).stdout
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            link = parts[1].strip().split("@")[0]
            if link.startswith(prefix):
                _ip("link", "del", link, check=False)
    if NETNS_ETC.is_dir():
        for entry in NETNS_ETC.iterdir():
            if entry.name.startswith(prefix):
                shutil.rmtree(entry, ignore_errors=True)


def check_available() -> None:
    """Raise `NetnsUnavailable` (one line saying why) unless namespaces can be made."""
    if not Path(IP).exists():
        raise NetnsUnavailable("the `ip` tool (iproute2) is not installed")
    # A name of this process's own, outside PREFIX: several pytest workers probe at once,
    # and a lab starting elsewhere removes every PREFIX namespace.
    probe = f"pfprobe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        raise NetnsUnavailable(f"cannot create a network namespace: {made.stderr.strip()}")
    _ip("netns", "del", probe, check=False)


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: its name (without the prefix), namespace and address."""

    name: str
    address: str

    @property
    def netns(self) -> str:
        """The namespace's name (`pf-<name>`)."""
        return f"{PREFIX}{self.name}"

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this host's namespace."""
        return [IP, "netns", "exec", self.netns, *argv]


@dataclass
class Network:
    """The bridge and the hosts on it; `add` makes a host, `close` removes everything."""

    hosts: dict[str, Host] = field(default_factory=dict)
    _next: int = 10

    def open(self) -> None:
        """Clean leftovers, then create the bridge with the root namespace's address."""
        cleanup()
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")

    def add(self, name: str, octet: int | None = None) -> Host:
        """A new host `pf-<name>` at `10.77.0.<octet>` (the next free one by default)."""
        if octet is None:
            octet = self._next
        self._next = max(self._next, octet) + 1
        host = Host(name, f"{SUBNET}.{octet}")
        outer, inner = f"{PREFIX}v{octet}", f"{PREFIX}i{octet}"
        _ip("netns", "add", host.netns)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", host.netns)
        _ip("link", "set", outer, "master", BRIDGE, "up")
        _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", inner)
        _ip("-n", host.netns, "link", "set", inner, "up")
        _ip("-n", host.netns, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def cut(self, host: Host) -> None:
        """Take `host`'s link down: its packets are dropped both ways (no RST, no
        answer), as when a machine's network goes; its processes keep running."""
        _ip("-n", host.netns, "link", "set", self._inner(host), "down")

    def heal(self, host: Host) -> None:
        """Bring `host`'s link back after `cut`."""
        _ip("-n", host.netns, "link", "set", self._inner(host), "up")

    @staticmethod
    def _inner(host: Host) -> str:
        return f"{PREFIX}i{host.address.rsplit('.', 1)[1]}"

    def write_hosts_file(self, host: Host, names: dict[str, str]) -> None:
        """Give `host` an `/etc/hosts` naming `names` (name -> address) besides localhost
        and this machine's own host name."""
        own = subprocess.run(
            ["/usr/bin/hostname"], capture_output=True, text=True, check=False
        ).stdout.strip()
        lines = [f"127.0.0.1 localhost {own}".rstrip()]
        lines += [f"{address} {name}" for name, address in names.items()]
        directory = NETNS_ETC / host.netns
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        """Remove the bridge, every host and their `/etc/netns` entries."""
        cleanup()
        self.hosts.clear()
