"""Deposit addresses derived from a watch-only xpub: the addresses
equal anvil's own accounts for its mnemonic and path, each request takes the next index
(distinct under concurrent processes), Idempotency-Key replays, tenancy, and a clear
problem when no xpub is configured."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from bip32 import BIP32  # type: ignore[import-untyped]
from eth_account.hdaccount import seed_from_mnemonic
from eth_keys.datatypes import PrivateKey
from eth_utils.address import to_checksum_address
from fastapi import FastAPI

from payflow.app import create_app
from payflow.chain.watch.derivation import XpubInvalid, derive_address
from payflow.config import Settings
from payflow_lab.anvil import DEFAULT_ACCOUNTS, DEFAULT_MNEMONIC

from .conftest import API_KEY
from .derive_worker import allocate_after_barrier


def mnemonic_xpub() -> str:
    """The account-level xpub (m/44'/60'/0') of anvil's default mnemonic."""
    seed = seed_from_mnemonic(DEFAULT_MNEMONIC, "")
    xpub: str = BIP32.from_seed(seed).get_xpub_from_path("m/44'/60'/0'")
    return xpub


XPUB = mnemonic_xpub()


@pytest.fixture
async def xpub_client(api_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(api_settings.model_copy(update={"eth_deposit_xpub": XPUB}))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://payflow.test",
            headers={"X-API-Key": API_KEY},
        ) as client,
    ):
        yield client


async def _account(client: httpx.AsyncClient, asset: str = "ETH") -> str:
    response = await client.post("/api/v1/accounts", json={"asset": asset})
    assert response.status_code == 201, response.text
    account_id: str = response.json()["account_id"]
    return account_id


def _derive(client: httpx.AsyncClient, account_id: str, key: str, chain: str = "ETH_MAINNET"):  # type: ignore[no-untyped-def]
    return client.post(
        f"/api/v1/accounts/{account_id}/deposit-addresses",
        json={"chain": chain},
        headers={"Idempotency-Key": key},
    )


def test_derived_addresses_equal_anvil_accounts_for_the_same_mnemonic() -> None:
    derived = [derive_address(XPUB, i) for i in range(len(DEFAULT_ACCOUNTS))]
    assert [a.lower() for a in derived] == list(DEFAULT_ACCOUNTS)
    assert derived == [to_checksum_address(a) for a in DEFAULT_ACCOUNTS]
    private = BIP32.from_seed(seed_from_mnemonic(DEFAULT_MNEMONIC, "")).get_xpriv_from_path(
        "m/44'/60'/0'"
    )
    with pytest.raises(XpubInvalid) as refused:
        derive_address(private, 0)
    assert private not in str(refused.value)


async def test_owner_derives_the_next_address_idempotently(
    xpub_client: httpx.AsyncClient, api_settings: Settings
) -> None:
    account = await _account(xpub_client)
    first = await _derive(xpub_client, account, "addr-1")
    second = await _derive(xpub_client, account, "addr-2")
    assert first.status_code == second.status_code == 201, first.text
    assert first.json() == {
        "chain": "ETH_MAINNET",
        "address": DEFAULT_ACCOUNTS[0],
        "checksum_address": to_checksum_address(DEFAULT_ACCOUNTS[0]),
        "account_id": account,
        "derivation_path": "m/44'/60'/0'/0/0",
    }
    assert second.json()["checksum_address"] == to_checksum_address(DEFAULT_ACCOUNTS[1])
    replay = await _derive(xpub_client, account, "addr-1")
    assert replay.status_code == 201 and replay.json() == first.json()
    reused = await _derive(xpub_client, account, "addr-1", chain="OTHER_CHAIN")
    assert reused.status_code == 409
    assert reused.json()["type"].endswith("idempotency-key-reused")
    conn = await asyncpg.connect(api_settings.database_url)
    try:
        rows = await conn.fetch(
            "SELECT address, derivation_index FROM deposit_addresses WHERE account_id = $1"
            " ORDER BY derivation_index",
            uuid.UUID(account),
        )
    finally:
        await conn.close()
    assert [(r["address"], r["derivation_index"]) for r in rows] == [
        (DEFAULT_ACCOUNTS[0], 0),
        (DEFAULT_ACCOUNTS[1], 1),
    ]


async def test_a_retry_after_the_keys_record_expired_gets_the_same_address(
    xpub_client: httpx.AsyncClient, api_settings: Settings
) -> None:
    """Once the key's idempotency record is gone (retention), the same key derives no
    second address. The address row keeps the key: a retry gets the same address, and the
    key on another account is a 409; no index is spent."""
    account, other = await _account(xpub_client), await _account(xpub_client)
    first = await _derive(xpub_client, account, "derive-once")
    assert first.status_code == 201, first.text
    conn = await asyncpg.connect(api_settings.database_url)
    try:
        await conn.execute("DELETE FROM api_idempotency WHERE key = 'derive-once'")
        again = await _derive(xpub_client, account, "derive-once")
        assert again.status_code == 201, again.text
        assert again.json() == first.json()
        await conn.execute("DELETE FROM api_idempotency WHERE key = 'derive-once'")
        elsewhere = await _derive(xpub_client, other, "derive-once")
        assert elsewhere.status_code == 409, elsewhere.text
        count = await conn.fetchval(
            "SELECT count(*) FROM deposit_addresses WHERE account_id = ANY($1::uuid[])",
            [uuid.UUID(account), uuid.UUID(other)],
        )
    finally:
        await conn.close()
    assert count == 1
    fresh = await _derive(xpub_client, other, "derive-other")
    assert fresh.json()["derivation_path"] == "m/44'/60'/0'/0/1"  # index 1 was never spent


async def test_derivation_refusals_are_clear_problems(
    xpub_client: httpx.AsyncClient, client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    account = await _account(xpub_client)
    foreign = await _derive(other, account, "k1")
    assert foreign.status_code == 404
    no_key = await xpub_client.post(
        f"/api/v1/accounts/{account}/deposit-addresses", json={"chain": "ETH_MAINNET"}
    )
    assert no_key.status_code == 422
    assert no_key.json()["errors"][0]["field"] == "header.Idempotency-Key"
    unknown = await _derive(xpub_client, account, "k2", chain="NO_SUCH_CHAIN")
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "body.chain"
    eur = await _account(xpub_client, "EUR")
    wrong_asset = await _derive(xpub_client, eur, "k3")
    assert wrong_asset.status_code == 422
    unconfigured = await _derive(client, account, "k4")  # the app without ETH_DEPOSIT_XPUB
    assert unconfigured.status_code == 503
    assert unconfigured.headers["content-type"].startswith("application/problem+json")
    assert unconfigured.json()["type"].endswith("/derivation-unavailable")
    # Merchant keys still may not import a given address (admin only).
    imported = await xpub_client.post(
        f"/api/v1/accounts/{account}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": "0x" + "ab" * 20},
    )
    assert imported.status_code == 403


@pytest.mark.slow
def test_concurrent_processes_get_distinct_indexes(
    api_settings: Settings, xpub_client: httpx.AsyncClient
) -> None:
    account = asyncio.run(_account_direct(api_settings.database_url))
    processes, each = 4, 5
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        barrier = manager.Barrier(processes)
        with context.Pool(processes) as pool:
            results = pool.map(
                allocate_after_barrier,
                [(api_settings.database_url, account, XPUB, each, barrier)] * processes,
            )
    indexes = sorted(i for batch in results for i, _ in batch)
    assert indexes == list(range(processes * each))
    addresses = {a for batch in results for _, a in batch}
    assert addresses == {derive_address(XPUB, i).lower() for i in indexes}


async def _account_direct(database_url: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        merchant = await conn.fetchval("SELECT id FROM merchants LIMIT 1")
        account = await conn.fetchval(
            "INSERT INTO accounts (merchant_id, asset) VALUES ($1, 'ETH') RETURNING id", merchant
        )
    finally:
        await conn.close()
    return str(account)


async def test_the_answer_names_the_path_of_the_keys_own_account(api_settings: Settings) -> None:
    """An account-level key of account 1 derives m/44'/60'/1'/0/i, and says so: the path
    follows the key's account, never m/44'/60'/0'/… whatever the key."""
    root = BIP32.from_seed(seed_from_mnemonic(DEFAULT_MNEMONIC, ""))
    account_one = root.get_xpub_from_path("m/44'/60'/1'")
    app: FastAPI = create_app(api_settings.model_copy(update={"eth_deposit_xpub": account_one}))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://payflow.test",
            headers={"X-API-Key": API_KEY},
        ) as client,
    ):
        derived = await _derive(client, await _account(client), "account-one")
    assert derived.status_code == 201, derived.text
    body = derived.json()
    assert body["derivation_path"] == "m/44'/60'/1'/0/0"
    expected = PrivateKey(root.get_privkey_from_path("m/44'/60'/1'/0/0")).public_key
    assert body["checksum_address"] == expected.to_checksum_address()
