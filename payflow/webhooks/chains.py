"""One live retry chain per webhook job, and at most one dead letter per job.

A webhook job (one payment's notification) is driven by broker messages: the first one
(`finalize_payment`'s outbox row), its own retries through the TTL tiers (same message
id, attempt + 1), and copies: a sweep's or a DLQ replay's re-announcement, a relay's
second publish of one outbox row, a broker redelivery after a crash. A *chain* is one
message id and its retries. The job row names the chain that owns it
(`payments.webhook_chain_message`, `webhook_chain_attempt`, `webhook_next_attempt_at`,
migration 0018) and a message that is not the owner's next step is a duplicate: it is
acked and dropped, never retried, never dead-lettered (`duplicate_reason`):

* a live lease: another send is POSTing right now; the lease holder owns the job (if it
  dies, its lease expires and the sweep re-announces the job);
* another chain owns the job and was expected back (its lease's end, its retry tier's
  end) less than `WEBHOOK_SWEEP_AFTER_S` ago: it is still alive, on a tier or in the
  queue behind a backlog;
* the owner's own message id with an attempt below the one the job expects: a stale copy.

A message of another chain takes the job over once the owner is overdue by
`WEBHOOK_SWEEP_AFTER_S` (the owner died: a crashed sender, a retry the broker lost); the
webhook sweep re-announces exactly those jobs (`overdue_webhooks`), so it never starts a
second chain next to a live one. Whichever of two messages claims first owns the job and
the other finds it owned: chains merge, they never run side by side.

Dead-lettering (`dead_letter_webhook`) writes the DLQ row only when it makes the job's
transition to dead under the payment's row lock (`mark_webhook_dead` returns a row only
then): one dead letter per dead webhook, until a manual replay hands it back.

A dead letter does not stop a send already under way: a send paused past its lease (a GC
pause, a frozen container) may POST or record after the chain gave up. Its 2xx still
counts: the record makes the webhook delivered (no longer dead) and
`resolve_delivered_late` resolves the open dead letter as "delivered late".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import asyncpg
import structlog

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.db.tx import StatementBounds
from payflow.dlq.drain import DeadLetterer
from payflow.dlq.fallback import FallbackEntry
from payflow.dlq.records import record_dead_letter
from payflow.errors import NotFound
from payflow.webhooks.dead import mark_webhook_dead

SQL = load_queries("payflow.webhooks")
log = structlog.get_logger("payflow.webhooks")

IN_FLIGHT = "in_flight"
OTHER_CHAIN = "other_chain"
STALE_COPY = "stale_copy"


async def payment_for_webhook(conn: Connection, payment_id: UUID) -> asyncpg.Record:
    """The payment a webhook is built from, with its merchant's webhook secret and its
    currency's scale; `NotFound` when absent."""
    row = await conn.fetchrow(SQL["payment_for_webhook"], payment_id)
    if row is None:
        raise NotFound(f"payment {payment_id} does not exist")
    return row


def duplicate_reason(
    job: asyncpg.Record | Mapping[str, Any], message_id: str, attempt: int, takeover_after_s: float
) -> str | None:
    """Why the message (`message_id`, `attempt`) may not drive the job, or None when it may.

    `job` is a `lock_payment_for_webhook` row (read under the payment's row lock).
    Returns `IN_FLIGHT` while any send's lease is live, `OTHER_CHAIN` while another chain
    owns the job and is overdue by at most `takeover_after_s`, `STALE_COPY` for an
    earlier attempt of the owner's own message. Invariant: of two messages judged under
    the row lock, at most one is let through before the first records its result, so two
    sends of one job never overlap and one chain drives it at a time.
    """
    if job["lease_live"]:
        return IN_FLIGHT
    owner: str | None = job["webhook_chain_message"]
    if owner is None:
        return None  # never claimed (or handed back by a replay): the first message owns it
    if owner == message_id and attempt >= int(job["webhook_chain_attempt"]):
        return None  # the owner's next step (a later attempt too: a claim that failed early)
    overdue: float | None = job["overdue_s"]
    if overdue is not None and overdue > takeover_after_s:
        return None  # the owner died: this message takes the job over
    return STALE_COPY if owner == message_id else OTHER_CHAIN


async def dead_letter_webhook(
    conn: Connection,
    payload: dict[str, Any],
    error: str,
    attempt: int,
    *,
    message_id: str | None = None,
    takeover_after_s: float = 0.0,
    fallback: Mapping[str, str] | None = None,
) -> int | None:
    """Inside the caller's transaction: mark the webhook dead-lettered (`webhook_dead_at`)
    and record its one DLQ row; returns the row's id, or None when nothing was written.

    Under the payment's row lock, nothing is written when:
    * the message is a duplicate of a live chain (`duplicate_reason`; with `message_id`
      None, as from the Redis drain, only a live lease counts): the owner decides, so a
      duplicate never dead-letters a job that is in flight or still retrying;
    * the webhook was delivered meanwhile: delivered or dead-lettered, never both;
    * it is dead already: one dead letter per dead webhook.
    The payment keeps its terminal status. A subject that is no payment (a malformed
    job) still gets its row. Shared by `WebhookSender.on_dead` and the Redis DLQ drain.
    """
    subject = str(payload.get("payment_id"))
    attempts = attempt
    try:
        payment = await payment_for_webhook(conn, UUID(subject))
    except (ValueError, NotFound):
        payment = None
    if payment is not None:
        job = await conn.fetchrow(SQL["lock_payment_for_webhook"], payment["id"])
        if job is not None:
            if message_id is None:
                reason = IN_FLIGHT if job["lease_live"] else None
            else:
                reason = duplicate_reason(job, message_id, attempt, takeover_after_s)
            if reason is not None:
                log.info("payflow.webhooks.duplicate_not_dead_lettered", reason=reason)
                return None
            if job["webhook_dead_at"] is not None:
                log.info("payflow.webhooks.already_dead_lettered")
                return None
        if not await mark_webhook_dead(conn, payment["id"]):
            return None  # delivered: a chain gave up, but the webhook arrived
        # The POSTs counted on the payment, or the deliveries of the job when more: tries
        # that sent nothing (a name that did not resolve) count too: a never-resolving
        # host's dead letter counts every try made, not attempt 1.
        attempts = max(int(payment["webhook_attempts"]), attempt, 1)
    return await record_dead_letter(
        conn,
        source="webhook",
        subject_id=subject,
        payload=payload,
        error=error,
        attempt=attempts,
        fallback=fallback,
    )


async def _redo_dead_webhook(
    conn: Connection, entry: FallbackEntry, fallback: Mapping[str, str]
) -> int | None:
    """The Redis DLQ drain's redo of a webhook's `on_dead` (`dead_letter_webhook`, with no
    message id: only a live lease makes the entry a duplicate)."""
    return await dead_letter_webhook(
        conn, entry.payload, entry.error, entry.attempt, fallback=fallback
    )


# What the Redis DLQ drain (`payflow.dlq.drain`) runs for a `webhook` entry.
WEBHOOK_DEAD_LETTERER = DeadLetterer("payment_id", _redo_dead_webhook)


async def resolve_delivered_late(
    pool: asyncpg.Pool,
    payment_id: UUID,
    token: str,
    http_status: int | None,
    bounds: StatementBounds,
) -> list[int]:
    """A 2xx (`http_status`) recorded after a chain dead-lettered the webhook: resolve its
    open dead letters as "delivered late", by the send named `token` (its lease token, in
    `resolved_by`). One autocommitted statement after the record; returns the ids
    resolved. Never raises: if it cannot be written (a crash, PostgreSQL gone), the dead
    letter stays open on a delivered webhook, and its replay finds the webhook delivered
    and sends nothing."""
    try:
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                SQL["resolve_late_webhook_dead_letters"],
                str(payment_id),
                token,
                http_status,
                timeout=bounds.timeout_s,
            )
    except Exception as exc:  # the delivery is recorded; the open dead letter is harmless
        log.warning(
            "payflow.webhooks.delivered_late_unresolved", error=f"{type(exc).__name__}: {exc}"
        )
        return []
    resolved = [int(row["id"]) for row in rows]
    log.warning("payflow.webhooks.delivered_late", http_status=http_status, dead_letters=resolved)
    return resolved
