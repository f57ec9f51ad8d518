"""`payflow dlq`: inspect and replay the dead-letter queue."""

from __future__ import annotations

from typing import Annotated

import typer

from payflow.commands.common import NOTE_MAX, OPERATOR_MAX, _run, _settings, bounded_option

# dead_letter_queue.id is a BIGSERIAL: anything outside 1..2^63-1 is a usage error.
DlqId = Annotated[int, typer.Argument(help="DLQ row id", min=1, max=2**63 - 1)]

dlq_app = typer.Typer(no_args_is_help=True, help="Inspect and replay the dead-letter queue.")


@dlq_app.command("list")
def dlq_list(
    all_rows: Annotated[bool, typer.Option("--all", help="Include resolved rows")] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
) -> None:
    """List dead letters, newest first."""
    from payflow.ops.dlq_cli import print_list

    _run(print_list(_settings(), include_resolved=all_rows, limit=limit))


@dlq_app.command("show")
def dlq_show(dlq_id: DlqId) -> None:
    """Show one dead letter in full."""
    from payflow.ops.dlq_cli import print_one

    _run(print_one(_settings(), dlq_id))


@dlq_app.command("replay")
def dlq_replay(
    dlq_id: DlqId,
    by: Annotated[str, typer.Option("--by", help="Operator name recorded as resolved_by")] = "",
    reason: Annotated[str, typer.Option("--reason", help="Why; appended to the resolution")] = "",
) -> None:
    """Replay one dead letter by hand; audited, and never applies anything twice."""
    import getpass

    from payflow.ops.dlq_cli import replay_one

    reason = bounded_option(reason, "--reason", NOTE_MAX)
    operator = bounded_option(by, "--by", OPERATOR_MAX) or getpass.getuser()
    _run(replay_one(_settings(), dlq_id, operator, reason))
