"""The seeded load of a chaos run and what it recorded: the plan, the client, the answers.

The plan (`make_plan`) is a shuffled list of operations drawn from one seed:

* merchant payments (`POST /api/v1/payments`, a fresh Idempotency-Key each), most with a
  webhook_url whose receiver mode (`receiver.MODES`) is drawn too;
* deposits to deposit addresses of the run's ETH accounts: a real native transfer on the
  run's private anvil (`eth_sendTransaction` from an unlocked account, sent once, at the
  first delivery), then the signed provider webhook reporting it with its real tx hash,
  delivered 1-3 times (the deliveries are shuffled into the plan independently, so a
  duplicate may arrive before or long after the first; `deposit_body`). The webhook is
  only a report: the `chain_deposits` job credits the transfer once the node shows it final;
* withdrawals from those accounts, some small, some (`must_fail`) larger than every
  deposit the account will ever get, so their outcome is known in advance.

`Client.run` sends the plan with bounded concurrency (paced to `rate` when given). A
request answered 5xx, 429, 409 (in progress) or not at all (dropped connection, timeout)
is retried with the SAME body and key a few times, then parked; `Client.resolve` retries
every parked one after the faults stop, as a client retrying with the same
Idempotency-Key (or a provider redelivering) would. Each operation ends with its 2xx
answer (`result`), or as `refused` (a 4xx: a bug the verdict reports).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from uuid import UUID

import httpx
import orjson

from payflow.chain.rpc import RpcError, RpcUnavailable
from payflow.ingress.signature import sign
from payflow.money import to_base_units
from payflow_lab.anvil import DEFAULT_ACCOUNTS, AnvilNode
from payflow_lab.chaos.receiver import MODES, Receiver

RETRY = frozenset({409, 429, 500, 502, 503, 504})
INLINE_ATTEMPTS = 4
REQUEST_TIMEOUT_S = 5.0
UNIT = Decimal("0.000001")  # deposit and withdrawal amounts are whole micro-ETH
ETH_DECIMALS = 18
MUST_FAIL_WITHDRAWAL = Decimal("900000")  # above every account's deposits, under max_withdrawal


@dataclass(frozen=True, slots=True)
class Target:
    """An ETH account of the run with its deposit address on `chain` (native: no contract)."""

    account_id: UUID
    chain: str
    address: str


@dataclass
class Op:
    """One operation; `delivery` numbers the copies of one deposit (0-based)."""

    kind: str  # payment | deposit | withdrawal
    key: str  # Idempotency-Key or provider event id
    amount: Decimal
    account: int = -1  # index into the run's targets (deposits, withdrawals)
    mode: str | None = None  # payments: receiver mode, None: no webhook
    must_fail: bool = False
    deliveries: int = 1
    result: dict[str, Any] | None = None
    refused: str | None = None
    attempts: int = 0
    latency_ms: float | None = None
    sent_at: float = 0.0
    tx_hash: str | None = None  # deposits: the on-chain transfer, once sent


@dataclass
class Plan:
    """The operations (deposits once each) and the shuffled send order (with copies)."""

    ops: list[Op]
    order: list[int]  # indexes into ops; a deposit index appears once per delivery

    @property
    def requests(self) -> int:
        return len(self.order)

    def of(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]


def make_plan(seed: int, requests: int, accounts: int) -> Plan:
    """About `requests` first attempts: 45% payments, 40% deposit deliveries, 15% withdrawals."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible load, not a secret
    ops: list[Op] = []
    order: list[int] = []
    while len(order) < requests:
        draw = rng.random()
        index = len(ops)
        if draw < 0.45:
            mode = rng.choice([None, *MODES, "ok", "ok"])  # ok twice as often
            cents = Decimal(rng.randint(100, 99_999)) / 100
            ops.append(Op("payment", f"chaos-p-{seed}-{index}", cents, mode=mode))
            order.append(index)
        elif draw < 0.85:
            copies = rng.choice((1, 1, 2, 3))
            amount = Decimal(rng.randint(1_000_000, 50_000_000)) * UNIT
            ops.append(
                Op("deposit", f"chaos-d-{seed}-{index}", amount, rng.randrange(accounts), None)
            )
            ops[-1].deliveries = copies
            order.extend([index] * copies)
        else:
            must_fail = rng.random() < 0.2
            amount = (
                MUST_FAIL_WITHDRAWAL
                if must_fail
                else Decimal(rng.randint(100_000, 20_000_000)) * UNIT
            )
            ops.append(Op("withdrawal", f"chaos-w-{seed}-{index}", amount, rng.randrange(accounts)))
            ops[-1].must_fail = must_fail
            order.append(index)
    rng.shuffle(order)
    return Plan(ops, order)


def sender_spend_eth(plan: Plan) -> Decimal:
    """The most ETH any one anvil sender (`op.account % 10`, see `Client.transfer`) sends
    for the plan's deposits: the run's senders must be funded above it."""
    spent: dict[int, Decimal] = {}
    for op in plan.of("deposit"):
        sender = op.account % len(DEFAULT_ACCOUNTS)
        spent[sender] = spent.get(sender, Decimal(0)) + op.amount
    return max(spent.values(), default=Decimal(0))


def deposit_body(op: Op, target: Target) -> bytes:
    """A generic provider report of the native ETH transfer `op.tx_hash` (already sent)
    to the target's address; the amount is the transfer's value as a decimal string."""
    assert op.tx_hash is not None
    return orjson.dumps(
        {
            "event_id": op.key,
            "event_type": "deposit",
            "chain": target.chain,
            "to_address": target.address,
            "asset": "ETH",
            "amount": format(op.amount, "f"),
            "tx_hash": op.tx_hash,
        }
    )


@dataclass
class Counters:
    """What the client saw, over every attempt."""

    sent: int = 0
    ok: int = 0
    status_5xx: int = 0
    status_500: int = 0  # of status_5xx: the answers that are bugs (502-504 are the way)
    dropped: int = 0
    retried_4xx: int = 0
    parked: int = 0
    resolved_after: int = 0


@dataclass
class Client:
    """Sends a plan through the public API with the merchant's key and the provider secret."""

    base_url: str
    api_key: str
    provider_secret: str
    signature_header: str
    targets: list[Target]
    receiver: Receiver
    anvil: AnvilNode
    concurrency: int = 16
    counters: Counters = field(default_factory=Counters)
    parked: list[tuple[int, int]] = field(default_factory=list)  # (op index, delivery)
    answered_at: list[float] = field(default_factory=list)  # monotonic time of each 2xx
    _http: httpx.AsyncClient | None = None
    _senders: dict[int, asyncio.Lock] = field(default_factory=dict)

    async def __aenter__(self) -> Client:
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=REQUEST_TIMEOUT_S,
            limits=httpx.Limits(max_connections=self.concurrency * 2),
            headers={"X-API-Key": self.api_key},
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()

    def _request(self, op: Op) -> tuple[str, bytes, dict[str, str]]:
        headers = {"Content-Type": "application/json"}
        if op.kind == "payment":
            payload: dict[str, Any] = {
                "amount": format(op.amount, "f"),
                "currency": "USD",
                "description": "chaos",
                "metadata": {"order_id": op.key},
            }
            if op.mode is not None:
                payload["webhook_url"] = self.receiver.url(op.mode, op.key)
            headers["Idempotency-Key"] = op.key
            return "/api/v1/payments", orjson.dumps(payload), headers
        target = self.targets[op.account]
        if op.kind == "deposit":
            body = deposit_body(op, target)
            headers[self.signature_header] = sign(body, self.provider_secret.encode())
            return "/api/v1/webhooks/provider", body, headers
        headers["Idempotency-Key"] = op.key
        body = orjson.dumps({"amount": format(op.amount, "f")})
        return f"/api/v1/accounts/{target.account_id}/withdrawals", body, headers

    async def transfer(self, op: Op) -> bool:
        """Send deposit `op`'s transfer on chain once (value = amount in wei, exact) from
        unlocked anvil account `op.account % 10`; True when `op.tx_hash` is set. Sends of
        one sender are serialized (one nonce at a time); a node error leaves it unsent
        (retried at the next attempt; the anvil is not faulted, so a send the node took
        but did not answer does not happen in a run)."""
        sender = op.account % len(DEFAULT_ACCOUNTS)
        async with self._senders.setdefault(sender, asyncio.Lock()):
            if op.tx_hash is None:
                wei = to_base_units(op.amount, ETH_DECIMALS)
                target = self.targets[op.account].address
                try:
                    op.tx_hash = await self.anvil.send_eth(
                        target, wei, sender=DEFAULT_ACCOUNTS[sender]
                    )
                except RpcError as error:
                    if "insufficient funds" in str(error).lower():
                        # The senders are out of ETH: every later deposit would fail the
                        # same way, which is a broken run, not a fault to retry.
                        raise
                    return False
                except RpcUnavailable:
                    return False
        return True

    async def attempt(self, op: Op) -> bool:
        """One POST; True when the operation has its final answer (2xx or a refusal).
        A deposit's transfer is sent first, once (`transfer`)."""
        assert self._http is not None
        if op.kind == "deposit" and op.tx_hash is None:
            if not await self.transfer(op):
                return False
        path, body, headers = self._request(op)
        self.counters.sent += 1
        op.attempts += 1
        started = time.monotonic()
        try:
            response = await self._http.post(path, content=body, headers=headers)
        except httpx.HTTPError:
            self.counters.dropped += 1
            return False
        if 200 <= response.status_code < 300:
            self.counters.ok += 1
            self.answered_at.append(time.monotonic())
            if op.latency_ms is None:
                op.latency_ms = (time.monotonic() - started) * 1000
                op.sent_at = started
            answer = response.json()
            if op.kind != "deposit" or op.result is None:
                op.result = answer
            if op.kind == "deposit":
                results = {event["result"] for event in answer.get("events", [])}
                if not results or not results <= {"recorded", "duplicate"}:
                    op.refused = f"deposit not recorded: {sorted(results)}"
            return True
        if response.status_code >= 500:
            self.counters.status_5xx += 1
            self.counters.status_500 += response.status_code == 500
        if response.status_code in RETRY:
            if response.status_code < 500:
                self.counters.retried_4xx += 1
            return False
        op.refused = f"{response.status_code}: {response.text[:200]}"
        return True

    async def _one(self, index: int, delivery: int, op: Op) -> None:
        for attempt in range(INLINE_ATTEMPTS):
            if await self.attempt(op):
                return
            await asyncio.sleep(min(2.0, 0.25 * 2**attempt))
        self.counters.parked += 1
        self.parked.append((index, delivery))

    async def run(self, plan: Plan, rate: float | None, stop: asyncio.Event | None = None) -> None:
        """Send the plan (each deposit copy is its own delivery); paced at `rate`/s if set."""
        queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        copies: dict[int, int] = {}
        for index in plan.order:
            queue.put_nowait((index, copies.get(index, 0)))
            copies[index] = copies.get(index, 0) + 1
        started = time.monotonic()
        issued = 0

        async def worker() -> None:
            nonlocal issued
            while not queue.empty() and not (stop is not None and stop.is_set()):
                index, delivery = queue.get_nowait()
                if rate is not None:
                    due = started + issued / rate
                    issued += 1
                    if due > time.monotonic():
                        await asyncio.sleep(due - time.monotonic())
                await self._one(index, delivery, plan.ops[index])

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    async def resolve(self, plan: Plan, limit_s: float) -> list[Op]:
        """Retry every parked request until answered (same key/body); returns the ops
        still unanswered after `limit_s` (the verdict counts them lost)."""
        deadline = time.monotonic() + limit_s
        pending = list(self.parked)
        while pending and time.monotonic() < deadline:
            still: list[tuple[int, int]] = []
            for index, delivery in pending:
                if await self.attempt(plan.ops[index]):
                    self.counters.resolved_after += 1
                else:
                    still.append((index, delivery))
            pending = still
            if pending:
                await asyncio.sleep(1.0)
        return [plan.ops[index] for index, _ in pending]
