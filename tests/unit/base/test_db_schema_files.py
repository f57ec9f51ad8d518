"""The readable schema's files: functions.sql parsing and rendering, the generator's
normalisation of pg_dump output and its functions.sql updates, and the rule that a
migration loading a body from functions.sql is the newest change of that function."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payflow.db import functions, schema

ROOT = Path(__file__).resolve().parents[3]
MIGRATIONS = ROOT / "payflow" / "db" / "migrations" / "versions"

SAMPLE = """\
-- What this file holds.

-- name: first_fn
-- Does the first thing.
-- In two lines.
CREATE OR REPLACE FUNCTION public.first_fn()
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
    BEGIN
        -- a comment inside the body is part of the statement
        RETURN 1;
    END
    $function$;

-- name: placeholder_fn
-- Filled by the generator.

-- name: bare_fn
CREATE OR REPLACE FUNCTION public.bare_fn()
 RETURNS integer
 LANGUAGE sql
AS $function$ SELECT 2 $function$;
"""


def test_functions_sql_parses_and_renders_back_unchanged() -> None:
    parsed = functions.parse_functions(SAMPLE)
    assert parsed.preamble == "-- What this file holds."
    assert [entry.name for entry in parsed.entries] == ["first_fn", "placeholder_fn", "bare_fn"]
    first = parsed.by_name()["first_fn"]
    assert first.comments == "-- Does the first thing.\n-- In two lines."
    assert first.statement.startswith("CREATE OR REPLACE FUNCTION public.first_fn()")
    assert "-- a comment inside the body is part of the statement" in first.statement
    assert first.statement.endswith("$function$")
    assert parsed.by_name()["placeholder_fn"].statement == ""
    assert functions.render_functions(parsed) == SAMPLE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "listed twice"),
        ("CREATE FUNCTION x() RETURNS int AS 'select 1' LANGUAGE sql;\n-- name: x\n", "precede"),
    ],
)
def test_functions_sql_refuses_a_repeated_name_or_a_statement_before_the_first(
    text: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        functions.parse_functions(text)


def test_every_functions_sql_is_in_the_generators_form() -> None:
    """A hand edit that the generator would rewrite (spacing, a missing `;`) shows here."""
    files = functions.function_files()
    assert set(files) == {
        "payflow.db",
        "payflow.ledger",
        "payflow.payments",
        "payflow.webhooks",
        "payflow.webhooks.attempts",
    }
    for path in files.values():
        text = path.read_text(encoding="utf-8")
        parsed = functions.parse_functions(text)
        assert functions.render_functions(parsed) == text, path
        assert all(entry.statement for entry in parsed.entries), path


def test_a_migration_can_load_a_function_statement() -> None:
    statement = functions.function_definition("payflow.payments", "payment_finalize")
    assert statement.startswith("CREATE OR REPLACE FUNCTION public.payment_finalize(")
    assert "p.status NOT IN ('succeeded', 'failed')" in statement
    with pytest.raises(KeyError, match="no_such_function"):
        functions.function_definition("payflow.payments", "no_such_function")


def test_normalise_dump_drops_run_keys_and_versions_and_names_roles_stably() -> None:
    dump = (
        "--\n-- PostgreSQL database dump\n--\n\n"
        "\\restrict AbC123randomKey\n\n"
        "-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)\n"
        "-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)\n\n\n\n"
        "CREATE TABLE public.t (id integer);   \n\n"
        "GRANT SELECT ON TABLE public.t TO payflow_app_x1;\n"
        "GRANT SELECT ON TABLE public.t TO payflow_app_x1_other;\n"
        "ALTER DEFAULT PRIVILEGES FOR ROLE payflow_owner_x1 IN SCHEMA public"
        " GRANT SELECT ON TABLES  TO payflow_app_x1;\n\n"
        "\\unrestrict AbC123randomKey\n\n"
    )
    roles = {"payflow_owner_x1": "payflow_owner", "payflow_app_x1": "payflow_app"}
    assert schema.normalise_dump(dump, roles) == schema.HEADER + (
        "\n--\n-- PostgreSQL database dump\n--\n\n"
        "CREATE TABLE public.t (id integer);\n\n"
        "GRANT SELECT ON TABLE public.t TO payflow_app;\n"
        "GRANT SELECT ON TABLE public.t TO payflow_app_x1_other;\n"
        "ALTER DEFAULT PRIVILEGES FOR ROLE payflow_owner IN SCHEMA public"
        " GRANT SELECT ON TABLES  TO payflow_app;\n"
    )
    # Another run's key and role names give the same text.
    other = dump.replace("AbC123randomKey", "zzz").replace("_x1", "_y2")
    assert schema.normalise_dump(
        other, {"payflow_owner_y2": "payflow_owner", "payflow_app_y2": "payflow_app"}
    ) == schema.normalise_dump(dump, roles).replace("payflow_app_x1_other", "payflow_app_y2_other")


def _definition(name: str, body: str = "SELECT 1") -> str:
    return (
        f"CREATE OR REPLACE FUNCTION public.{name}()\n RETURNS integer\n LANGUAGE sql\n"
        f"AS $function$ {body} $function$\n"
    )


def test_update_functions_fills_rewrites_adds_grant_hooks_and_names_the_unowned(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    (ledger / "functions.sql").write_text(
        "-- Ledger functions.\n\n"
        "-- name: post_it\n-- Posts.\n" + _definition("post_it", "SELECT 0") + ";\n\n"
        "-- name: new_fn\n-- Just added by hand.\n\n"
        "-- name: gone_fn\n" + _definition("gone_fn") + ";\n",
        encoding="utf-8",
    )
    head = {
        "post_it": _definition("post_it", "SELECT 1"),
        "new_fn": _definition("new_fn"),
        "payflow_grant_extra_0099_x": _definition("payflow_grant_extra_0099_x"),
        "orphan_fn": _definition("orphan_fn"),
    }
    update = schema.update_functions(head, tmp_path)
    assert update.unowned == ["orphan_fn"]
    assert update.removed == ["gone_fn"]
    assert update.files[ledger / "functions.sql"] == (
        "-- Ledger functions.\n\n"
        "-- name: post_it\n-- Posts.\n" + _definition("post_it", "SELECT 1").rstrip() + ";\n\n"
        "-- name: new_fn\n-- Just added by hand.\n" + _definition("new_fn").rstrip() + ";\n"
    )
    assert update.files[tmp_path / "db" / "functions.sql"] == (
        "-- name: payflow_grant_extra_0099_x\n"
        + _definition("payflow_grant_extra_0099_x").rstrip()
        + ";\n"
    )
    # Written out, the files agree with the head but for the unowned function.
    (tmp_path / "db").mkdir()
    for path, text in update.files.items():
        path.write_text(text, encoding="utf-8")
    assert schema.update_functions(head, tmp_path).files == {}
    assert schema.function_mismatches(head, tmp_path) == ["orphan_fn: no functions.sql lists it"]
    head["post_it"] = _definition("post_it", "SELECT 2")
    assert schema.function_mismatches(head, tmp_path) == [
        "orphan_fn: no functions.sql lists it",
        "post_it: payflow.ledger's functions.sql differs from the database",
    ]


# A migration's call that loads a body: function_definition("payflow.x", "name").
_LOADS = re.compile(r"function_definition\(\s*\"[\w.]+\",\s*\"(\w+)\"\s*\)")


def _unfrozen_loads(migrations: list[tuple[str, str]]) -> list[str]:
    """(migration, function) pairs where a migration loads a function's body from
    functions.sql but a LATER migration changes that function again (mentions it in a
    CREATE [OR REPLACE] FUNCTION or loads it): the earlier one must paste its text."""
    problems = []
    for index, (revision, text) in enumerate(migrations):
        for name in _LOADS.findall(text):
            changed_later = re.compile(
                rf"(CREATE (OR REPLACE )?FUNCTION (public\.)?{name}\b|\"{name}\"\s*\))"
            )
            later = [rev for rev, body in migrations[index + 1 :] if changed_later.search(body)]
            if later:
                problems.append(f"{revision} loads {name}, which {later[0]} changes again")
    return problems


def test_a_migration_that_loads_a_body_is_that_functions_newest_change() -> None:
    migrations = [
        (path.stem, path.read_text(encoding="utf-8")) for path in sorted(MIGRATIONS.glob("0*.py"))
    ]
    assert len(migrations) >= 25
    assert _unfrozen_loads(migrations) == []


def test_the_freeze_rule_catches_a_load_that_a_later_migration_changes() -> None:
    loads = 'execute_all([function_definition("payflow.payments", "payment_finalize")])'
    assert _unfrozen_loads([("0030_a", loads), ("0031_b", "CREATE INDEX x ON y (z)")]) == []
    assert _unfrozen_loads([("0030_a", loads), ("0031_b", loads)]) == [
        "0030_a loads payment_finalize, which 0031_b changes again"
    ]
    replaced = "CREATE OR REPLACE FUNCTION payment_finalize(p_id uuid)"
    assert _unfrozen_loads([("0030_a", loads), ("0031_b", replaced)]) == [
        "0030_a loads payment_finalize, which 0031_b changes again"
    ]
