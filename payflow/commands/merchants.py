"""`payflow merchants`: merchants and their API keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

import typer

from payflow.commands.common import _run, _settings, console

if TYPE_CHECKING:
    from payflow.api.keys import ApiKey

merchants_app = typer.Typer(no_args_is_help=True, help="Merchants and their API keys.")


@merchants_app.command("create")
def merchants_create(
    name: Annotated[str, typer.Argument(help="Merchant name")],
    admin: Annotated[bool, typer.Option("--admin", help="Grant operator endpoints")] = False,
) -> None:
    """Create a merchant and print its API key and webhook signing secret, once."""
    from payflow.api.auth import MERCHANT_NAME_RULE, valid_merchant_name
    from payflow.api.server import create_merchant_cli

    if not valid_merchant_name(name):
        console.print(f"payflow: {MERCHANT_NAME_RULE}", style="red")
        raise typer.Exit(2)
    merchant_id, key, secret = _run(create_merchant_cli(_settings(), name, admin=admin))
    typer.echo(f"merchant_id={merchant_id}")
    typer.echo(f"api_key={key}")
    typer.echo(f"webhook_secret={secret}")
    console.print("store both now: payflow keeps only a hash of the API key")


keys_app = typer.Typer(
    no_args_is_help=True,
    help="A merchant's API keys: create (shown once), list, revoke.",
)
merchants_app.add_typer(keys_app, name="keys")


def _expiry(value: str | None) -> datetime | None:
    """`--expires-at` as an aware time (a time without an offset is UTC); exit 2 with one
    line for text that is no ISO 8601 time or a time not in the future."""
    if value is None:
        return None
    from payflow.api.keys import checked_expiry
    from payflow.errors import BadInput

    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        console.print("payflow: --expires-at is an ISO 8601 time, e.g. 2027-01-01T00:00Z")
        raise typer.Exit(2) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return checked_expiry(moment)
    except BadInput as error:
        console.print(f"payflow: --expires-at: {error}", style="red")
        raise typer.Exit(2) from None


def _print_key(key: ApiKey) -> None:
    typer.echo(
        "\t".join(
            [
                str(key.id),
                str(key.merchant_id),
                key.merchant_name or "",
                key.name,
                key.scope.value,
                key.status,
                f"...{key.hint}" if key.hint else "-",
                f"expires={_at(key.expires_at)}",
                f"last_used={_at(key.last_used_at)}",
            ]
        )
    )


def _at(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "-"


@keys_app.command("create")
def keys_create(
    merchant_id: Annotated[UUID, typer.Argument(help="The merchant's id")],
    name: Annotated[str, typer.Option("--name", help="What the key is for (1-100 chars)")],
    scope: Annotated[
        str, typer.Option("--scope", help="read (GET/HEAD only) or write (may move money)")
    ],
    expires_at: Annotated[
        str | None, typer.Option("--expires-at", help="ISO 8601 time; no offset means UTC")
    ] = None,
) -> None:
    """Create a key and print it once (payflow keeps only its SHA-256)."""
    from payflow.api.keys import checked_name, checked_scope, create_key_cli
    from payflow.errors import BadInput

    try:
        checked_name(name)
        checked_scope(scope)
    except BadInput as error:
        console.print(f"payflow: {error}", style="red")
        raise typer.Exit(2) from None
    moment = _expiry(expires_at)
    key, secret = _run(create_key_cli(_settings().database, merchant_id, name, scope, moment))
    typer.echo(f"key_id={key.id}")
    typer.echo(f"api_key={secret}")
    console.print("store it now: payflow keeps only a hash of the API key")


@keys_app.command("list")
def keys_list(
    merchant_id: Annotated[
        UUID | None, typer.Argument(help="Only this merchant's keys (default: every merchant)")
    ] = None,
) -> None:
    """Print id, merchant id and name, key name, scope, status, hint, expiry and last
    use, one key per line, revoked and expired keys included."""
    from payflow.api.keys import list_keys_cli

    for key in _run(list_keys_cli(_settings().database, merchant_id)):
        _print_key(key)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[UUID, typer.Argument(help="The key's id")],
    force: Annotated[
        bool, typer.Option("--force", help="Also revoke the merchant's last active write key")
    ] = False,
) -> None:
    """Revoke a key: 401 at once in new lookups, within API_AUTH_CACHE_SECONDS in every
    API process; its console sessions end at once. Revoking twice changes nothing."""
    from payflow.api.keys import revoke_key_cli

    key, revoked, last = _run(revoke_key_cli(_settings().database, key_id, force=force))
    _print_key(key)
    if not revoked:
        console.print("payflow: that key was revoked already; nothing changed")
    elif last:
        console.print("payflow: that was the merchant's last active write key", style="yellow")
