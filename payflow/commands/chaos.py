"""`payflow chaos`: the whole system under load and overlapping faults, then a verdict;
`--soak SECONDS`: the load at half capacity with no faults, memory and latency sampled
(docs/reliability.md)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from payflow.commands.lab import require_lab
from payflow.errors import ToolMissing

T = TypeVar("T")


async def _until_terminated(run: Coroutine[Any, Any, T]) -> T:
    """Await `run`; SIGTERM cancels it like Ctrl-C does (asyncio.run's own SIGINT
    handler), so its teardown stops every private service and process."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await run


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
    ha: Annotated[
        bool,
        typer.Option(
            "--ha",
            help="Over the HA lab's hosts (root, network namespaces): database failovers, "
            "broker nodes, an API and a worker host lost; RPO and RTO figures",
        ),
    ] = False,
    rate: Annotated[float, typer.Option(min=0.1, help="--ha: first attempts per second")] = 4.0,
    cycles: Annotated[
        int, typer.Option(min=1, help="--ha: fault cycles at least (each kind once a cycle)")
    ] = 1,
) -> None:
    """Run payflow as real processes on private PostgreSQL, RabbitMQ and Redis under a
    seeded load and seeded faults; exit 1 unless exactly-once held. Last line key=value.

    With --ha the processes run on hosts made of network namespaces (PostgreSQL with
    automatic failover, a three-node RabbitMQ cluster, two APIs behind HAProxy), paced by
    --rate (--load-s and --log-dir are the one-host run's); exit 2 when that lab cannot
    run here."""
    if ha and soak is not None:
        raise typer.BadParameter("a soak runs on one host; --ha and --soak are two runs")
    require_lab("payflow chaos")
    from payflow_lab.chaos.cluster import ClusterError

    console = Console(soft_wrap=True, highlight=False)
    try:
        if ha:
            ok = _run_ha(console, events, seed, rate, cycles, concurrency, drain_limit_s, keep)
        else:
            ok = _run(
                console, events, seed, load_s, concurrency, drain_limit_s, soak, log_dir, keep
            )
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("chaos: interrupted; every private service and process was stopped")
        raise typer.Exit(130) from None
    except (ToolMissing, ClusterError) as error:  # a tool or private service is missing
        console.print(f"chaos: cannot run: {error}", style="red", markup=False)
        raise typer.Exit(1) from None
    if not ok:
        raise typer.Exit(1)


def _run_ha(
    console: Console,
    events: int,
    seed: int,
    rate: float,
    cycles: int,
    concurrency: int,
    drain_limit_s: float,
    keep: bool,
) -> bool:
    from payflow_lab.ha.run import HaChaosConfig, HaUnavailable, run_ha_chaos

    config = HaChaosConfig(
        events=events,
        seed=seed,
        rate=rate,
        cycles=cycles,
        concurrency=concurrency,
        drain_limit_s=drain_limit_s,
        keep=keep,
    )
    try:
        return asyncio.run(_until_terminated(run_ha_chaos(config, console))).ok
    except HaUnavailable as error:
        console.print(f"chaos --ha: cannot run here: {error}", markup=False)
        raise typer.Exit(2) from None


def _run(
    console: Console,
    events: int,
    seed: int,
    load_s: float,
    concurrency: int,
    drain_limit_s: float,
    soak: float | None,
    log_dir: Path,
    keep: bool,
) -> bool:
    from payflow_lab.chaos.run import ChaosConfig, run_chaos
    from payflow_lab.chaos.soak import SoakConfig, run_soak

    if soak is not None:
        soak_config = SoakConfig(seconds=soak, seed=seed, log_dir=log_dir)
        return asyncio.run(_until_terminated(run_soak(soak_config, console)))
    config = ChaosConfig(
        events=events,
        seed=seed,
        load_s=load_s or None,
        concurrency=concurrency,
        drain_limit_s=drain_limit_s,
        log_dir=log_dir,
        keep=keep,
    )
    return asyncio.run(_until_terminated(run_chaos(config, console))).exactly_once
