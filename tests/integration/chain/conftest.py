"""Fixtures on a real Ethereum node: anvil (npm `@foundry-rs/anvil`, pinned, `make anvil`).

`anvil` is one node per test module's request (function scope, fresh chain state: tests
reorg and kill it); `--slots-in-an-epoch 1` makes `finalized` two blocks behind latest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from payflow_lab.anvil import AnvilNode


@pytest.fixture
async def anvil(tmp_path) -> AsyncIterator[AnvilNode]:  # type: ignore[no-untyped-def]
    node = AnvilNode(log_path=str(tmp_path / "anvil.log")).start()
    try:
        yield node
    finally:
        await node.aclose()
