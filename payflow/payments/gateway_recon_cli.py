"""`payflow recon --gateway --date YYYY-MM-DD`: print the gateway reconciliation."""

from __future__ import annotations

from datetime import date

from redis.asyncio import Redis
from rich.console import Console

from payflow.config import DatabaseSettings, EmulatorSettings, RedisSettings
from payflow.db.pool import tool_pool
from payflow.errors import RetryableError
from payflow.payments.gateway import EmulatedGateway
from payflow.payments.gateway_recon import reconcile_gateway

SHOWN = 50


async def run_gateway_recon(
    database: DatabaseSettings,
    day: date,
    *,
    redis_settings: RedisSettings,
    emulator: EmulatorSettings,
) -> bool:
    """Reconcile the gateway emulator's settled charges of `day` (a UTC date) with that
    day's `gateway:<currency>` legs and print the findings; True when clean, False when
    a finding or an unreachable Redis or PostgreSQL leaves it unknown."""
    console = Console(soft_wrap=True, markup=False, highlight=False)
    redis = Redis.from_url(redis_settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    gateway = EmulatedGateway(
        redis,
        redis_settings.redis_key_prefix,
        0.0,
        0.0,
        emulator.gateway_failure_rate,
        emulator.gateway_seed,
    )
    try:
        async with tool_pool(database) as pool:
            report = await reconcile_gateway(pool, gateway, day)
    except RetryableError as error:
        console.print(f"recon gateway date={day.isoformat()} unavailable: {error}")
        return False
    finally:
        await redis.aclose()
    console.print(report.summary())
    for label, items in (
        ("missing from the books (settled by the gateway)", report.missing),
        ("extra in the books (not in the gateway's record)", report.extra),
        ("different amount", report.different),
        ("settled and booked on different days (not a finding)", report.other_day),
    ):
        for item in items[:SHOWN]:
            console.print(f"  {label}: {item}")
    return report.clean
