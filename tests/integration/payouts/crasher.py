"""A payout engine process that dies by SIGKILL at a chosen point (a real kill -9).

Usage: python -m tests.integration.payouts.crasher <point> with DATABASE_URL,
PAYOUT_CHAIN, EVM_CHAINS, ETH_HOT_WALLET_KEY in the environment.
`after_sign`: the signed raw tx is committed, nothing was broadcast.
`after_broadcast`: the node accepted the tx, nothing recorded the send.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from payflow.chain.payouts import engine as engine_module
from payflow.chain.payouts.engine import PayoutEngine
from payflow.chain.payouts.job import payout_oracle
from payflow.chain.payouts.signer import wallets_from_settings
from payflow.config import load_settings
from payflow.db.pool import create_pool


def _die(*_: Any, **__: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


async def main(point: str) -> None:
    settings = load_settings()
    if point == "after_sign":
        engine_module.broadcast_answer = _die  # type: ignore[assignment]
    else:
        PayoutEngine.mark_sent = _die  # type: ignore[method-assign,assignment]
    pool = await create_pool(settings)
    async with payout_oracle(settings, None, chains=settings, redis_settings=settings) as oracle:
        assert oracle is not None
        rpc = oracle.clients[settings.payout_chain]
        engine = PayoutEngine(
            pool,
            settings,
            rpc,
            wallets_from_settings(settings),
            finality=oracle,
            database=settings,
            chains=settings,
        )
        await engine.tick()
    raise SystemExit("the crash point was never reached")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
