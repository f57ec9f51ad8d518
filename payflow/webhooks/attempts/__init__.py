"""The webhook attempt log: one row per POST with the HTTP status answered.

`payments.webhook_attempts` only counts attempts; the console's payment timeline needs
each attempt's outcome. The sender's statement that counts the attempt appends its row
(`attempt_outcome` gives the row's status and error), so the log and the counter never
disagree. The table is append-only for
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


def attempt_outcome(status: int | None, failure: Exception | None) -> tuple[int | None, str | None]:
    """The (HTTP status, error text) logged for one POST: `status` as answered (None: no
    answer came), a non-2xx answer without an explicit status taking the status of its
    `WebhookHTTPStatus`; the error is the exception's own text, cut to MAX_ERROR_CHARS
    (None for a 2xx), never a secret. The sender's `record_webhook_attempt` statement
    appends the row in the same statement that counts the attempt."""
    if status is None and isinstance(failure, WebhookHTTPStatus):
        status = failure.status_code
    error = None if failure is None else f"{type(failure).__name__}: {failure}"[:MAX_ERROR_CHARS]
    return status, error


async def attempts_of(conn: Connection, payment_id: UUID, limit: int = 200) -> list[WebhookAttempt]:
    """The logged attempts of one payment's webhook, oldest first (at most `limit`)."""
    rows = await conn.fetch(SQL["webhook_attempts_of_payment"], payment_id, limit)
    return [
        WebhookAttempt(r["attempt"], r["http_status"], r["error"], r["attempted_at"]) for r in rows
    ]
