"""Alchemy Address Activity payloads, shaped after Alchemy's documented example."""

from __future__ import annotations

from typing import Any

USDC_CONTRACT = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
NFT_CONTRACT = "0x5180db8f5c931aae63c74266b211f580155ecac8"  # from Alchemy's NFT example


def token_activity(
    to_address: str,
    raw_value: int,
    *,
    tx_hash: str = "0x" + "7a" * 32,
    log_index: int = 0x6E,
    asset: str | None = "USDC",
    decimals: int | None = 6,
    removed: bool = False,
    contract: str = USDC_CONTRACT,
) -> dict[str, Any]:
    return {
        "blockNum": "0xdf34a3",
        "hash": tx_hash,
        "fromAddress": "0x503828976d22510aad0201ac7ec88293211d23da",
        "toAddress": to_address,
        "value": raw_value / 10 ** (decimals or 0),
        "erc721TokenId": None,
        "erc1155Metadata": None,
        "asset": asset,
        "category": "token",
        "rawContract": {
            "rawValue": "0x" + format(raw_value, "064x"),
            "address": contract,
            "decimals": decimals,
        },
        "typeTraceAddress": None,
        "log": {
            "address": contract,
            "topics": [
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                "0x000000000000000000000000503828976d22510aad0201ac7ec88293211d23da",
                "0x000000000000000000000000" + to_address[2:],
            ],
            "data": "0x" + format(raw_value, "064x"),
            "blockNumber": "0xdf34a3",
            "transactionHash": tx_hash,
            "transactionIndex": "0x46",
            "blockHash": "0x" + "d4" * 32,
            "logIndex": hex(log_index),
            "removed": removed,
        },
    }


def eth_activity(to_address: str, wei: int, *, tx_hash: str = "0x" + "5b" * 32) -> dict[str, Any]:
    return {
        "blockNum": "0xdf34a4",
        "hash": tx_hash,
        "fromAddress": "0x503828976d22510aad0201ac7ec88293211d23da",
        "toAddress": to_address,
        "value": wei / 10**18,
        "asset": "ETH",
        "category": "external",
        "rawContract": {"rawValue": hex(wei), "address": None, "decimals": 18},
    }


def webhook(*activities: dict[str, Any], network: str = "ETH_MAINNET") -> dict[str, Any]:
    return {
        "webhookId": "wh_octjglnywaupz6th",
        "id": "whevt_ogrc5v64myey69ux",
        "createdAt": "2024-01-23T07:51:07.945Z",
        "type": "ADDRESS_ACTIVITY",
        "event": {"network": network, "activity": list(activities)},
    }


def internal_activity(
    to_address: str, wei: int, *, tx_hash: str, trace: str | None
) -> dict[str, Any]:
    """An internal ETH transfer; `trace` is `typeTraceAddress` (Alchemy may omit it)."""
    activity = {**eth_activity(to_address, wei, tx_hash=tx_hash), "category": "internal"}
    if trace is not None:
        activity["typeTraceAddress"] = trace
    return activity


def nft_activity(to_address: str, *, tx_hash: str = "0x" + "3e" * 32) -> dict[str, Any]:
    """Alchemy's documented ERC-721 activity: category token, erc721TokenId set,
    rawValue "0x" and no decimals."""
    return {
        "fromAddress": "0x0000000000000000000000000000000000000000",
        "toAddress": to_address,
        "blockNum": "0xdf3f2b",
        "hash": tx_hash,
        "erc721TokenId": "0x0000000000000000000000000000000000000000000000000000000000000114",
        "erc1155Metadata": None,
        "asset": None,
        "category": "token",
        "rawContract": {"rawValue": "0x", "address": NFT_CONTRACT, "decimals": None},
        "typeTraceAddress": None,
        "log": {
            "address": NFT_CONTRACT,
            "topics": [
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                "0x0000000000000000000000000000000000000000000000000000000000000000",
                "0x000000000000000000000000" + to_address[2:].lower(),
                "0x0000000000000000000000000000000000000000000000000000000000000114",
            ],
            "data": "0x",
            "blockNumber": "0xdf3f2b",
            "transactionHash": tx_hash,
            "transactionIndex": "0x1",
            "blockHash": "0x" + "b1" * 32,
            "logIndex": "0x2",
            "removed": False,
        },
    }
