"""The anvil harness itself: finality two blocks behind head, reorgs, the test token."""

from __future__ import annotations

from payflow.chain.rpc import hex_int
from payflow.chain.transfers import TRANSFER_TOPIC, topic_address
from payflow_lab.anvil import DEFAULT_ACCOUNTS, WEI_PER_ETH, AnvilNode


async def test_finalized_trails_latest_by_two_blocks(anvil: AnvilNode) -> None:
    await anvil.mine(10)
    assert await anvil.head() == 10
    assert await anvil.finalized() == 8


async def test_a_reorg_drops_a_transaction_before_finality(anvil: AnvilNode) -> None:
    await anvil.mine(5)
    tx = await anvil.send_eth(DEFAULT_ACCOUNTS[5], WEI_PER_ETH)
    assert (await anvil.receipt(tx))["status"] == "0x1"
    await anvil.reorg(1)
    assert await anvil.rpc.get_receipt(tx) is None


async def test_token_transfers_emit_logs_in_transaction_order(anvil: AnvilNode) -> None:
    token = await anvil.deploy_token(decimals=6)
    await anvil.token_mint(token, DEFAULT_ACCOUNTS[0], 10_000_000)
    tx = await anvil.token_batch_transfer(
        token, [(DEFAULT_ACCOUNTS[3], 1_500_000), (DEFAULT_ACCOUNTS[4], 2_000_000)]
    )
    receipt = await anvil.receipt(tx)
    logs = [log for log in receipt["logs"] if log["topics"][0] == TRANSFER_TOPIC]
    assert [topic_address(log["topics"][2]) for log in logs] == list(DEFAULT_ACCOUNTS[3:5])
    assert [hex_int(log["data"]) for log in logs] == [1_500_000, 2_000_000]
    assert await anvil.token_balance(token, DEFAULT_ACCOUNTS[4]) == 2_000_000
