"""Submission through the public HTTP API, as merchants and providers do it.

`HttpSubmitter` implements `Submitter`: payments are `POST /api/v1/payments` with the
merchant's X-API-Key and a unique Idempotency-Key; deposits are `POST
/api/v1/webhooks/provider` with a generic event body HMAC-signed over its raw bytes,
addressed to a deposit address that maps to the target account (the payload never
names the account). One pooled keep-alive client carries every request: a raw
asyncio one (`rawhttp.py`), because httpx cost more CPU than the service under test.

A 429 or 503 is retried with the SAME body and Idempotency-Key / event id, so a retry
can never create a second payment or event; anything else but 202 is an error.
Secrets (the API key, the provider secret) are held in memory and never logged.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson

from payflow.ingress.signature import sign
from payflow_lab.bench.rawhttp import RawHttpClient

RETRYABLE = frozenset({429, 503})
MAX_RETRIES = 5
MAX_RETRY_WAIT_S = 1.0


class SubmitError(RuntimeError):
    """The API refused a submission the bench expected it to accept."""


@dataclass(frozen=True, slots=True)
class DepositAddress:
    """Where deposits for one account are sent: its (chain, address) and asset, and the
    token contract the registry knows that asset by (None for the chain's native asset)."""

    chain: str
    address: str
    asset: str
    contract: str | None = None


class HttpSubmitter:
    """Submits through the API over one shared keep-alive client; use `async with`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        api_key: str,
        provider_secret: str,
        signature_header: str,
        addresses: dict[UUID, DepositAddress],
        max_connections: int,
    ) -> None:
        self._secret = provider_secret.encode("utf-8")
        self._signature_header = signature_header
        self._addresses = addresses
        self._client = RawHttpClient(
            host,
            port,
            max_connections=max_connections,
            headers={"X-API-Key": api_key, "Content-Type": "application/json"},
        )
        self.retries = 0

    async def __aenter__(self) -> HttpSubmitter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the shared client and its keep-alive connections."""
        await self._client.aclose()

    async def _post(self, path: str, body: bytes, headers: dict[str, str]) -> dict[str, Any]:
        """POST until a non-retryable answer; return the 202 body, else raise SubmitError."""
        for attempt in range(MAX_RETRIES + 1):
            response = await self._client.post(path, body, headers)
            if response.status == 202:
                parsed: dict[str, Any] = orjson.loads(response.body)
                return parsed
            if response.status not in RETRYABLE or attempt == MAX_RETRIES:
                break
            self.retries += 1
            wait = float(response.headers.get("retry-after", "0.1") or 0.1)
            await asyncio.sleep(min(wait, MAX_RETRY_WAIT_S))
        detail = response.body[:300].decode("utf-8", "replace")
        raise SubmitError(f"POST {path} answered {response.status}: {detail}")

    async def submit_payment(
        self, merchant_id: UUID, amount: str, currency: str, key: str, webhook_url: str | None
    ) -> UUID:
        """`POST /api/v1/payments`; the merchant is the API key's, `merchant_id` is unused."""
        body = orjson.dumps(
            {
                "amount": amount,
                "currency": currency,
                "description": "bench",
                "metadata": {"order_id": key},
                "webhook_url": webhook_url,
            }
        )
        answer = await self._post("/api/v1/payments", body, {"Idempotency-Key": key})
        return UUID(answer["payment_id"])

    async def submit_deposit(self, event_id: str, account_id: UUID, amount: str) -> None:
        """A signed generic provider event to the account's deposit address."""
        target = self._addresses[account_id]
        body = orjson.dumps(
            {
                "event_id": event_id,
                "event_type": "deposit",
                "chain": target.chain,
                "to_address": target.address,
                "asset": target.asset,
                "amount": amount,
                "tx_hash": "0x" + hashlib.sha256(event_id.encode()).hexdigest(),
                **({"contract_address": target.contract} if target.contract else {}),
            }
        )
        headers = {self._signature_header: sign(body, self._secret)}
        answer = await self._post("/api/v1/webhooks/provider", body, headers)
        results = {event["result"] for event in answer.get("events", [])}
        if not results or not results <= {"recorded", "duplicate"}:
            raise SubmitError(f"deposit {event_id} was not recorded: {sorted(results)}")
