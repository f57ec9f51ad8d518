"""`payflow unmatched`: provider events kept for review."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import _run, _settings, console

# --- kept provider events: the operator's redelivery
unmatched_app = typer.Typer(no_args_is_help=True, help="Provider events kept for review.")


@unmatched_app.command("replay")
def unmatched_replay(
    event_id: Annotated[str, typer.Argument(help="Id of a row in unmatched_provider_events")],
) -> None:
    """Land that event's stored delivery again, as a provider redelivery would (after
    assigning the address, registering the token or raising the limit). Prints one
    line per event: stored id, result, reason."""
    from payflow.ingress.replay import replay_unmatched

    settings = _settings()
    trace_id, landings = _run(
        replay_unmatched(settings.ingress, event_id, database=settings.database)
    )
    for landing in landings:
        reason = landing.reason.value if landing.reason is not None else ""
        typer.echo(f"{landing.event_id}\t{landing.result.value}\t{reason}")
    console.print(f"replayed as trace {trace_id}")
