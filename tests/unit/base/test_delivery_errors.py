"""Classification of delivery failures: one place decides what is retried."""

from __future__ import annotations

import httpx
import pytest

from payflow.errors import DeliveryRefused, RetryableError, WebhookHTTPStatus, classify


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retryable_statuses(status: int) -> None:
    assert isinstance(classify(WebhookHTTPStatus(status)), RetryableError)


@pytest.mark.parametrize("status", [400, 401, 404, 410, 422])
def test_refused_statuses(status: int) -> None:
    assert isinstance(classify(WebhookHTTPStatus(status)), DeliveryRefused)


def test_timeouts_and_connection_errors_are_retryable() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/")
    assert isinstance(classify(httpx.ReadTimeout("slow", request=request)), RetryableError)
    assert isinstance(classify(httpx.ConnectError("refused", request=request)), RetryableError)


def test_connection_and_resource_sqlstates_are_retryable() -> None:
    """Too many clients, a restarting server or a lost connection must not dead-letter."""
    import asyncpg

    from payflow.errors import DatabaseError

    for error in (
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.ConnectionDoesNotExistError("connection does not exist"),
    ):
        assert isinstance(classify(error), RetryableError), type(error)
    assert isinstance(classify(asyncpg.UndefinedTableError("no such table")), DatabaseError)
