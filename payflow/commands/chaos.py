"""`payflow chaos`: the whole system under load and overlapping faults, then a verdict;
`--soak SECONDS`: the load at half capacity with no faults, memory and latency sampled
(docs/reliability.md)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM tears down like Ctrl-C: every private service stops


def chaos(
    events: Annotated[
        int, typer.Option(min=50, help="HTTP requests of the load (first attempts)")
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the load and the fault schedule")] = 1,
    load_s: Annotated[
        float, typer.Option(min=0, help="Pace the load over this many seconds (0: full speed)")
    ] = 45.0,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight")] = 16,
    drain_limit_s: Annotated[float, typer.Option(min=1, help="Longest wait for quiet")] = 1800.0,
    soak: Annotated[
        float | None, typer.Option(metavar="SECONDS", help="Soak: half capacity, no faults")
    ] = None,
    log_dir: Annotated[Path, typer.Option(help="Where the processes' logs go")] = Path(
        "chaos-logs"
    ),
    keep: Annotated[bool, typer.Option(help="Keep the private services' data directory")] = False,
) -> None:
    """Run payflow as real processes on private PostgreSQL, RabbitMQ and Redis under a
    seeded load and seeded faults; exit 1 unless exactly-once held. Last line key=value."""
    from payflow.chaos.run import ChaosConfig, run_chaos
    from payflow.chaos.soak import SoakConfig, run_soak

    signal.signal(signal.SIGTERM, _interrupt)
    console = Console(soft_wrap=True, highlight=False)
    if soak is not None:
        ok = asyncio.run(run_soak(SoakConfig(seconds=soak, seed=seed, log_dir=log_dir), console))
    else:
        config = ChaosConfig(
            events=events,
            seed=seed,
            load_s=load_s or None,
            concurrency=concurrency,
            drain_limit_s=drain_limit_s,
            log_dir=log_dir,
            keep=keep,
        )
        ok = asyncio.run(run_chaos(config, console)).exactly_once
    if not ok:
        raise typer.Exit(1)
