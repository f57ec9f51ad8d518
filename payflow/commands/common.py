"""Shared by the `payflow` command and its command groups: settings, running a
coroutine with one-line errors, and the stderr console."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg
import typer
import uvloop
from rich.console import Console

from payflow.config import Settings, SettingsError, exit_on_settings_error, load_settings
from payflow.errors import PayflowError, is_connection_error

T = TypeVar("T")

# One-line errors stay one line; markup is off, because messages carry operator input and
# stored text (event ids, DLQ errors) that must print as is, never be parsed as markup.
console = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as error:
        exit_on_settings_error(error)
        raise  # unreachable: exit_on_settings_error raises SystemExit


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return uvloop.run(coro)
    except PayflowError as error:
        console.print(f"payflow: {type(error).__name__}: {error}", style="red")
        raise typer.Exit(1) from None
    except OSError as error:
        console.print(f"payflow: cannot reach a service: {error}", style="red")
        raise typer.Exit(1) from None
    except (asyncpg.InternalClientError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
        if is_connection_error(error):
            # A session lost mid-command (a failover, a terminated backend). What was not
            # committed rolled back; a commit whose answer was lost may have landed, so the
            # operator checks before running it again.
            console.print(
                f"payflow: the command lost its database session ({error}); "
                "check what landed, then run it again",
                style="red",
            )
            raise typer.Exit(1) from None
        if isinstance(error, asyncpg.InternalClientError):
            console.print(f"payflow: the database driver failed: {error}", style="red")
            raise typer.Exit(1) from None
        # An argument the command did not validate reached PostgreSQL (or asyncpg's
        # encoder): one line naming the refusal, never a traceback.
        first = (str(error).strip().splitlines() or [""])[0]
        console.print(f"payflow: the database refused this: {first}", style="red")
        raise typer.Exit(1) from None


OPERATOR_MAX = 200  # an operator's name (--by)
NOTE_MAX = 1000  # a free-text reason (--reason)
REFERENCE_MAX = 256  # a gateway's id of a charge (charge_attempts_reference_length)


def bounded_option(value: str, option: str, limit: int) -> str:
    """`value` when it holds at most `limit` characters; else one line naming `option`
    and its maximum, exit 2, before anything runs (a 300-character `--reference` must not
    come back as the table's CHECK constraint text)."""
    if len(value) > limit:
        console.print(f"payflow: {option} is at most {limit} characters", style="red")
        raise typer.Exit(2)
    return value
