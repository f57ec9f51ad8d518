"""`payflow treasury` and `payflow recon --gateway` refuse bad arguments with one line,
before any connection (nothing listens at the URLs given)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from payflow.cli import app

runner = CliRunner()
UNREACHABLE = {
    "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
    "REDIS_URL": "redis://127.0.0.1:1/0",
    "RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/",
}
CHECKSUMMED = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=UNREACHABLE)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("0x123", "must be 0x followed by 40 hex digits"),
        ("0x" + "0" * 40, "is the zero address"),
        (CHECKSUMMED[:2] + CHECKSUMMED[2:].swapcase(), "fails its EIP-55 checksum"),
    ],
)
@pytest.mark.parametrize("command", ["add", "remove"])
def test_a_bad_treasury_address_is_one_line(command: str, address: str, reason: str) -> None:
    code, output = invoke("treasury", command, "ETH_MAINNET", address)
    assert code == 2, output
    assert "Traceback" not in output and reason in output
    assert output.count("\n") == 1


@pytest.mark.parametrize("by", ["", "a" * 201, "evil\x1b[2J"])
def test_who_registers_a_treasury_address_is_printable(by: str) -> None:
    code, output = invoke("treasury", "add", "ETH_MAINNET", CHECKSUMMED, "--by", by)
    assert code == 2, output
    assert "--by is 1 to 200 printable characters" in output


def test_a_gateway_recon_date_must_be_a_day() -> None:
    code, output = invoke("recon", "--gateway", "--date", "2026-13-01")
    assert code == 2, output
    assert "Traceback" not in output
