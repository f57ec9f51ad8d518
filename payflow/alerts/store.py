"""The `alerts` table: the record of every alert incident (migration 0011).

Each function opens its own short transaction: the sink is called by jobs outside
their transactions, and an alert must be recorded even when the job's work rolls back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import asyncpg
import orjson

from payflow.alerts import Severity
from payflow.config import AlertSettings, DatabaseSettings
from payflow.db.queries import load_queries
from payflow.db.tx import transaction
from payflow.money import format_amount

SQL = load_queries("payflow.alerts")

MAX_KEY_LENGTH = 200  # mirrored by alerts_key_length
MAX_MESSAGE_LENGTH = 4000  # mirrored by alerts_message_length


@dataclass(frozen=True, slots=True)
class AlertRow:
    """One incident of an alert key: open while `resolved_at` is None."""

    key: str
    severity: Severity
    message: str
    details: dict[str, Any]
    first_seen: datetime
    last_seen: datetime
    count: int
    resolved_at: datetime | None
    acknowledged_at: datetime | None
    acknowledged_by: str | None

    @classmethod
    def from_record(cls, record: asyncpg.Record) -> AlertRow:
        """Build from a row of the `alerts` table (all columns but id)."""
        return cls(
            key=record["key"],
            severity=Severity(record["severity"]),
            message=record["message"],
            details=dict(record["details"]),
            first_seen=record["first_seen"],
            last_seen=record["last_seen"],
            count=record["count"],
            resolved_at=record["resolved_at"],
            acknowledged_at=record["acknowledged_at"],
            acknowledged_by=record["acknowledged_by"],
        )


def _json_default(value: object) -> str:
    """An amount in plain notation (``0.000000000000000001``, never ``1E-18``); anything
    else JSON cannot hold (UUID, Enum, ...) as its `str`. NaN/infinity as their `str`."""
    if isinstance(value, Decimal):
        return format_amount(value) if value.is_finite() else str(value)
    return str(value)


def plain_details(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """`details` as a JSON object: values JSON cannot hold (Decimal, UUID, ...) become
    strings, so an amount stays exact and never turns into a float."""
    if not details:
        return {}
    encoded = orjson.dumps(dict(details), default=_json_default, option=orjson.OPT_NON_STR_KEYS)
    decoded: dict[str, Any] = orjson.loads(encoded)
    return decoded


class AlertStore:
    """Reads and writes the `alerts` table through `pool`, one transaction per call.

    Errors: asyncpg / OS errors propagate; the sink catches them (the table may be down).
    """

    def __init__(
        self, pool: asyncpg.Pool, settings: AlertSettings, *, database: DatabaseSettings
    ) -> None:
        self._pool = pool
        self._database = database  # the bounds of its transactions
        self._acquire_timeout = settings.alert_timeout_s

    async def fire(
        self, key: str, severity: Severity, message: str, details: Mapping[str, Any]
    ) -> AlertRow:
        """Open the incident of `key` or count one more firing of the open one; return it."""
        async with (
            self._pool.acquire(timeout=self._acquire_timeout) as conn,
            transaction(conn, self._database),
        ):
            record = await conn.fetchrow(
                SQL["fire_alert"],
                key,
                severity.value,
                message[:MAX_MESSAGE_LENGTH],
                plain_details(details),
            )
        assert record is not None  # INSERT ... ON CONFLICT DO UPDATE always returns the row
        return AlertRow.from_record(record)

    async def resolve(self, key: str) -> AlertRow | None:
        """Close the open incident of `key`; None when none was open."""
        async with (
            self._pool.acquire(timeout=self._acquire_timeout) as conn,
            transaction(conn, self._database),
        ):
            record = await conn.fetchrow(SQL["resolve_alert"], key)
        return AlertRow.from_record(record) if record is not None else None

    async def acknowledge(self, key: str, operator: str) -> AlertRow | None:
        """Record that `operator` acknowledged the open incident of `key`; None when none
        is open. Acknowledging twice keeps the first acknowledgement."""
        async with (
            self._pool.acquire(timeout=self._acquire_timeout) as conn,
            transaction(conn, self._database),
        ):
            record = await conn.fetchrow(SQL["acknowledge_alert"], key, operator[:200])
        return AlertRow.from_record(record) if record is not None else None

    async def list(self, *, include_resolved: bool = False, limit: int = 100) -> list[AlertRow]:
        """Open incidents (and with `include_resolved` closed ones): open first, then by
        severity, newest first; at most `limit` rows."""
        async with (
            self._pool.acquire(timeout=self._acquire_timeout) as conn,
            transaction(conn, self._database, readonly=True),
        ):
            records = await conn.fetch(SQL["list_alerts"], include_resolved, limit)
        return [AlertRow.from_record(record) for record in records]
