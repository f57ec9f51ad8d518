"""A resolver stub at the `socket.getaddrinfo` boundary: asyncio's `loop.getaddrinfo`,
anyio and httpx all resolve through it, so every lookup of a stubbed name is seen and
counted; any other name (and every IP literal) goes to the real resolver."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any

import pytest

AddrInfo = tuple[Any, ...]
# An answer of `[FAIL]` makes that lookup fail as a resolver outage does (EAI_AGAIN).
FAIL = "<resolver failure>"


class FakeDns:
    """`answers[name]` lists one answer (a list of addresses) per lookup; the last answer
    repeats. `lookups[name]` counts the lookups of that name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: dict[str, int] = {}
        self._real: Callable[..., list[AddrInfo]] = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self._getaddrinfo)

    def answer(self, name: str, *answers: Sequence[str]) -> None:
        """Lookup n of `name` answers `answers[n]` (the last one from then on)."""
        self.answers[name.lower()] = [list(answer) for answer in answers]
        self.lookups[name.lower()] = 0

    def _getaddrinfo(
        self, host: Any, port: Any, family: int = 0, type: int = 0, *args: Any, **kwargs: Any
    ) -> list[AddrInfo]:
        name = host.decode() if isinstance(host, bytes) else str(host)
        name = name.lower().rstrip(".")
        if name not in self.answers:
            return self._real(host, port, family, type, *args, **kwargs)
        count = self.lookups[name]
        self.lookups[name] = count + 1
        answers = self.answers[name]
        addresses = answers[min(count, len(answers) - 1)]
        if addresses == [FAIL]:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        infos: list[AddrInfo] = []
        for address in addresses:
            if ":" in address:
                infos.append(
                    (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, int(port or 0), 0, 0))
                )
            else:
                infos.append((socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0))))
        return infos
