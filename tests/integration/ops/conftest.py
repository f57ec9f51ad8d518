"""Ops fixtures: a recording alert sink and a job context on the test's database."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest

from payflow.config import Settings
from payflow.ops.alerts import Severity
from payflow.ops.jobs import JobContext


@dataclass
class RecordingSink:
    """An AlertSink that remembers what it was told (the thing under test is the job)."""

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
        return [key for key, *_ in self.fired]


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def ctx(pool: asyncpg.Pool, settings: Settings, sink: RecordingSink) -> JobContext:
    return JobContext(pool, settings, sink)
