"""`payflow recon --gateway --date YYYY-MM-DD`: print the gateway reconciliation."""

from __future__ import annotations

from datetime import date

from redis.asyncio import Redis
from rich.console import Console

from payflow.config import Settings
from payflow.db.pool import tool_pool
from payflow.errors import RetryableError
from payflow.payments.gateway import EmulatedGateway
from payflow.payments.gateway_recon import reconcile_gateway

SHOWN = 50


async def run_gateway_recon(settings: Settings, day: date) -> bool:
    """Reconcile the gateway emulator's settled charges of `day`; True when clean."""
    console = Console(soft_wrap=True, markup=False, highlight=False)
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    gateway = EmulatedGateway(
        redis,
        settings.redis.redis_key_prefix,
        0.0,
        0.0,
        settings.emulator.gateway_failure_rate,
        settings.emulator.gateway_seed,
    )
    try:
        async with tool_pool(settings.database) as pool:
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
