"""The webhook attempt log (issue 12): one row per POST with the HTTP status answered.

`payments.webhook_attempts` only counts attempts; the console's payment timeline needs
each attempt's outcome. The sender calls `log_attempt` in the transaction that counts
the attempt, so the log and the counter never disagree. The table is append-only for
the service (UPDATE and DELETE revoked by migration 0017's grant hook); rows older than
WEBHOOK_ATTEMPT_LOG_RETENTION_DAYS go only through `retention.py` (migration 0019).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from payflow.db import Connection
from payflow.db.queries import load_queries
from payflow.errors import WebhookHTTPStatus

SQL = load_queries("payflow.webhooks.attempts")
MAX_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class WebhookAttempt:
    """One logged POST: its 1-based number, the HTTP status (None: no HTTP answer,
    `error` says why), the error text (None for a 2xx) and when it was made."""

    attempt: int
    http_status: int | None
    error: str | None
    attempted_at: datetime


async def log_attempt(
    conn: Connection, payment_id: UUID, attempt: int, status: int | None, failure: Exception | None
) -> None:
    """Record attempt `attempt` of `payment_id`'s webhook inside the caller's transaction.

    `status` is the HTTP status answered (None when no answer came); `failure` the error
    (None for a 2xx). A non-2xx answer without an explicit status takes the status of its
    `WebhookHTTPStatus`. Never holds a secret: the error is the exception's own text.
    """
    if status is None and isinstance(failure, WebhookHTTPStatus):
        status = failure.status_code
    error = None if failure is None else f"{type(failure).__name__}: {failure}"[:MAX_ERROR_CHARS]
    await conn.execute(SQL["log_webhook_attempt"], payment_id, attempt, status, error)


async def attempts_of(conn: Connection, payment_id: UUID, limit: int = 200) -> list[WebhookAttempt]:
    """The logged attempts of one payment's webhook, oldest first (at most `limit`)."""
    rows = await conn.fetch(SQL["webhook_attempts_of_payment"], payment_id, limit)
    return [
        WebhookAttempt(r["attempt"], r["http_status"], r["error"], r["attempted_at"]) for r in rows
    ]
