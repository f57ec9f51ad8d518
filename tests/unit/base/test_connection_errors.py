"""`errors.classify` on every member of the connection class: a session lost, ended or
refused is retryable (never dead-lettered at its first attempt); the client's own
configuration errors and real refusals stay permanent."""

from __future__ import annotations

import asyncpg
import pytest

from payflow.dlq.fallback import is_database_unavailable
from payflow.errors import (
    DRIVER_ERRORS,
    BadInput,
    DatabaseError,
    RetryableError,
    classify,
    is_connection_error,
)


def _sqlstate(error: type[asyncpg.PostgresError], sqlstate: str) -> asyncpg.PostgresError:
    exc = error("the server said so")
    exc.sqlstate = sqlstate  # type: ignore[attr-defined]  # set by the driver from the wire
    return exc


CONNECTION_CLASS: list[BaseException] = [
    # asyncpg's protocol state machine meeting a session that ended mid-exchange
    asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress"),
    asyncpg.exceptions.ProtocolError("unexpected message"),
    asyncpg.exceptions.OutdatedSchemaCacheError("cache lookup failed for type"),
    asyncpg.exceptions.TargetServerAttributeNotMatched("not a primary"),
    asyncpg.InterfaceError("connection is closed"),
    asyncpg.InterfaceError("cannot call Connection.execute(): connection has been released"),
    # SQLSTATE 08: the connection exception class (PgBouncer answers 08P01)
    asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    _sqlstate(asyncpg.ConnectionDoesNotExistError, "08003"),
    _sqlstate(asyncpg.ConnectionFailureError, "08006"),
    _sqlstate(asyncpg.ProtocolViolationError, "08P01"),
    _sqlstate(asyncpg.PostgresConnectionError, "08000"),
    # a terminated backend, a crash, a server starting, an idle session ended
    _sqlstate(asyncpg.AdminShutdownError, "57P01"),
    _sqlstate(asyncpg.CrashShutdownError, "57P02"),
    _sqlstate(asyncpg.CannotConnectNowError, "57P03"),
    _sqlstate(asyncpg.PostgresError, "57P05"),
    # insufficient resources: every slot taken
    _sqlstate(asyncpg.TooManyConnectionsError, "53300"),
    # a session on a standby (a DSN without target_session_attrs, or a demoted primary)
    _sqlstate(asyncpg.ReadOnlySQLTransactionError, "25006"),
    _sqlstate(asyncpg.InvalidCachedStatementError, "0A000"),
    ConnectionResetError("reset by peer"),
    ConnectionRefusedError("refused"),
    BrokenPipeError("broken pipe"),
    OSError("no route to host"),
    TimeoutError(),
]


@pytest.mark.parametrize("exc", CONNECTION_CLASS, ids=lambda e: type(e).__name__)
def test_every_member_of_the_connection_class_is_retryable(exc: BaseException) -> None:
    assert is_connection_error(exc)
    assert isinstance(classify(exc), RetryableError)
    assert is_database_unavailable(exc)  # an on_dead hook parks it in Redis instead
    assert isinstance(exc, DRIVER_ERRORS)  # what a role's loop catches


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (asyncpg.ClientConfigurationError("bad sslmode"), DatabaseError),
        (asyncpg.exceptions.UnsupportedClientFeatureError("no"), DatabaseError),
        # the encoder refusing an argument (asyncpg's client-side DataError, an
        # InterfaceError too): the same value fails on every session
        (asyncpg.exceptions._base.DataError("invalid input for query argument $1"), DatabaseError),
        (_sqlstate(asyncpg.UniqueViolationError, "23505"), BadInput),
        (_sqlstate(asyncpg.UndefinedTableError, "42P01"), DatabaseError),
        (_sqlstate(asyncpg.PostgresError, "57P04"), DatabaseError),  # database dropped
    ],
    ids=lambda e: type(e).__name__,
)
def test_configuration_errors_and_refusals_are_not_the_connection_class(
    exc: BaseException, kind: type[Exception]
) -> None:
    assert not is_connection_error(exc)
    assert isinstance(classify(exc), kind)


@pytest.mark.parametrize(
    "exc",
    [
        _sqlstate(asyncpg.LockNotAvailableError, "55P03"),
        _sqlstate(asyncpg.QueryCanceledError, "57014"),
        _sqlstate(asyncpg.DeadlockDetectedError, "40P01"),
        _sqlstate(asyncpg.SerializationError, "40001"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_contention_is_retryable_but_not_a_lost_session(exc: BaseException) -> None:
    assert isinstance(classify(exc), RetryableError)
    assert not is_connection_error(exc)
    assert not is_database_unavailable(exc)  # the message retries in the broker instead
