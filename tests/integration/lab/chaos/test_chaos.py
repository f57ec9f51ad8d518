"""`payflow chaos` short version: ~2,000 requests under every fault, then the verdict.

The run builds its own PostgreSQL cluster, RabbitMQ node, Redis and anvil on free ports
(the shared services are never touched), drives the seven role processes (with the chain
scanner) through the public API with a seeded load (deposits are anvil transfers) while a
seeded schedule kills, restarts, stalls and cuts, and then asserts the verdict: nothing
lost, nothing duplicated, balances equal to the model, recon clean, webhooks settled
exactly one way, every merchant event delivered to the merchant's webhook endpoint, every
dead letter explained.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console

from payflow_lab.anvil import AnvilNotInstalled, find_anvil
from payflow_lab.chaos.faults import MAJOR
from payflow_lab.chaos.run import ChaosConfig, run_chaos


def _no_anvil() -> bool:
    try:
        find_anvil()
    except AnvilNotInstalled:
        return True
    return False


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("redis-server") is None
        or not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists()
        or not Path("/usr/lib/postgresql/15/bin/initdb").exists()
        or _no_anvil(),
        reason="needs PostgreSQL 15 binaries, rabbitmq-server, redis-server and anvil",
    ),
]


async def test_short_chaos_run_is_exactly_once(tmp_path: Path) -> None:
    config = ChaosConfig(events=2000, seed=11, load_s=45.0, log_dir=tmp_path / "logs")
    with (tmp_path / "report.txt").open("w") as out:
        result = await run_chaos(config, Console(file=out, soft_wrap=True))

    fields, verdict = result.fields, result.verdict
    report = (tmp_path / "report.txt").read_text() + f"\n{fields}\n{verdict.notes}"
    # at least one of each fault actually ran
    for kind in (*MAJOR, "kill9_worker", "kill9_relay"):
        assert result.faults[kind] >= 1, (kind, report)
    assert fields["events"] >= 2000
    assert fields["lost"] == 0, report
    assert fields["duplicated"] == 0, report
    assert fields["recon"] == "clean", report
    assert verdict.refused == 0, report
    assert verdict.wrong_outcome == 0, report
    assert verdict.balance_mismatches == 0, report
    assert verdict.webhook_both == 0 and verdict.webhook_wrong == 0, report
    assert verdict.dlq_unexplained == 0, report
    # every merchant event reached the merchant's webhook endpoint under its id, delivered
    assert verdict.endpoint_events >= 1000, report
    assert verdict.endpoint_undelivered == 0 and verdict.endpoint_unseen == 0, report
    # the receiver's always-500 endpoints dead-lettered their webhooks: the check ran on rows
    assert verdict.dlq_by_source["webhook"] > 0, report
    # one live retry chain per webhook job: one dead letter per dead webhook
    assert max(verdict.dlq_per_webhook.values()) == 1, report
    assert isinstance(fields["max_drain_s"], float), report
    assert fields["exactly_once"] == "yes", report
