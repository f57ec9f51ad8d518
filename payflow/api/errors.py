"""The one exception handler: every failure becomes an RFC 9457 problem document.

Typed payflow errors map to statuses here and nowhere else; driver errors go through
`payflow.errors.classify` first. Anything unexpected is a 500 (a bug) and is logged.

No driver message ever reaches a client: a database error (or a payflow error that
`classify` made from one) is answered with a fixed, generic detail chosen by its kind;
its text, SQLSTATE and constraint name go to the log only.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from payflow.errors import (
    BadInput,
    BusinessOutcome,
    Conflict,
    NotFound,
    PayflowError,
    RetryableError,
    classify,
)
from payflow.idempotency.records import IdempotencyInProgress, IdempotencyKeyReused
from payflow.observability import log

from .responses import ProblemResponse, problem

PROBLEM_BASE = "https://payflow.dev/problems/"


class ApiProblem(Exception):
    """A deliberate HTTP answer other than success (401, 409 in progress, 413, 429 ...)."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        slug: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.slug = slug
        self.headers = headers


class BodyTooLarge(HTTPException):
    """The streamed body went past the configured cap (raised by the request middleware's
    capped `receive`). An `HTTPException`, because FastAPI's body parsing re-raises those
    and turns any other exception into 400 "There was an error parsing the body": a
    chunked body over the cap must be the same 413 as one refused by Content-Length."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request bodies are limited to {limit} bytes")
        self.limit = limit


class FieldError(BadInput):
    """Invalid input in one named field (`body.currency`, `query.cursor` ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _type(slug: str | None) -> str:
    return PROBLEM_BASE + slug if slug else "about:blank"


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    errors = []
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        message = str(error.get("msg", "invalid"))
        ctx = error.get("ctx") or {}
        if isinstance(ctx, dict) and isinstance(ctx.get("error"), Exception):
            message = str(ctx["error"])
        elif error.get("type") == "json_invalid":
            # The decoder's reason (a key twice, too deep, bad syntax, not UTF-8), never
            # body text; the field is the body (FastAPI's loc adds the error's position).
            reason = ctx.get("error") if isinstance(ctx, dict) else None
            message = f"not valid JSON: {str(reason)[:200]}" if reason else "not valid JSON"
            loc = loc[:1]
        message = message.removeprefix("Value error, ")
        errors.append({"field": ".".join(loc), "message": message})
    return errors


def driver_error(exc: BaseException) -> asyncpg.PostgresError | None:
    """The database driver error whose text `exc` would show, or None.

    That is `exc` itself, or a payflow error that `classify` made from a driver error
    and raised `from` it (as `payflow.retry` does): its message is the driver's text.
    A translation raised `from None` (such as `assign_address`'s `Conflict`) chose its
    own words and is trusted.
    """
    if isinstance(exc, asyncpg.PostgresError):
        return exc
    cause = exc.__cause__
    if isinstance(cause, asyncpg.PostgresError) and str(classify(cause)) == str(exc):
        return cause
    return None


def _driver_problem(driver: asyncpg.PostgresError, request_path: str) -> ProblemResponse | None:
    """A generic problem for a non-retryable driver error; None for retryable ones.

    Unique and exclusion violations are 409 (the request conflicts with stored state),
    other constraint and data errors 422; anything else is a 500. Only the log names
    the SQLSTATE, the constraint and the driver's message.
    """
    if isinstance(classify(driver), RetryableError):
        return None
    log.warning(
        "payflow.api.driver_error",
        error_type=type(driver).__name__,
        sqlstate=getattr(driver, "sqlstate", None),
        constraint=getattr(driver, "constraint_name", None),
        error=str(driver),
        path=request_path,
    )
    if isinstance(driver, asyncpg.UniqueViolationError | asyncpg.ExclusionViolationError):
        return problem(
            409,
            "Conflict",
            "the request conflicts with data already stored",
            type_=_type("conflict"),
        )
    if isinstance(driver, asyncpg.IntegrityConstraintViolationError | asyncpg.DataError):
        return problem(
            422,
            "Invalid input",
            "the request holds a value payflow cannot store",
            type_=_type("invalid-input"),
        )
    return problem(500, "Internal error", "the request failed; nothing was written")


def problem_for(exc: BaseException, request_path: str = "") -> ProblemResponse:
    """Map any exception to its problem response (the single place that decides statuses)."""
    if isinstance(exc, ApiProblem):
        return problem(
            exc.status, exc.title, exc.detail, type_=_type(exc.slug), headers=exc.headers
        )
    if isinstance(exc, RequestValidationError):
        errors = _validation_errors(exc)
        fields = ", ".join(sorted({error["field"] for error in errors}))
        return problem(
            422,
            "Request validation failed",
            f"invalid fields: {fields}",
            type_=_type("validation"),
            errors=errors,
        )
    if isinstance(exc, BodyTooLarge):
        return problem(413, "Payload too large", exc.detail, type_=_type("too-large"))
    if isinstance(exc, HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else "request failed"
        title = {404: "Not found", 405: "Method not allowed"}.get(exc.status_code, "HTTP error")
        return problem(exc.status_code, title, detail, headers=dict(exc.headers or {}))
    driver = driver_error(exc)
    if driver is not None:
        generic = _driver_problem(driver, request_path)
        if generic is not None:
            return generic
    error = classify(exc)
    if isinstance(error, NotFound):
        return problem(404, "Not found", str(error), type_=_type("not-found"))
    if isinstance(error, FieldError):
        errors = [{"field": error.field, "message": error.message}]
        return problem(
            422, "Request validation failed", str(error), type_=_type("validation"), errors=errors
        )
    field = getattr(error, "field", None)
    if isinstance(error, BadInput):
        extra: dict[str, Any] = {}
        if isinstance(field, str):
            extra["errors"] = [{"field": field, "message": getattr(error, "message", str(error))}]
        return problem(422, "Invalid input", str(error), type_=_type("invalid-input"), **extra)
    if isinstance(error, IdempotencyInProgress):
        return problem(
            409,
            "Request in progress",
            str(error),
            type_=_type("idempotency-in-progress"),
            headers={"Retry-After": "1"},
        )
    if isinstance(error, IdempotencyKeyReused):
        return problem(
            409, "Idempotency-Key reused", str(error), type_=_type("idempotency-key-reused")
        )
    if isinstance(error, Conflict):
        return problem(409, "Conflict", str(error), type_=_type("conflict"))
    if isinstance(error, BusinessOutcome):
        return problem(409, "Business rule refused the request", str(error))
    if isinstance(error, RetryableError):
        log.warning("payflow.api.retryable", error=str(error), path=request_path)
        return problem(
            503,
            "Temporarily unavailable",
            "a dependency is busy or unreachable; retry the request",
            type_=_type("unavailable"),
            headers={"Retry-After": "1"},
        )
    log.error(
        "payflow.api.unhandled",
        error_type=type(exc).__name__,
        error=str(exc),
        path=request_path,
        exc_info=exc,
    )
    return problem(500, "Internal error", "the request failed; nothing was written")


async def _handle(request: Request, exc: Exception) -> Response:
    return problem_for(exc, request.url.path)


def install_exception_handler(app: FastAPI) -> None:
    """Register the one handler for every exception family the routers can raise."""
    for family in (
        ApiProblem,
        RequestValidationError,
        HTTPException,
        PayflowError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,  # a session lost mid-exchange: 503, never a 500
        OSError,
        TimeoutError,
    ):
        app.add_exception_handler(family, _handle)
