"""An alert sink for tests that remembers what fired and what was resolved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from payflow.alerts import Severity


@dataclass
class RecordingSink:
    """An AlertSink that remembers what it was told (the thing under test is its caller)."""

    fired: list[tuple[str, Severity, str, dict[str, Any]]] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)

    async def fire(
        self,
        key: str,
        severity: Severity,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.fired.append((key, severity, message, dict(details or {})))

    async def resolve(self, key: str) -> None:
        self.resolved.append(key)

    def keys(self) -> list[str]:
        """The keys fired, in order."""
        return [key for key, *_ in self.fired]
