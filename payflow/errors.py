"""The error taxonomy, and the one place where driver errors are classified.

Every failure payflow raises is one of three kinds:

- `RetryableError`: transient; the same work may succeed if tried again later
  (lock timeout, statement timeout, deadlock, serialization failure, the
  connection class of `is_connection_error`: a session lost or refused, or on a
  standby after a failover, and `CommitUnconfirmed`: a commit the synchronous standby
  never confirmed).
- `BusinessOutcome`: a final, recorded answer such as insufficient funds; never retried.
- `BadInput`: the request itself is wrong; retrying it unchanged cannot help.
"""

from __future__ import annotations

import asyncio

import aiormq
import asyncpg
import httpx

# Contention: the database is up and the same work may succeed on the next try.
RETRYABLE_SQLSTATES: frozenset[str] = frozenset(
    {
        "55P03",  # lock_not_available (lock_timeout)
        "57014",  # query_canceled (statement_timeout)
        "40P01",  # deadlock_detected
        "40001",  # serialization_failure
    }
)
# The session itself was ended or refused by the server (the connection class, below).
CONNECTION_SQLSTATES: frozenset[str] = frozenset(
    {
        "57P01",  # admin_shutdown: pg_terminate_backend, a fast shutdown, a failover
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (server starting up, or in recovery)
        "57P05",  # idle_session_timeout
    }
)
# The session reached a node that cannot take writes: 25006 read_only_sql_transaction, a
# standby (or a primary being demoted) under a DSN without `target_session_attrs`. A fresh
# session, which `target_session_attrs=read-write` sends to the primary, may succeed;
# `db.transaction` ends such a session so the pool does not hand it out again.
WRONG_NODE_SQLSTATES: frozenset[str] = frozenset({"25006"})
# Whole SQLSTATE classes of the connection class: 08 connection exceptions (PgBouncer
# answers 08P01 for its own failures: server gone, pool full, query_wait_timeout), and
# 53 insufficient resources (e.g. 53300 too_many_connections while other clients hold
# every slot). Classified as permanent, they dead-lettered messages at attempt 1.
CONNECTION_SQLSTATE_CLASSES: tuple[str, ...] = ("08", "53")
# asyncpg errors about the client's own configuration or features: retrying the same
# work on the same settings cannot help, although they derive from `InterfaceError`.
_PERMANENT_INTERFACE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.ClientConfigurationError,
    asyncpg.exceptions.UnsupportedClientFeatureError,
    asyncpg.exceptions.UnsupportedServerFeatureError,
)
# The warning PostgreSQL sends instead of an error when a commit's wait for the
# synchronous standby is cancelled: "... The transaction has already committed locally,
# but might not have been replicated to the standby." (`CommitUnconfirmed`).
UNCONFIRMED_COMMIT_WARNING = "canceling wait for synchronous replication"
# numeric_value_out_of_range: an amount or balance that does not fit its column. Never
# retryable; `ledger.posting` turns it into the terminal `amount_overflow` outcome.
NUMERIC_OUT_OF_RANGE = "22003"


class PayflowError(Exception):
    """Root of every error payflow raises on purpose."""


class RetryableError(PayflowError):
    """Transient failure: the caller may retry the whole unit of work."""


class CommitUnconfirmed(RetryableError):
    """The primary committed a transaction that its synchronous standby never confirmed:
    the wait for the standby was cancelled (a cancel request, such as an operator's or a
    manager's `pg_cancel_backend`; `statement_timeout` is disarmed before a commit), and
    PostgreSQL then reports success with only a warning. Such a commit is lost if the
    primary fails over now, so it is never answered as done: every payflow write is
    idempotent, and its retry finds the commit (no failover) or writes it again on the
    new primary."""


# Every exception the database driver raises for a statement, a transaction or an
# acquire: what a loop that must outlive the database catches (then `classify`).
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,  # ConnectionError, and TimeoutError (asyncio's too) derive from it
    CommitUnconfirmed,  # raised by payflow's pooled connection for a statement (db.pool)
)


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
    if is_connection_error(exc):
        return RetryableError(f"connection lost: {type(exc).__name__}: {exc}"[:500])
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate in RETRYABLE_SQLSTATES:
            return RetryableError(f"{type(exc).__name__} ({sqlstate})")
        if sqlstate == NUMERIC_OUT_OF_RANGE:
            return AmountOutOfRange("a value is outside the range its column can hold")
        if isinstance(exc, asyncpg.DataError | asyncpg.IntegrityConstraintViolationError):
            return BadInput(f"{type(exc).__name__}: {exc}")
        return DatabaseError(f"{type(exc).__name__} ({sqlstate}): {exc}")
    return DatabaseError(f"{type(exc).__name__}: {exc}")


def is_connection_error(exc: BaseException) -> bool:
    """True when `exc` says the database session is gone, broken or cannot be had now:
    the retryable connection class. A failover, a PgBouncer restart, an idle-session
    timeout or `pg_terminate_backend` ends a session, and the driver reports it as any
    of these, depending on where in the protocol the end finds the client:

    * SQLSTATE classes 08 (connection exception: `ConnectionDoesNotExistError`,
      `ConnectionFailureError`, PgBouncer's 08P01) and 53 (`TooManyConnectionsError`);
      57P01 admin_shutdown (`AdminShutdownError`, a terminated backend), 57P02
      crash_shutdown, 57P03 cannot_connect_now, 57P05 idle_session_timeout;
    * 25006 read_only_sql_transaction: the session is on a standby, not the primary
      (`is_wrong_node`);
    * `asyncpg.InternalClientError` and its subclasses (`ProtocolError`,
      `OutdatedSchemaCacheError`, `TargetServerAttributeNotMatched`): the client's
      protocol state machine met a connection that ended mid-exchange, e.g.
      "cannot switch to state 15; another operation (2) is in progress";
    * `asyncpg.InvalidCachedStatementError`: a statement prepared on a session that a
      pooler swapped or the schema changed under; a fresh try prepares it again;
    * `asyncpg.InterfaceError` ("connection is closed", "connection was closed in the
      middle of operation", a pool closing), except the client-configuration errors
      and the encoder's refusal of an argument (its `DataError`, also a `ValueError`);
    * `OSError` (`ConnectionResetError`, refused, unreachable) and timeouts.

    The same work on a fresh session may succeed: never a reason to dead-letter.
    """
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None) or ""
        return (
            sqlstate in CONNECTION_SQLSTATES
            or sqlstate in WRONG_NODE_SQLSTATES
            or sqlstate.startswith(CONNECTION_SQLSTATE_CLASSES)
            or isinstance(exc, asyncpg.InvalidCachedStatementError)
        )
    if isinstance(exc, _PERMANENT_INTERFACE_ERRORS):
        return False
    if isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError):
        # asyncpg's client-side DataError ("invalid input for query argument"): the
        # encoder refused a value; the same value fails on any session.
        return False
    return isinstance(
        exc,
        asyncpg.InternalClientError
        | asyncpg.InterfaceError
        | ConnectionError
        | OSError
        | asyncio.TimeoutError,
    )


def is_wrong_node(exc: BaseException) -> bool:
    """True when `exc` says the session is on a node that takes no writes (SQLSTATE
    25006: a standby, or a primary being demoted). Retryable like a lost session, but
    the session itself must be dropped: every write on it fails the same way."""
    return isinstance(exc, asyncpg.PostgresError) and (
        getattr(exc, "sqlstate", None) in WRONG_NODE_SQLSTATES
    )


def is_retryable(exc: BaseException) -> bool:
    """True when `classify(exc)` is retryable."""
    return isinstance(classify(exc), RetryableError)
