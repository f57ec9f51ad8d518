"""Every query name used in code exists in the queries.sql it was loaded from,
and every named query is used somewhere (no dead SQL)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payflow.db.queries import load_queries, parse_queries

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "payflow"
LAB = ROOT / "lab" / "payflow_lab"
LOADED = re.compile(r"^(\w+)\s*=\s*load_queries\(\"(payflow[\w.]*)\"\)", re.MULTILINE)
IMPORTED = re.compile(r"^from (payflow[\w.]*) import [^\n]*?\bSQL\b(?: as (\w+))?", re.MULTILINE)


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _sources() -> dict[str, str]:
    """Every module of payflow and of its harness, payflow_lab (lab/): the harness posts
    through payflow's own named queries too (e.g. the benchmarks' direct submitter)."""
    files = [*PACKAGE.rglob("*.py"), *LAB.rglob("*.py")]
    return {_module_name(p): p.read_text(encoding="utf-8") for p in files}


def _bindings(sources: dict[str, str]) -> dict[str, dict[str, str]]:
    """module -> {alias of a query dict: the package whose queries.sql it holds}."""
    own = {
        module: dict((alias, package) for alias, package in LOADED.findall(text))
        for module, text in sources.items()
    }
    bindings: dict[str, dict[str, str]] = {}
    for module, text in sources.items():
        names = dict(own[module])
        for source_module, alias in IMPORTED.findall(text):
            package = own.get(source_module, {}).get("SQL")
            if package is not None:
                names[alias or "SQL"] = package
        bindings[module] = names
    return bindings


def _uses() -> dict[str, set[str]]:
    """package -> every query name some module uses from it."""
    sources = _sources()
    used: dict[str, set[str]] = {}
    for module, names in _bindings(sources).items():
        for alias, package in names.items():
            found = re.findall(rf"\b{alias}\[\"([a-z_0-9]+)\"\]", sources[module])
            used.setdefault(package, set()).update(found)
    return used


PACKAGES = sorted(
    ".".join(("payflow", *p.parent.relative_to(PACKAGE).parts))
    for p in PACKAGE.rglob("queries.sql")
)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_used_query_name_exists(package: str) -> None:
    used = _uses().get(package, set())
    assert used, f"no module uses the queries of {package}"
    assert used <= set(load_queries(package)), sorted(used - set(load_queries(package)))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_named_query_is_used(package: str) -> None:
    unused = set(load_queries(package)) - _uses().get(package, set())
    assert unused == set()


def test_parser_rejects_duplicate_names() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;")


def test_parser_strips_parameter_comments() -> None:
    assert parse_queries("-- name: a\n-- $1 thing\nSELECT $1;\n") == {"a": "SELECT $1"}


def _top(module: str) -> str:
    """The package of payflow a module or a queries.sql belongs to (`payflow.chain`)."""
    return ".".join(module.split(".")[:2])


def test_no_module_reads_another_packages_sql() -> None:
    """A package's queries.sql is its own: another package calls its functions instead
    (docs/architecture.md, "Layers"). The harness (payflow_lab) is outside the rule."""
    borrowed = sorted(
        f"{module} uses {package}'s SQL"
        for module, names in _bindings(_sources()).items()
        if module.startswith("payflow.")
        for package in names.values()
        if _top(package) != _top(module)
    )
    assert borrowed == []
