"""The `scanner` role's loop: every configured chain, stepped while behind, polled
once caught up, waiting (never exiting) through node and database outages."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import structlog

from payflow.chain.finality import FinalityOracle
from payflow.chain.rpc import RpcError
from payflow.chain.watch.scanner import Scanner
from payflow.config import Settings
from payflow.errors import RetryableError, classify

log = structlog.get_logger("payflow.chain.scanner")


async def run_scanner(
    pool: asyncpg.Pool, settings: Settings, oracle: FinalityOracle, stop: asyncio.Event
) -> None:
    """Scan every configured chain until `stop`: straight on while behind, every
    `ETH_SCANNER_POLL_INTERVAL_S` once caught up. A node outage, an open breaker or a
    busy database is logged and retried after the interval (the cursor stays put, so
    nothing is missed); nothing here ends the role but `stop`."""
    scanner = Scanner(pool, settings, oracle)
    try:
        await _loop(scanner, oracle, settings, stop)
    finally:
        await scanner.aclose()


async def _loop(
    scanner: Scanner, oracle: FinalityOracle, settings: Settings, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        busy = False
        for chain in oracle.configs:
            if stop.is_set():
                break
            try:
                result = await scanner.step(chain)
                busy = busy or not result.caught_up
            except (RetryableError, RpcError, OSError, asyncpg.PostgresError) as error:
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
        if not busy:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=settings.eth_scanner_poll_interval_s)
