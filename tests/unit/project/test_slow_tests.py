"""`SLOW_TESTS` in tests/conftest.py names real tests, each with a reason, so `make
test-fast` leaves out what it means to and nothing is skipped by a stale entry."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SLOW_TESTS

ROOT = Path(__file__).resolve().parents[3]


def _test_names(module: Path) -> set[str]:
    """`name` and `Class::name` of every test function in `module`."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}::{child.name}"
                for child in node.body
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return {name for name in names if name.split("::")[-1].startswith("test")}


def test_every_slow_entry_names_a_module_or_test_and_says_why() -> None:
    stale = []
    for entry, reason in SLOW_TESTS.items():
        path, _, test = entry.partition("::")
        module = ROOT / path
        if not module.is_file() or (test and test not in _test_names(module)):
            stale.append(entry)
        assert reason.strip(), entry
    assert stale == []


def test_no_unit_test_is_slow() -> None:
    """`make test-unit` is the seconds loop: a slow test belongs in tests/integration."""
    assert [entry for entry in SLOW_TESTS if entry.startswith("tests/unit/")] == []
