"""Accounts, ledger entries, deposit addresses, withdrawals and event outcomes."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import orjson
from eth_utils import to_checksum_address

from payflow.config import Settings
from payflow.ledger.posting import post_event
from tests.integration.ingress.alchemy import USDC_CONTRACT
from tests.integration.ingress.ingress_support import credit_as_the_node_would

from .conftest import signed


def key() -> dict[str, str]:
    return {"Idempotency-Key": uuid.uuid4().hex}


async def _account(client: httpx.AsyncClient, asset: str = "USDC") -> str:
    response = await client.post("/api/v1/accounts", json={"asset": asset})
    assert response.status_code == 201, response.text
    account_id: str = response.json()["account_id"]
    return account_id


async def _report_deposit(
    anon: httpx.AsyncClient, admin: httpx.AsyncClient, account_id: str, amount: str
) -> str:
    """A provider's signed report of a USDC deposit to a fresh address of the account;
    returns the stored event id the provider webhook answered."""
    address = "0x" + uuid.uuid4().hex[:20] * 2
    await admin.post(
        f"/api/v1/accounts/{account_id}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": address},
    )
    body = orjson.dumps(
        {
            "event_id": f"dep-{uuid.uuid4().hex}",
            "event_type": "deposit",
            "to_address": address,
            "asset": "USDC",
            "amount": amount,
            "tx_hash": "0x" + uuid.uuid4().hex * 2,
            "contract_address": USDC_CONTRACT,
        }
    )
    response = await anon.post("/api/v1/webhooks/provider", content=body, headers=signed(body))
    [event] = response.json()["events"]
    assert event["result"] == "recorded"
    stored_id: str = event["event_id"]
    return stored_id


async def _deposit(
    app: Any, anon: httpx.AsyncClient, admin: httpx.AsyncClient, account_id: str, amount: str
) -> None:
    await _report_deposit(anon, admin, account_id, amount)
    await credit_as_the_node_would(app)  # only the node's word credits


async def test_create_and_read_account(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/accounts", json={"asset": "USDC"})
    body = response.json()
    assert response.status_code == 201
    assert body["balance"] == "0.000000"
    assert body["status"] == "active"
    read = await client.get(f"/api/v1/accounts/{body['account_id']}")
    assert read.json() == body


async def test_unknown_asset_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/v1/accounts", json={"asset": "DOGE"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body.asset"


async def test_accounts_are_tenant_scoped(
    client: httpx.AsyncClient, other: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id = await _account(client)
    assert (await other.get(f"/api/v1/accounts/{account_id}")).status_code == 404
    assert (await other.get(f"/api/v1/accounts/{account_id}/entries")).status_code == 404
    withdrawal = await other.post(
        f"/api/v1/accounts/{account_id}/withdrawals", json={"amount": "1"}, headers=key()
    )
    assert withdrawal.status_code == 404
    assert (await admin.get(f"/api/v1/accounts/{account_id}")).status_code == 200


async def test_deposit_address_unique_per_chain(
    client: httpx.AsyncClient, admin: httpx.AsyncClient, api_settings: Settings
) -> None:
    first, second = await _account(client), await _account(client)
    address = {"chain": "ETH_MAINNET", "address": "0x" + "12" * 20}
    url = "/api/v1/accounts/{}/deposit-addresses"
    assert (await admin.post(url.format(first), json=address)).status_code == 201
    taken = await admin.post(url.format(second), json=address)
    assert taken.status_code == 409
    # An import is checked against the token registry like a derivation: a chain payflow
    # does not know (or one without the account's asset) could never credit the account.
    unknown = await admin.post(url.format(second), json={**address, "chain": "BASE_MAINNET"})
    assert unknown.status_code == 422
    assert unknown.json()["errors"][0] == {
        "field": "body.chain",
        "message": "unknown chain BASE_MAINNET",
    }
    owner = await asyncpg.connect(api_settings.migration_url())
    try:
        await owner.execute(
            "INSERT INTO chains (chain, native_asset, native_decimals) VALUES"
            " ('BASE_MAINNET', 'ETH', 18)"
        )
        no_usdc = await admin.post(url.format(second), json={**address, "chain": "BASE_MAINNET"})
        assert no_usdc.status_code == 422
        assert "BASE_MAINNET carries no registered USDC" in no_usdc.json()["detail"]
        await owner.execute(
            "INSERT INTO chain_tokens (chain, contract, asset, decimals)"
            " VALUES ('BASE_MAINNET', $1, 'USDC', 6)",
            "0x" + "ab" * 20,
        )
    finally:
        await owner.close()
    other_chain = await admin.post(url.format(second), json={**address, "chain": "BASE_MAINNET"})
    assert other_chain.status_code == 201
    stored = await admin.get(f"/api/v1/accounts/{second}")
    assert stored.status_code == 200
    bad = await admin.post(url.format(second), json={**address, "address": "0xnothex"})
    assert bad.status_code == 422


async def test_withdrawal_is_idempotent_and_reports_insufficient_funds(
    app: Any, client: httpx.AsyncClient
) -> None:
    account_id = await _account(client)
    headers = key()
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    first = await client.post(url, json={"amount": "5"}, headers=headers)
    again = await client.post(url, json={"amount": "5"}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert first.content == again.content
    event_id = first.json()["event_id"]
    assert event_id.startswith("wd:")
    different = await client.post(url, json={"amount": "6"}, headers=headers)
    assert different.status_code == 409
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payment_events") == 1
        outbox = await conn.fetch("SELECT topic, payload FROM outbox")
    assert [(row["topic"], row["payload"]) for row in outbox] == [
        ("ledger.event", {"version": 1, "event_id": event_id})
    ]
    pending = (await client.get(f"/api/v1/events/{event_id}")).json()
    assert (pending["status"], pending["event_type"], pending["amount"]) == (
        "pending",
        "withdrawal",
        "5.000000",
    )
    # The pipeline posts the event; the API reports the outcome.
    await post_event(app.state.api.pool, app.state.api.settings, event_id)
    outcome = (await client.get(f"/api/v1/events/{event_id}")).json()
    assert outcome["outcome"] == "insufficient_funds"


async def test_withdrawal_after_deposit_shows_in_entries(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id = await _account(client)
    await _deposit(app, anon, admin, account_id, "10")
    response = await client.post(
        f"/api/v1/accounts/{account_id}/withdrawals", json={"amount": "4"}, headers=key()
    )
    event_id = response.json()["event_id"]
    await post_event(app.state.api.pool, app.state.api.settings, event_id)
    event = (await client.get(f"/api/v1/events/{event_id}")).json()
    assert (event["status"], event["outcome"]) == ("confirmed", "success")
    account = (await client.get(f"/api/v1/accounts/{account_id}")).json()
    assert account["balance"] == "6.000000"
    first = (await client.get(f"/api/v1/accounts/{account_id}/entries", params={"limit": 1})).json()
    assert [item["amount"] for item in first["items"]] == ["-4.000000"]
    second = (
        await client.get(
            f"/api/v1/accounts/{account_id}/entries",
            params={"limit": 1, "cursor": first["next_cursor"]},
        )
    ).json()
    assert [item["amount"] for item in second["items"]] == ["10.000000"]
    assert second["next_cursor"] is None


async def test_withdrawal_validation(client: httpx.AsyncClient) -> None:
    account_id = await _account(client)
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    no_key = await client.post(url, json={"amount": "1"})
    assert no_key.status_code == 422
    number = await client.post(url, json={"amount": 1}, headers=key())
    assert number.status_code == 422
    assert "not a JSON number" in number.json()["errors"][0]["message"]
    too_fine = await client.post(url, json={"amount": "0.0000001"}, headers=key())
    assert too_fine.status_code == 422
    assert too_fine.json()["errors"][0]["field"] == "body.amount"


async def test_events_are_tenant_scoped(
    client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    account_id = await _account(client)
    response = await client.post(
        f"/api/v1/accounts/{account_id}/withdrawals", json={"amount": "1"}, headers=key()
    )
    event_id = response.json()["event_id"]
    assert (await other.get(f"/api/v1/events/{event_id}")).status_code == 404
    assert (await client.get("/api/v1/events/unknown")).status_code == 404


async def test_payout_addresses_are_checked_before_anything_is_held(
    app: Any, client: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    account_id = await _account(client, "ETH")
    good = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
    typo = good[:-1] + "D"  # one letter's case changed: the checksum fails
    for to_address, reason in ((typo, "EIP-55"), ("0x" + "0" * 40, "zero address")):
        response = await client.post(
            f"/api/v1/accounts/{account_id}/withdrawals",
            json={"amount": "1", "to_address": to_address},
            headers=key(),
        )
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["errors"][0]["field"] == "body.to_address"
        assert reason in problem["errors"][0]["message"]
        imported = await admin.post(
            f"/api/v1/accounts/{account_id}/deposit-addresses",
            json={"chain": "ETH_MAINNET", "address": to_address},
        )
        assert imported.status_code == 422, imported.text
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payouts") == 0
        assert await conn.fetchval("SELECT count(*) FROM deposit_addresses") == 0
        assert (
            await conn.fetchval("SELECT held FROM accounts WHERE id = $1", uuid.UUID(account_id))
            == 0
        )


async def test_money_leaves_an_account_only_on_its_owners_key(
    app: Any,
    client: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
) -> None:
    """An admin key reads every account, but a withdrawal or an on-chain payout out of a
    merchant's account needs that merchant's key: nothing is recorded, held or debited."""
    account_id = await _account(client)
    await _deposit(app, anon, admin, account_id, "10")
    assert (await admin.get(f"/api/v1/accounts/{account_id}")).status_code == 200
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    payout = {"amount": "1", "to_address": to_checksum_address("0x" + "ab" * 20)}
    for body in ({"amount": "1"}, payout):
        refused = await admin.post(url, json=body, headers=key())
        assert refused.status_code == 403, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert "owner's key" in refused.json()["detail"]
    account = (await client.get(f"/api/v1/accounts/{account_id}")).json()
    assert (account["balance"], account["held"]) == ("10.000000", "0.000000")
    pool: asyncpg.Pool = app.state.api.pool
    written = await pool.fetchval(
        "SELECT (SELECT count(*) FROM payment_events WHERE account_id = $1"
        "        AND event_type <> 'deposit')"
        " + (SELECT count(*) FROM payouts WHERE account_id = $1)",
        uuid.UUID(account_id),
    )
    assert written == 0
    # The admin's own account is its own to debit.
    own = await _account(admin)
    await _deposit(app, anon, admin, own, "5")
    mine = await admin.post(
        f"/api/v1/accounts/{own}/withdrawals", json={"amount": "2"}, headers=key()
    )
    assert mine.status_code == 202, mine.text


async def test_a_provider_deposit_report_reads_back_by_the_id_it_was_answered_with(
    app: Any,
    client: httpx.AsyncClient,
    other: httpx.AsyncClient,
    anon: httpx.AsyncClient,
    admin: httpx.AsyncClient,
) -> None:
    """The provider webhook answers a deposit's stored id (`gen:…`); GET /events/{id}
    reads the report back: pending until the node shows the transfer, then confirmed
    with the credit event, which reads back as a posted ledger event."""
    account_id = await _account(client)
    stored_id = await _report_deposit(anon, admin, account_id, "7.5")
    assert stored_id.startswith("gen:dep-")
    report = await client.get(f"/api/v1/events/{stored_id}")
    assert report.status_code == 200, report.text
    assert {k: report.json()[k] for k in ("event_type", "status", "amount", "account_id")} == {
        "event_type": "deposit_report",
        "status": "pending",
        "amount": "7.500000",
        "account_id": account_id,
    }
    assert report.json()["credit_event_id"] is None
    assert (await other.get(f"/api/v1/events/{stored_id}")).status_code == 404
    await credit_as_the_node_would(app)
    decided = (await client.get(f"/api/v1/events/{stored_id}")).json()
    assert (decided["status"], decided["deposit_status"]) == ("confirmed", "credited")
    credit = (await client.get(f"/api/v1/events/{decided['credit_event_id']}")).json()
    assert (credit["status"], credit["outcome"], credit["amount"]) == (
        "confirmed",
        "success",
        "7.500000",
    )


async def test_an_imported_deposit_address_is_an_evm_address(
    client: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """Every registered chain is EVM: a base58-looking or overlong string is refused on
    `body.address` and nothing is assigned: each must answer 422, not 201."""
    account_id = await _account(client)
    url = f"/api/v1/accounts/{account_id}/deposit-addresses"
    for address in ("12345678", "x" * 128, "0x" + "a" * 39, "T" + "9" * 33):
        answer = await admin.post(url, json={"chain": "ETH_MAINNET", "address": address})
        assert answer.status_code == 422, (address, answer.text)
        assert answer.json()["errors"][0]["field"] == "body.address"
    fine = await admin.post(url, json={"chain": "ETH_MAINNET", "address": "0x" + "ab" * 20})
    assert fine.status_code == 201, fine.text
    account = (await client.get(f"/api/v1/accounts/{account_id}")).json()
    assert account["account_id"] == account_id


async def test_one_key_makes_one_withdrawal_of_one_kind_even_after_its_record_expired(
    app: Any, client: httpx.AsyncClient, anon: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """Once a key's idempotency record has expired (retention), the same key for a ledger
    withdrawal and then an on-chain payout (or the reverse) never moves money twice. The
    domain rows are the last word: the second kind is a 409 and nothing is recorded or
    held."""
    account_id = await _account(client)
    await _deposit(app, anon, admin, account_id, "10")
    url = f"/api/v1/accounts/{account_id}/withdrawals"
    ledger = {"amount": "1"}
    payout = {"amount": "1", "to_address": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}
    pool = app.state.api.pool
    for first, second, key_ in (
        (ledger, payout, "k-ledger-first"),
        (payout, ledger, "k-payout-first"),
    ):
        made = await client.post(url, json=first, headers={"Idempotency-Key": key_})
        assert made.status_code == 202, made.text
        await pool.execute("DELETE FROM api_idempotency WHERE key = $1", key_)  # retention
        refused = await client.post(url, json=second, headers={"Idempotency-Key": key_})
        assert refused.status_code == 409, refused.text
        assert "already used for" in refused.json()["detail"]
        again = await client.post(url, json=first, headers={"Idempotency-Key": key_})
        assert again.status_code == 202, again.text  # the same request is still answered
    counts = await pool.fetchrow(
        "SELECT (SELECT count(*) FROM payouts WHERE account_id = $1) AS payouts,"
        "       (SELECT count(*) FROM payment_events WHERE account_id = $1"
        "        AND event_type = 'withdrawal') AS withdrawals",
        uuid.UUID(account_id),
    )
    assert (counts["payouts"], counts["withdrawals"]) == (1, 1)


async def test_payouts_to_known_sinks_are_refused_with_a_422(
    app: Any, client: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """A registered token contract, a payflow deposit address, a precompile: 422 on
    body.to_address before anything is held."""
    account_id = await _account(client, "ETH")
    other = await _account(client, "ETH")
    deposit = "0x" + uuid.uuid4().hex + "00000000"
    imported = await admin.post(
        f"/api/v1/accounts/{other}/deposit-addresses",
        json={"chain": "ETH_MAINNET", "address": deposit},
    )
    assert imported.status_code in (200, 201), imported.text
    sinks = (
        (USDC_CONTRACT, "registered token contract"),
        (deposit, "deposit address"),
        ("0x" + "0" * 39 + "1", "precompile"),
    )
    for to_address, reason in sinks:
        response = await client.post(
            f"/api/v1/accounts/{account_id}/withdrawals",
            json={"amount": "1", "to_address": to_address},
            headers=key(),
        )
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["errors"][0]["field"] == "body.to_address"
        assert reason in problem["errors"][0]["message"]
    async with app.state.api.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM payouts") == 0
