"""`POST /api/v1/accounts/{id}/deposit-addresses` without an address: the account's
owner gets the next address derived from `ETH_DEPOSIT_XPUB`.

The handler is mounted by `routes/accounts.py` (one path, two behaviours: an `address`
in the body is the admin import). Idempotency as the other POSTs: the key is required,
a retry with the same key and body replays the stored answer (the same address), the
same key with another body is 409; the index allocation, the address row and the key's
record commit together.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from payflow.api.auth import SQL as API_SQL
from payflow.api.auth import Merchant
from payflow.api.checks import Uuid
from payflow.api.db import connection
from payflow.api.errors import ApiProblem, FieldError
from payflow.api.responses import JsonResponse
from payflow.api.schemas import DepositAddressCreate
from payflow.api.state import api_state
from payflow.chain.watch.derivation import (
    XpubInvalid,
    allocate_address,
    chain_carries_asset,
    derived_by_key,
)
from payflow.db import Connection
from payflow.db.tx import transaction
from payflow.errors import NotFound
from payflow.idempotency.records import (
    IdempotencyKeyReused,
    StoredResponse,
    is_key_race,
    lookup,
    request_hash,
    store,
)

DERIVE_SCOPE = "accounts.deposit_address"


def _unconfigured(detail: str) -> ApiProblem:
    return ApiProblem(
        503, "Deposit address derivation unavailable", detail, slug="derivation-unavailable"
    )


async def ensure_chain_carries(conn: Connection, chain: str, asset: str) -> None:
    """`FieldError` (422 on `body.chain`) unless the token registry knows `chain` and
    registers `asset` on it: an address on any other chain could never be credited as
    the account's asset. Reads the registry in the caller's transaction."""
    carries = await chain_carries_asset(conn, chain, asset)
    if carries is None:
        raise FieldError("body.chain", f"unknown chain {chain}")
    if not carries:
        raise FieldError("body.chain", f"{chain} carries no registered {asset}")


async def add_derived_address(
    request: Request,
    account_id: Uuid,
    body: DepositAddressCreate,
    merchant: Merchant,
    key: str | None,
) -> JsonResponse:
    """Derive, store and answer the account's next deposit address on `body.chain`.

    201 `{chain, address (lower case, as stored), checksum_address (EIP-55), account_id,
    derivation_path}`. 404 for another merchant's account; 422 without an
    Idempotency-Key, for an unknown chain or an account whose asset the chain does not
    carry; 409 for a reused key; 503 (`derivation-unavailable`) when `ETH_DEPOSIT_XPUB`
    is not configured or not a public key.
    """
    state = api_state(request)
    if key is None:
        raise FieldError("header.Idempotency-Key", "is required to derive a deposit address")
    xpub = state.settings.eth_deposit_xpub
    req_hash = request_hash(DERIVE_SCOPE, {"account_id": str(account_id), "chain": body.chain})
    for attempt in (1, 2):
        try:
            async with connection(state.pool) as conn, transaction(conn, state.settings):
                stored = await lookup(conn, merchant.id, DERIVE_SCOPE, key, req_hash)
                if stored is not None:
                    return JsonResponse(stored.body, status_code=stored.status)
                account = await conn.fetchrow(
                    API_SQL["get_account_scoped"], account_id, merchant.id, merchant.is_admin
                )
                if account is None:
                    raise NotFound(f"account {account_id} does not exist")
                if xpub is None:
                    raise _unconfigured(
                        "ETH_DEPOSIT_XPUB is not configured: addresses cannot be derived"
                    )
                await ensure_chain_carries(conn, body.chain, account["asset"])
                try:
                    # The domain row is the last word once the key's record has expired.
                    derived = await derived_by_key(
                        conn, derived_by=merchant.id, derive_key=key, xpub=xpub
                    )
                    if derived is not None and (derived.account_id, derived.chain) != (
                        account_id,
                        body.chain,
                    ):
                        raise IdempotencyKeyReused(
                            "this Idempotency-Key already derived an address for another"
                            " account or chain"
                        )
                    if derived is None:
                        derived = await allocate_address(
                            conn,
                            chain=body.chain,
                            account_id=account_id,
                            xpub=xpub,
                            derived_by=merchant.id,
                            derive_key=key,
                        )
                except XpubInvalid as error:
                    raise _unconfigured(f"ETH_DEPOSIT_XPUB {error}") from None
                answer: dict[str, Any] = {
                    "chain": derived.chain,
                    "address": derived.address,
                    "checksum_address": derived.checksum,
                    "account_id": str(derived.account_id),
                    "derivation_path": derived.path,
                }
                await store(
                    conn, merchant.id, DERIVE_SCOPE, key, req_hash, StoredResponse(201, answer)
                )
            return JsonResponse(answer, status_code=201)
        except Exception as exc:
            if attempt == 1 and is_key_race(exc):
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover
