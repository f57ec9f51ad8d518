"""The `scanner` role's loop: every configured chain, stepped while behind, polled
once caught up, waiting (never exiting) through node and database outages.

What an operator must learn is raised through the alert sink (and resolved when it
clears): `chain.node:<chain>` (critical) while the node is another network or lacks the
policy's tag (that chain is not walked), `chain.scanner_lag:<chain>` (warning) while
the head lag exceeds `ETH_SCANNER_MAX_LAG_BLOCKS` whatever the cause (a failing step, a
provider limit, a slow database)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import structlog

from payflow.alerts import AlertSink, LogAlertSink, Severity
from payflow.chain.finality import FinalityOracle
from payflow.chain.identity import NodeMisconfigured, alert_key
from payflow.chain.rpc import RpcError
from payflow.chain.watch.logs import LogsTooDense
from payflow.chain.watch.scanner import Scanner
from payflow.config import ChainSettings, DatabaseSettings
from payflow.errors import RetryableError, classify

log = structlog.get_logger("payflow.chain.scanner")


def lag_alert_key(chain: str) -> str:
    """The alert raised while the scanner's head lag on `chain` is too large."""
    return f"chain.scanner_lag:{chain}"


async def run_scanner(
    pool: asyncpg.Pool,
    settings: ChainSettings,
    oracle: FinalityOracle,
    stop: asyncio.Event,
    alerts: AlertSink | None = None,
    *,
    database: DatabaseSettings,
) -> None:
    """Scan every configured chain until `stop`: straight on while behind, every
    `ETH_SCANNER_POLL_INTERVAL_S` once caught up. A node outage, an open breaker or a
    busy database is logged and retried after the interval (the cursor stays put, so
    nothing is missed); nothing here ends the role but `stop`. `settings` is the chain
    slice; the scanner's transactions keep `database`'s bounds."""
    scanner = Scanner(pool, settings, oracle, database=database)
    try:
        await _loop(scanner, oracle, settings, stop, _Edges(alerts or LogAlertSink()))
    finally:
        await scanner.aclose()


async def _loop(
    scanner: Scanner,
    oracle: FinalityOracle,
    settings: ChainSettings,
    stop: asyncio.Event,
    alerts: _Edges,
) -> None:
    while not stop.is_set():
        busy = False
        for chain in oracle.configs:
            if stop.is_set():
                break
            try:
                result = await scanner.step(chain)
                busy = busy or not result.caught_up
                await alerts.resolve(alert_key(chain))
            except NodeMisconfigured as error:
                await alerts.fire(alert_key(chain), Severity.CRITICAL, str(error))
            except (
                RetryableError,
                RpcError,
                LogsTooDense,
                OSError,
                asyncpg.PostgresError,
            ) as error:
                kind = classify(error)
                log.warning(
                    "payflow.scanner.waiting",
                    chain=chain,
                    error_type=type(kind).__name__,
                    error=str(kind)[:200],
                )
            except Exception as error:  # the role must outlive a bug in one step
                log.exception(
                    "payflow.scanner.step_failed", chain=chain, error_type=type(error).__name__
                )
            await _lag_alert(scanner, settings, alerts, chain)
        if not busy:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=settings.eth_scanner_poll_interval_s)


class _Edges:
    """The sink, told only of changes: a key is resolved once after it fired, and once
    at the first clean step (an incident left open by a previous process), instead of a
    resolution written every few seconds."""

    def __init__(self, sink: AlertSink) -> None:
        self.sink = sink
        self.open: set[str] = set()
        self.known: set[str] = set()

    async def fire(
        self, key: str, severity: Severity, message: str, *, details: Any = None
    ) -> None:
        self.open.add(key)
        self.known.add(key)
        await self.sink.fire(key, severity, message, details=details)

    async def resolve(self, key: str) -> None:
        if key in self.open or key not in self.known:
            self.known.add(key)
            self.open.discard(key)
            await self.sink.resolve(key)


async def _lag_alert(scanner: Scanner, settings: ChainSettings, alerts: _Edges, chain: str) -> None:
    """Fire or resolve `chain.scanner_lag:<chain>` from the last lag the scanner saw."""
    lag = scanner.lag.get(chain)
    if lag is None:
        return
    if lag > settings.eth_scanner_max_lag_blocks:
        await alerts.fire(
            lag_alert_key(chain),
            Severity.WARNING,
            f"the scanner of {chain} is {lag} blocks behind the node's head"
            f" (> ETH_SCANNER_MAX_LAG_BLOCKS={settings.eth_scanner_max_lag_blocks})",
            details={"lag_blocks": lag},
        )
    else:
        await alerts.resolve(lag_alert_key(chain))
