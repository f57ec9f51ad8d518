"""The error taxonomy, and the one place where driver errors are classified.

Every failure payflow raises is one of three kinds:

- `RetryableError`: transient; the same work may succeed if tried again later
  (lock timeout, statement timeout, deadlock, serialization failure, lost connection).
- `BusinessOutcome`: a final, recorded answer such as insufficient funds; never retried.
- `BadInput`: the request itself is wrong; retrying it unchanged cannot help.
"""

from __future__ import annotations

import asyncio

import aiormq
import asyncpg
import httpx

RETRYABLE_SQLSTATES: frozenset[str] = frozenset(
    {
        "55P03",  # lock_not_available (lock_timeout)
        "57014",  # query_canceled (statement_timeout)
        "40P01",  # deadlock_detected
        "40001",  # serialization_failure
        "57P01",  # admin_shutdown (server restarting)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (server starting up)
    }
)
# Whole SQLSTATE classes that are transient: 08 connection exceptions, and 53
# insufficient resources (e.g. 53300 too_many_connections while other clients hold
# every slot). Classified as permanent, they dead-lettered messages at attempt 1.
RETRYABLE_SQLSTATE_CLASSES: tuple[str, ...] = ("08", "53")
# numeric_value_out_of_range: an amount or balance that does not fit its column. Never
# retryable; `ledger.posting` turns it into the terminal `amount_overflow` outcome.
NUMERIC_OUT_OF_RANGE = "22003"


class PayflowError(Exception):
    """Root of every error payflow raises on purpose."""


class RetryableError(PayflowError):
    """Transient failure: the caller may retry the whole unit of work."""


class ChainUnavailable(RetryableError):
    """The chain's node cannot be asked now (circuit breaker open, or the call failed).

    Deposits wait on it; they never fail because of it."""


class BusinessOutcome(PayflowError):
    """A terminal business answer (for example insufficient funds); never retried."""


class BadInput(PayflowError):
    """The input is invalid; retrying it unchanged cannot succeed."""


class NotFound(BadInput):
    """The named object does not exist (or belongs to someone else)."""


class Conflict(PayflowError):
    """The request conflicts with stored state (idempotency key reuse, unique address)."""


class IdCollision(Conflict):
    """An id payflow derives itself (for example ``payment:<uuid>``) is already taken by a
    row payflow did not write for it. The transaction stops; nothing is skipped silently."""


class InsufficientFunds(BusinessOutcome):
    """A debit larger than the available balance."""


class AccountFrozen(BusinessOutcome):
    """The account is frozen and refuses debits."""


class AlreadyProcessed(BusinessOutcome):
    """The work was already done; its recorded outcome stands."""


class AmountOutOfRange(BadInput):
    """A value does not fit its NUMERIC column (SQLSTATE 22003, numeric_value_out_of_range).

    Deliberately without the driver's text: it is shown to clients as a 422.
    """


class ToolMissing(PayflowError):
    """A program payflow runs itself (anvil for a local chain) is not installed."""


class DatabaseError(PayflowError):
    """A database error that is neither retryable nor an expected constraint outcome."""


class DeliveryRefused(PayflowError):
    """A receiver answered with a status that retrying cannot fix (for example 400 or 410)."""


class WebhookHTTPStatus(Exception):
    """Raw outcome of a webhook POST that did not return 2xx; `classify` decides its kind."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"receiver answered HTTP {status_code}")
        self.status_code = status_code


class WebhookTransportError(Exception):
    """A webhook POST that got no HTTP answer: refused (nothing pinned, a connect that
    failed on every pinned address), reset, timed out, TLS or protocol failure. The text
    names the cause (`payflow.webhooks.client`); `classify` makes it retryable."""


class WebhookSendCancelled(Exception):
    """A webhook POST cut short by a stop after its request may have reached the merchant:
    recorded as a failed attempt (counted), never as "no POST was made"."""

    def __init__(self) -> None:
        super().__init__("the send was cancelled (the process is stopping) during its POST")


RETRYABLE_HTTP_STATUSES: frozenset[int] = frozenset({408, 429})


def classify(exc: BaseException) -> PayflowError:
    """Translate a driver or I/O exception into payflow's taxonomy.

    This is the only place that knows which SQLSTATEs are retryable. Payflow's own
    errors pass through unchanged.
    """
    if isinstance(exc, PayflowError):
        return exc
    if isinstance(exc, WebhookHTTPStatus):
        if exc.status_code in RETRYABLE_HTTP_STATUSES or exc.status_code >= 500:
            return RetryableError(str(exc))
        return DeliveryRefused(str(exc))
    if isinstance(exc, WebhookTransportError):
        # No answer from a merchant (refused, reset, timeout, TLS): it may recover.
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, httpx.TimeoutException | httpx.TransportError):
        # Timeouts, refused or reset connections, DNS failures: the receiver may recover.
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, aiormq.exceptions.AMQPConnectionError | aiormq.exceptions.ChannelClosed):
        return RetryableError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate in RETRYABLE_SQLSTATES or (sqlstate or "").startswith(
            RETRYABLE_SQLSTATE_CLASSES
        ):
            return RetryableError(f"{type(exc).__name__} ({sqlstate})")
        if sqlstate == NUMERIC_OUT_OF_RANGE:
            return AmountOutOfRange("a value is outside the range its column can hold")
        if isinstance(exc, asyncpg.DataError | asyncpg.IntegrityConstraintViolationError):
            return BadInput(f"{type(exc).__name__}: {exc}")
        return DatabaseError(f"{type(exc).__name__} ({sqlstate}): {exc}")
    if isinstance(
        exc,
        asyncpg.InterfaceError | ConnectionError | OSError | asyncio.TimeoutError,
    ):
        return RetryableError(f"{type(exc).__name__}: {exc}")
    return DatabaseError(f"{type(exc).__name__}: {exc}")


def is_retryable(exc: BaseException) -> bool:
    """True when `classify(exc)` is retryable."""
    return isinstance(classify(exc), RetryableError)
