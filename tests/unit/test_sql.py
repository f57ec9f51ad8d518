"""Every query name used in code exists in its component's queries.sql."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payflow.db.queries import load_queries, parse_queries

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "payflow"
USE = re.compile(r"SQL\[\"([a-z_0-9]+)\"\]")


def _packages_with_queries() -> list[Path]:
    return sorted(path.parent for path in PACKAGE_ROOT.rglob("queries.sql"))


@pytest.mark.parametrize("package_dir", _packages_with_queries(), ids=lambda p: p.name)
def test_every_used_query_name_exists(package_dir: Path) -> None:
    dotted = "payflow." + ".".join(package_dir.relative_to(PACKAGE_ROOT).parts)
    names = set(load_queries(dotted))
    used: set[str] = set()
    for module in package_dir.rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        if f'load_queries("{dotted}")' in text or "from payflow.ledger.states import SQL" in text:
            used |= set(USE.findall(text))
    assert used, f"no module of {dotted} uses its queries"
    assert used <= names, f"unknown query names: {sorted(used - names)}"


def test_callers_outside_the_package_use_known_names() -> None:
    ledger = set(load_queries("payflow.ledger"))
    for module in PACKAGE_ROOT.rglob("*.py"):
        text = module.read_text(encoding="utf-8")
        if "from payflow.ledger.states import SQL" in text:
            assert set(USE.findall(text)) <= ledger, module


def test_parser_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")


def test_parser_strips_parameter_comments() -> None:
    assert parse_queries("-- name: a\n-- $1 thing\nSELECT $1;\n") == {"a": "SELECT $1"}
