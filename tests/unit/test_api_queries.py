"""Every query name the API components use exists in their queries.sql."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payflow.db.queries import load_queries

ROOT = Path(__file__).resolve().parents[2] / "payflow"
USES = re.compile(r"""\bSQL\[["']([a-z_0-9]+)["']\]""")
LEDGER_USES = re.compile(r"""\bLEDGER_SQL\[["']([a-z_0-9]+)["']\]""")


@pytest.mark.parametrize(
    ("package", "directories"),
    [
        ("payflow.api", ["api"]),
        ("payflow.payments", ["payments"]),
        ("payflow.ingress", ["ingress"]),
    ],
)
def test_used_names_exist(package: str, directories: list[str]) -> None:
    names = set(load_queries(package))
    used: set[str] = set()
    for directory in directories:
        for path in (ROOT / directory).rglob("*.py"):
            text = path.read_text()
            if package == "payflow.api" or f'load_queries("{package}")' in text:
                used |= set(USES.findall(text))
    assert used, package
    assert used <= names, used - names


def test_ledger_names_used_by_the_api_exist() -> None:
    names = set(load_queries("payflow.ledger"))
    used = set()
    for path in (ROOT / "api").rglob("*.py"):
        used |= set(LEDGER_USES.findall(path.read_text()))
    assert used <= names
