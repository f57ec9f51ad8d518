"""Provider deliveries whose activities stand alone: what payflow
cannot credit is kept for review with its exact bytes, the rest is credited; balances
are checked after `post_event`, the path the ledger worker runs."""

# ruff: noqa: F401, F811 - pytest fixtures imported from ingress_support are used as parameters

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import orjson

from .alchemy import eth_activity, internal_activity, nft_activity, token_activity, webhook
from .ingress_support import (
    ETH_ADDRESS,
    FOREIGN_CONTRACT,
    USDC_ADDRESS,
    deliver,
    eth_account,
    incoming,
    post_all,
    rows,
    usdc_account,
)


async def test_a_nul_spam_token_does_not_lose_the_genuine_deposit(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    genuine = token_activity(USDC_ADDRESS, 7_000_000, log_index=1)
    spam = token_activity(
        USDC_ADDRESS,
        10**24,
        asset="Visit\x00spam.io",
        decimals=18,
        log_index=2,
        contract=FOREIGN_CONTRACT,
    )
    spam["erc1155Metadata"] = None
    spam["value"] = "claim \x00 now"
    body = orjson.dumps(webhook(genuine, spam))
    assert b"\\u0000" in body
    tx = "0x" + "7a" * 32
    events = await deliver(anon, body)
    assert events == [
        {"event_id": f"alchemy:{tx}:1", "result": "recorded"},
        {"event_id": f"alchemy:{tx}:2", "result": "unmatched", "reason": "unknown_token"},
    ]
    [pending] = await rows(
        app, "SELECT provider_event_id, amount, status FROM chain_deposit_reports"
    )
    assert (pending["provider_event_id"], pending["amount"], pending["status"]) == (
        f"alchemy:{tx}:1",
        Decimal("7"),
        "pending",
    )
    assert await rows(app, "SELECT 1 FROM outbox") == []  # nothing credits before the node
    [kept] = await rows(
        app,
        "SELECT u.asset, u.payload, u.position, d.body FROM unmatched_provider_events u"
        " JOIN provider_deliveries d ON d.body_sha256 = u.delivery_sha256",
    )
    assert kept["body"] == body  # the exact bytes, NUL escapes included
    assert kept["position"] == 1
    assert kept["asset"] == "VISIT\\u0000SPAM.IO"
    assert kept["payload"]["value"] == "claim \\u0000 now"
    await post_all(app)
    assert await incoming(app, usdc_account) == Decimal("7")


async def test_alchemys_erc721_activity_is_kept_and_the_rest_credited(
    app: Any, anon: httpx.AsyncClient, usdc_account: str, eth_account: str
) -> None:
    events = await deliver(
        anon,
        webhook(
            nft_activity(USDC_ADDRESS),
            token_activity(USDC_ADDRESS, 1_500_000),
            eth_activity(ETH_ADDRESS, 2 * 10**18),
        ),
    )
    assert [(e["result"], e.get("reason")) for e in events] == [
        ("unmatched", "nft"),
        ("recorded", None),
        ("recorded", None),
    ]
    await post_all(app)
    assert await incoming(app, usdc_account) == Decimal("1.5")
    assert await incoming(app, eth_account) == Decimal("2")


async def test_internal_transfers_without_trace_address_never_collapse(
    app: Any, anon: httpx.AsyncClient, eth_account: str
) -> None:
    tx = "0x" + "9c" * 32
    one = internal_activity(ETH_ADDRESS, 10**18, tx_hash=tx, trace=None)
    two = internal_activity(ETH_ADDRESS, 3 * 10**18, tx_hash=tx, trace=None)
    first = await deliver(anon, webhook(one, two))
    assert [e["result"] for e in first] == ["recorded", "recorded"]
    assert first[0]["event_id"] != first[1]["event_id"]
    # A true duplicate (the same content re-delivered) is still a duplicate.
    assert [e["result"] for e in await deliver(anon, webhook(one, two))] == ["duplicate"] * 2
    # The same transfer twice where nothing tells them apart: the second is kept.
    twice = await deliver(anon, webhook(one, one))
    assert [(e["result"], e.get("reason")) for e in twice] == [
        ("duplicate", None),
        ("unmatched", "ambiguous_id"),
    ]
    assert await deliver(anon, webhook(one, one)) == twice
    await post_all(app)
    assert await incoming(app, eth_account) == Decimal("4")
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == 1


async def test_odd_activities_are_kept_and_never_refuse_the_delivery(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    odd: list[tuple[Any, str | None]] = [
        ("a string", "invalid"),
        (None, "invalid"),
        ({"category": "token"}, "invalid"),
        ({**token_activity(USDC_ADDRESS, 5, log_index=3), "hash": "0x\x00"}, "invalid"),
        (token_activity(USDC_ADDRESS, 0, log_index=4), "zero_value"),
        ({**token_activity(USDC_ADDRESS, 5, log_index=5), "toAddress": "SURROGATE"}, "invalid"),
        (token_activity(USDC_ADDRESS, 9, log_index=6, removed=True), "removed"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=7), "category": "specialnft"}, "nft"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=9), "category": "log"}, "unsupported"),
        ({**token_activity(USDC_ADDRESS, 1, log_index=10), "big": "BIG"}, None),
        (token_activity(USDC_ADDRESS, 4_000_000, log_index=8), None),
    ]
    # A lone surrogate escape is JSON that orjson refuses; it is written as raw text.
    parts = [orjson.dumps(a).replace(b'"SURROGATE"', b'"\\ud800"') for a, _ in odd[:-2]]
    parts.append(orjson.dumps(odd[-2][0]).replace(b'"BIG"', b"1" + b"0" * 30))
    parts.append(orjson.dumps(odd[-1][0]))
    body = (
        b'{"type":"ADDRESS_ACTIVITY","event":{"network":"ETH_MAINNET","activity":['
        + b",".join(parts)
        + b"]}}"
    )
    events = await deliver(anon, body)
    assert [e.get("reason") for e in events] == [reason for _, reason in odd]
    assert len({e["event_id"] for e in events}) == len(events)
    assert len(await rows(app, "SELECT 1 FROM unmatched_provider_events")) == len(events) - 2
    assert await deliver(anon, body) == [
        {**e, "result": "duplicate"} if e["result"] == "recorded" else e for e in events
    ]
    await post_all(app)
    assert await incoming(app, usdc_account) == Decimal("4.000001")


ODD_VALUES: list[bytes] = [
    b"null",
    b"true",
    b"0",
    b"-1",
    b"1.5",
    b"1" + b"0" * 30,
    b"1e999",
    b'""',
    b'"\\u0000"',
    b'"\\ud800"',
    b'"' + b"x" * 1000 + b'"',
    b"[]",
    b"{}",
    b'{"a": "\\u0000"}',
    b'"0x"',
    b'"0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"',
]
FIELDS = [
    ("hash",),
    ("toAddress",),
    ("asset",),
    ("category",),
    ("value",),
    ("erc721TokenId",),
    ("erc1155Metadata",),
    ("typeTraceAddress",),
    ("rawContract",),
    ("rawContract", "rawValue"),
    ("rawContract", "address"),
    ("rawContract", "decimals"),
    ("log",),
    ("log", "logIndex"),
    ("log", "removed"),
]


async def test_no_odd_value_in_any_field_refuses_a_delivery_or_changes_an_amount(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    """Every field of a 5 USDC activity replaced by every odd JSON value, one delivery per
    field with a genuine 7 USDC transfer: always 202, the genuine transfer is credited,
    and whatever else is credited is exactly 5 USDC."""
    index = 1000
    recorded = unmatched = duplicates = 0
    for delivery, path in enumerate(FIELDS):
        parts: list[bytes] = []
        for value in ODD_VALUES:
            index += 1
            activity = token_activity(USDC_ADDRESS, 5_000_000, log_index=index)
            target = activity
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = "@ODD@"
            parts.append(orjson.dumps(activity).replace(b'"@ODD@"', value))
        parts.append(orjson.dumps(token_activity(USDC_ADDRESS, 7_000_000, log_index=delivery)))
        body = (
            b'{"type":"ADDRESS_ACTIVITY","event":{"network":"ETH_MAINNET","activity":['
            + b",".join(parts)
            + b"]}}"
        )
        events = await deliver(anon, body)
        assert len(events) == len(parts), path
        assert events[-1]["result"] == "recorded", path
        recorded += sum(e["result"] == "recorded" for e in events[:-1])
        unmatched += sum(e["result"] == "unmatched" for e in events)
        duplicates += sum(e["result"] == "duplicate" for e in events)
    amounts = [r["amount"] for r in await rows(app, "SELECT amount FROM chain_deposit_reports")]
    assert sorted(set(amounts)) == [Decimal(5), Decimal(7)]
    assert amounts.count(Decimal(7)) == len(FIELDS)
    await post_all(app)
    assert await incoming(app, usdc_account) == 7 * len(FIELDS) + 5 * recorded
    [kept] = await rows(app, "SELECT count(*) AS n FROM unmatched_provider_events")
    assert kept["n"] == unmatched
    # A variant without a log index whose transfer equals one already recorded (same
    # transaction, sender, receiver and contract value) is, by design, its duplicate.
    assert recorded + unmatched + duplicates == len(FIELDS) * len(ODD_VALUES)


async def test_kept_activities_are_never_merged_either(
    app: Any, anon: httpx.AsyncClient, usdc_account: str
) -> None:
    tx = "0x" + "4d" * 32
    nowhere = "0x" + "99" * 20
    # A removed log and its replacement share an id: one is kept, the other credited.
    removed = token_activity(USDC_ADDRESS, 3_000_000, tx_hash=tx, log_index=5, removed=True)
    replacement = token_activity(USDC_ADDRESS, 3_000_000, tx_hash=tx, log_index=5)
    events = await deliver(anon, webhook(removed, replacement))
    assert [(e["result"], e.get("reason")) for e in events] == [
        ("unmatched", "removed"),
        ("recorded", None),
    ]
    assert events[0]["event_id"] == events[1]["event_id"] == f"alchemy:{tx}:5"
    # Two identical internal transfers to an unknown address: two rows to review.
    lost = internal_activity(nowhere, 10**18, tx_hash=tx, trace=None)
    twice = await deliver(anon, webhook(lost, lost))
    assert [e.get("reason") for e in twice] == ["unknown_address", "ambiguous_id"]
    # A later, different activity under an id already kept: its own row.
    first = token_activity(nowhere, 5, tx_hash=tx, log_index=9)
    other = token_activity(nowhere, 6, tx_hash=tx, log_index=9)
    [kept] = await deliver(anon, webhook(first))
    [second] = await deliver(anon, webhook(other))
    assert (kept["reason"], second["reason"]) == ("unknown_address", "ambiguous_id")
    assert kept["event_id"] != second["event_id"]
    # Redeliveries write nothing new.
    for body in (webhook(first), webhook(other), webhook(lost, lost), webhook(removed)):
        await deliver(anon, body)
    stored = await rows(app, "SELECT event_id, reason, amount FROM unmatched_provider_events")
    assert sorted((r["reason"], r["amount"]) for r in stored) == [
        ("ambiguous_id", "0.000006"),
        ("ambiguous_id", "1"),
        ("removed", "3"),
        ("unknown_address", "0.000005"),
        ("unknown_address", "1"),
    ]
    await post_all(app)
    assert await incoming(app, usdc_account) == Decimal("3")
