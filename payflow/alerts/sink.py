"""The alert sink every job raises alerts through: a cooldown per key, bounded memory,
the `alerts` table as the record, and a pluggable delivery.

- `fire` records the firing in the table (count + 1, last_seen), then delivers it unless
  the key was delivered less than `cooldown_s` ago (a reminder is sent once the cooldown
  is over), the incident is acknowledged, or the memory is full. A rise in severity is
  delivered at once.
- The memory holds at most `max_keys` keys. A new key first evicts the stale ones (their
  cooldown is over); when the memory is still full the new key's delivery is suppressed
  with the warning `payflow.alerts.suppressed` (it is still recorded in the table).
- `resolve` closes the open incident and delivers the resolution when there was one.
- Invariant: the sink NEVER raises into its caller. A failing table (PostgreSQL down)
  or delivery (webhook down) is logged (`payflow.alerts.store_failed`,
  `payflow.alerts.delivery_failed`) and swallowed; cancellation still propagates.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog

from payflow.alerts import Severity
from payflow.alerts.delivery import (
    AlertDelivery,
    AlertNotice,
    LogDelivery,
    describe_failure,
)
from payflow.alerts.store import (
    MAX_KEY_LENGTH,
    MAX_MESSAGE_LENGTH,
    AlertRow,
    AlertStore,
    plain_details,
)
from payflow.errors import is_connection_error

log = structlog.get_logger("payflow.alerts")

# Tries of one record when its database session is lost (`errors.is_connection_error`):
# a failover or a terminated session must not drop a firing or a resolution.
STORE_TRIES = 3
T = TypeVar("T")
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(slots=True)
class _KeyState:
    """What the sink remembers of one key: when (monotonic seconds) and at which severity
    it last delivered, and the firing for a resolution when the table is unreachable."""

    delivered_at: float
    severity: Severity
    message: str
    first_seen: datetime
    count: int


class CooldownAlertSink:
    """An `AlertSink` with a cooldown per key and at most `max_keys` keys in memory.

    `store` None means no table (unit tests, tools without a database); `clock` returns
    monotonic seconds and is injectable for tests.
    """

    def __init__(
        self,
        *,
        store: AlertStore | None,
        delivery: AlertDelivery | None = None,
        cooldown_s: float = 300.0,
        max_keys: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_keys < 1 or cooldown_s < 0:
            raise ValueError("max_keys must be >= 1 and cooldown_s >= 0")
        self._store = store
        self._delivery: AlertDelivery = delivery if delivery is not None else LogDelivery()
        self._cooldown_s = cooldown_s
        self._max_keys = max_keys
        self._clock = clock
        self._keys: dict[str, _KeyState] = {}
        self.suppressed = 0  # new keys whose delivery the full memory suppressed

    def __len__(self) -> int:
        """How many keys the sink remembers (never more than `max_keys`)."""
        return len(self._keys)

    async def fire(
        self,
        key: str,
        severity: Severity,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Record and (cooldown, acknowledgement and memory allowing) deliver the alert
        `key`; never raises (see the module docstring)."""
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
            log.error("payflow.alerts.invalid_key", key=str(key)[:MAX_KEY_LENGTH])
            return
        severity = _severity(severity)
        message = str(message)[:MAX_MESSAGE_LENGTH]
        try:
            plain = plain_details(details)
        except Exception as error:  # e.g. a cycle: keep the alert, drop the details
            log.error("payflow.alerts.invalid_details", key=key, error=type(error).__name__)
            plain = {"details_error": type(error).__name__}
        row = await self._record_fire(key, severity, message, plain)
        notice = self._decide(key, severity, message, plain, row)
        if notice is not None:
            await self._deliver(notice)

    async def resolve(self, key: str) -> None:
        """Close the open incident of `key` and deliver the resolution if there was an
        incident (in the table or in memory); never raises."""
        remembered = self._keys.pop(key, None)
        row: AlertRow | None = None
        if self._store is not None:
            store = self._store
            try:
                row = await _on_fresh_session(lambda: store.resolve(key))
            except Exception as error:
                log.error(
                    "payflow.alerts.store_failed", key=key, op="resolve", error=_describe(error)
                )
        if row is not None:
            notice = AlertNotice(
                key, row.severity, row.message, row.details, row.first_seen, row.count, "resolved"
            )
        elif remembered is not None:
            notice = AlertNotice(
                key,
                remembered.severity,
                remembered.message,
                {},
                remembered.first_seen,
                remembered.count,
                "resolved",
            )
        else:
            return  # nothing was open: a clean run resolves quietly
        await self._deliver(notice)

    async def _record_fire(
        self, key: str, severity: Severity, message: str, details: dict[str, Any]
    ) -> AlertRow | None:
        if self._store is None:
            return None
        store = self._store
        try:
            return await _on_fresh_session(lambda: store.fire(key, severity, message, details))
        except Exception as error:
            log.error("payflow.alerts.store_failed", key=key, op="fire", error=_describe(error))
            return None

    def _decide(
        self,
        key: str,
        severity: Severity,
        message: str,
        details: dict[str, Any],
        row: AlertRow | None,
    ) -> AlertNotice | None:
        """Update the memory and return the notice to deliver, or None. No await inside,
        so concurrent fires of one key deliver once."""
        now = self._clock()
        state = self._keys.get(key)
        if state is None:
            if len(self._keys) >= self._max_keys:
                self._evict_stale(now)
            if len(self._keys) >= self._max_keys:
                self.suppressed += 1
                log.warning(
                    "payflow.alerts.suppressed",
                    key=key,
                    severity=severity.value,
                    max_keys=self._max_keys,
                    suppressed=self.suppressed,
                )
                return None
            first_seen = row.first_seen if row is not None else datetime.now(UTC)
            count = row.count if row is not None else 1
            self._keys[key] = _KeyState(now, severity, message, first_seen, count)
            if row is not None and row.acknowledged_at is not None:
                return None  # acknowledged before this process knew the key (a restart)
            return AlertNotice(key, severity, message, details, first_seen, count, "firing")
        state.count = row.count if row is not None else state.count + 1
        state.message = message
        escalated = _RANK[severity] > _RANK[state.severity]
        cooling = now - state.delivered_at < self._cooldown_s
        acknowledged = row is not None and row.acknowledged_at is not None
        if not escalated and (cooling or acknowledged):
            return None
        state.delivered_at = now
        state.severity = severity
        first_seen = row.first_seen if row is not None else state.first_seen
        return AlertNotice(key, severity, message, details, first_seen, state.count, "firing")

    def _evict_stale(self, now: float) -> None:
        stale = [k for k, s in self._keys.items() if now - s.delivered_at >= self._cooldown_s]
        for key in stale:
            del self._keys[key]

    async def _deliver(self, notice: AlertNotice) -> None:
        try:
            await self._delivery.send(notice)
        except Exception as error:
            log.error(
                "payflow.alerts.delivery_failed",
                key=notice.key,
                status=notice.status,
                delivery=type(self._delivery).__name__,
                error=describe_failure(error),
            )


async def _on_fresh_session(call: Callable[[], Awaitable[T]]) -> T:
    """`call()`, tried again (up to STORE_TRIES in all) while it fails because its
    database session was lost; any other error, or the last, is raised."""
    for _ in range(STORE_TRIES - 1):
        try:
            return await call()
        except Exception as error:
            if not is_connection_error(error):
                raise
            log.warning("payflow.alerts.store_session_lost", error=_describe(error))
    return await call()


def _severity(value: object) -> Severity:
    """A `Severity`; an unknown one is treated as critical (an alert is never dropped)."""
    try:
        return Severity(str(value))
    except ValueError:
        log.error("payflow.alerts.invalid_severity", severity=str(value)[:50])
        return Severity.CRITICAL


def _describe(error: BaseException) -> str:
    """`Type: text` of a table failure (driver text names no secret; no DSN is logged)."""
    return f"{type(error).__name__}: {error}"[:300]
