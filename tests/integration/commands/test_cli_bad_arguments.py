"""Bad arguments to `payflow` commands are one clear line, never a traceback.

`payflow dlq show 99999999999999999999` and `payflow merchants create ""` must print no
asyncpg traceback; `payflow alerts ack` and `payflow jobs run` must not print
`[red]…[/red]` literally; `payflow payments resolve ID --approved --declined` must be
refused, not record whichever flag came last. None of these needs a service:
each is refused before any connection, or `_run` turns the driver's refusal into a line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest
import typer
from typer.testing import CliRunner

from payflow.cli import app
from payflow.commands.common import _run

runner = CliRunner()
UNREACHABLE = {
    # Nothing listens here: a command that got past its argument checks would fail to
    # connect (one line as well), never reach a real database.
    "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/",
}


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=UNREACHABLE)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("command", ["show", "replay"])
@pytest.mark.parametrize("value", ["99999999999999999999", "9223372036854775808", "0"])
def test_dlq_ids_outside_bigint_are_usage_errors(command: str, value: str) -> None:
    code, output = invoke("dlq", command, value)
    assert code == 2, output
    assert "Traceback" not in output and "dlq_id" in output


@pytest.mark.parametrize(
    "name",
    # Control characters and line breaks are refused: an escape sequence in a name
    # would rewrite the operator's terminal when a table printed it.
    ["", "a" * 201, "a\x00b", "evil\x1b[2J\x1b[31mRED", "line1\nline2", "tab\there", "a\u2028b"],
)
def test_merchant_names_the_table_refuses_are_one_line(name: str) -> None:
    code, output = invoke("merchants", "create", name)
    assert code == 2, output
    assert output.strip() == (
        "payflow: a merchant name is 1 to 200 printable characters"
        " (no NUL, control characters or line breaks)"
    )


@pytest.mark.parametrize("flags", [[], ["--approved", "--declined"], ["--declined", "--approved"]])
def test_payments_resolve_needs_exactly_one_outcome(flags: list[str]) -> None:
    code, output = invoke("payments", "resolve", "00000000-0000-0000-0000-000000000000", *flags)
    assert code == 2, output
    assert output.strip() == "payflow: give exactly one of --approved or --declined"


def test_unknown_job_prints_no_markup_tags() -> None:
    code, output = invoke("jobs", "run", "no-such-job")
    assert code == 2, output
    assert output.startswith("payflow: unknown job 'no-such-job'")
    assert "[red]" not in output and "[/red]" not in output


def test_a_driver_refusal_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    async def refused() -> None:
        raise asyncpg.CheckViolationError(
            'new row for relation "merchants" violates check constraint\nDETAIL: …'
        )

    async def unencodable() -> None:
        raise asyncpg.DataError("invalid input for query argument $1: 1e20 (out of range)")

    for coro in (refused, unencodable):
        with pytest.raises(typer.Exit) as exit_info:
            _run(coro())
        assert exit_info.value.exit_code == 1
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("payflow: the database refused this: ")


def test_chaos_without_anvil_is_one_line_before_any_service_starts(tmp_path: Path) -> None:
    # Found starting the 100k run from a worktree with no `.tools`: a 40-line traceback
    # after the private PostgreSQL, RabbitMQ and Redis had already been started.
    env = {**UNREACHABLE, "ANVIL_BIN": str(tmp_path / "no-anvil")}
    result = runner.invoke(app, ["chaos", "--events", "50", "--log-dir", str(tmp_path)], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == (
        f"chaos: cannot run: ANVIL_BIN={str(tmp_path / 'no-anvil')!r} is not an executable file"
    )
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # no process was started, so no log was written


def test_chaos_ha_without_anvil_is_one_line_before_any_lab_starts(tmp_path: Path) -> None:
    env = {**UNREACHABLE, "ANVIL_BIN": str(tmp_path / "no-anvil")}
    result = runner.invoke(app, ["chaos", "--ha", "--events", "50"], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.splitlines()[-1] == (
        f"chaos: cannot run: ANVIL_BIN={str(tmp_path / 'no-anvil')!r} is not an executable file"
    )
    assert "Traceback" not in result.output


def test_chaos_ha_and_soak_together_are_refused() -> None:
    code, output = invoke("chaos", "--ha", "--soak", "10")
    assert code == 2, output
    assert "--ha and --soak are two runs" in output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["unmatched", "replay", "\udcff"], "argument 3 is not UTF-8 text"),
        (["alerts", "ack", "k", "--by", "\udcff"], "argument 5 is not UTF-8 text"),
        (["tokens", "list", "--chain", "\udcff"], "argument 4 is not UTF-8 text"),
        (["assets", "set-limit", "\udcff", "--payment", "5"], "argument 3 is not UTF-8 text"),
        (["dlq", "replay", "2", "--by", "ops\x1b[31mRED"], "argument 5 holds a control"),
        (["dlq", "replay", "2", "--reason", "r\x1b]0;TITLE\x07"], "argument 5 holds a control"),
        (["payments", "resolve", "x", "--approved", "--by", "a\nb"], "argument 6 holds a control"),
        (["merchants", "create", "a\tb"], "argument 3 holds a control"),
    ],
)
def test_every_command_refuses_arguments_that_are_not_printable_text(
    args: list[str], reason: str
) -> None:
    """Bytes that are not UTF-8 never reach asyncpg, and labels with escape sequences are
    never stored or echoed to the terminal: the entry point refuses them for every
    command, before anything runs."""
    done = subprocess.run(
        [sys.executable, "-c", "from payflow.cli import main; main()", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        check=False,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"payflow: {reason}"), lines
    assert "Traceback" not in done.stderr and "asyncpg" not in done.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            [
                "payments",
                "resolve",
                "00000000-0000-0000-0000-000000000000",
                "--approved",
                "--reference",
                "x" * 257,
            ],
            "payflow: --reference is at most 256 characters",
        ),
        (
            [
                "payments",
                "resolve",
                "00000000-0000-0000-0000-000000000000",
                "--declined",
                "--by",
                "o" * 201,
            ],
            "payflow: --by is at most 200 characters",
        ),
        (
            ["dlq", "replay", "1", "--reason", "r" * 1001],
            "payflow: --reason is at most 1000 characters",
        ),
        (["dlq", "replay", "1", "--by", "o" * 201], "payflow: --by is at most 200 characters"),
        (["alerts", "ack", "k", "--by", "o" * 201], "payflow: --by is at most 200 characters"),
    ],
)
def test_operator_labels_are_bounded_before_anything_runs(args: list[str], line: str) -> None:
    """A 300-character `--reference` is refused by the command in one line, never by the
    table's CHECK constraint text: operator labels are bounded before anything runs."""
    code, output = invoke(*args)
    assert code == 2, output
    assert output.strip() == line
