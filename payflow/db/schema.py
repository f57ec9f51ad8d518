"""The head schema in one readable file, generated: `payflow/db/schema.sql`.

    uv run python -m payflow.db.schema [SERVER_URL] [--check]      (or: make schema)

SERVER_URL is a PostgreSQL server as a superuser (or a role with CREATEROLE and
CREATEDB), e.g. postgresql://postgres@127.0.0.1:5432 (the default, or $PAYFLOW_TEST_PG).
The command makes a throwaway database and two throwaway roles on it, migrates the
database to head by `payflow migrate`'s own path, then

1. writes `pg_dump --schema-only --no-owner` of it, normalised (`normalise_dump`), to
   payflow/db/schema.sql;
2. rewrites each function's statement in the functions.sql that lists it with its
   `pg_get_functiondef` (comments stay); a `payflow_grant_*` function no file lists is
   added to payflow/db/functions.sql, an entry whose function is gone is removed, and any
   other function no file lists is an error (add `-- name: <function>` to the
   functions.sql of its owning package and run again);

and drops the database and the roles. `--check` writes nothing and exits 1 when either
would change. tests/integration/db/test_schema.py checks the same on every test run.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import asyncpg
from alembic.util import CommandError
from sqlalchemy.exc import SQLAlchemyError

from payflow.db import migrate
from payflow.db.functions import (
    FUNCTIONS_FILE,
    FunctionEntry,
    FunctionsFile,
    function_files,
    normalise_definition,
    package_root,
    read_functions,
    render_functions,
)
from payflow.errors import PayflowError

DEFAULT_SERVER_URL: Final = "postgresql://postgres@127.0.0.1:5432"
COMMAND: Final = "uv run python -m payflow.db.schema [SERVER_URL]  (or: make schema)"
# The role names schema.sql shows: the defaults of DB_OWNER_ROLE and DATABASE_URL's user.
OWNER_PLACEHOLDER: Final = "payflow_owner"
APP_PLACEHOLDER: Final = "payflow_app"
# Functions of the grant machinery (payflow/db/migrate.py calls them) live in db/.
GRANT_FUNCTION: Final = re.compile(r"^payflow_grant_")
GRANTS_PACKAGE: Final = "payflow.db"

HEADER: Final = f"""\
-- The schema at the head revision: GENERATED, do not edit.
-- Regenerate after adding a migration: {COMMAND}
-- Migrations are the history; this file and each package's functions.sql are today's truth.
-- Roles: {OWNER_PLACEHOLDER} owns everything (ownership not shown), {APP_PLACEHOLDER} is the
-- service's login (payflow migrate names them after DB_OWNER_ROLE and DATABASE_URL).
"""

# Lines that change from run to run or from build to build: the session key pg_dump
# (15.14+, 16.10+, 17.6+) wraps its output in, and its version banner.
_VOLATILE_LINE: Final = re.compile(
    r"^(\\restrict .*|\\unrestrict .*|-- Dumped (from database|by pg_dump) version .*)$"
)

# Every ordinary function and procedure in schema public that no extension brought.
_FUNCTION_DEFINITIONS: Final = """
SELECT p.proname, pg_get_functiondef(p.oid) AS definition
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
  AND p.prokind IN ('f', 'p')
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
ORDER BY p.proname, p.oid::regprocedure::text
"""


class SchemaError(PayflowError):
    """The head schema cannot be generated or checked (one line for the operator)."""


@dataclass(frozen=True, slots=True)
class HeadSchema:
    """A database at head: its normalised dump (schema.sql's text) and {function name:
    pg_get_functiondef text} of every function in schema public."""

    dump: str
    functions: dict[str, str]


def schema_path() -> Path:
    """payflow/db/schema.sql."""
    return package_root() / "db" / "schema.sql"


def normalise_dump(dump: str, roles: Mapping[str, str]) -> str:
    """schema.sql's text from a `pg_dump --schema-only --no-owner` output.

    `roles` maps each run's role name to the name schema.sql shows ({owner: "payflow_owner",
    app: "payflow_app"}); pg_dump's run key and version lines go, trailing blanks and runs
    of blank lines collapse, and `HEADER` comes first. pg_dump orders objects by kind and
    name, so the same schema gives the same text.
    """
    pattern = (
        re.compile(
            r"(?<![A-Za-z0-9_$])("
            + "|".join(re.escape(name) for name in sorted(roles, key=len, reverse=True))
            + r")(?![A-Za-z0-9_$])"
        )
        if roles
        else None
    )
    lines: list[str] = []
    for raw in dump.splitlines():
        line = raw.rstrip()
        if _VOLATILE_LINE.match(line):
            continue
        if pattern is not None:
            line = pattern.sub(lambda match: roles[match.group(1)], line)
        if not line and (not lines or not lines[-1]):
            continue
        lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return HEADER + "\n" + "\n".join(lines) + "\n"


def _major(version_text: str) -> int:
    match = re.search(r"(\d+)(?:\.\d+)?", version_text)
    if match is None:
        raise SchemaError(f"cannot read a PostgreSQL version from {version_text!r}")
    return int(match.group(1))


def pg_dump_binary(server_major: int, explicit: str | None = None) -> str:
    """The pg_dump to use: `explicit`, $PG_DUMP, Debian's /usr/lib/postgresql/<major>/bin,
    or the one on PATH; `SchemaError` unless its major version is the server's (another
    major version prints the same schema differently)."""
    candidates = [explicit, os.environ.get("PG_DUMP")]
    candidates.append(f"/usr/lib/postgresql/{server_major}/bin/pg_dump")
    candidates.append(shutil.which("pg_dump"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            version = subprocess.run(  # noqa: S603 (a pg_dump binary, fixed arguments)
                [candidate, "--version"], capture_output=True, text=True, check=True
            ).stdout
            if _major(version) == server_major:
                return candidate
            if candidate in (explicit, os.environ.get("PG_DUMP")):
                banner = (version.strip().splitlines() or ["no version"])[0]
                raise SchemaError(
                    f"{candidate} is {banner!r}, the server is PostgreSQL {server_major}"
                )
    raise SchemaError(
        f"no pg_dump of PostgreSQL {server_major} found (set PG_DUMP or pass --pg-dump)"
    )


def dump_schema(database_url: str, roles: Mapping[str, str], pg_dump: str | None = None) -> str:
    """The normalised schema of the database at `database_url` (see `normalise_dump`)."""
    server_major = asyncio.run(_server_major(database_url))
    binary = pg_dump_binary(server_major, pg_dump)
    result = subprocess.run(  # noqa: S603 (pg_dump with fixed arguments and our URL)
        [binary, "--schema-only", "--no-owner", "--no-tablespaces", f"--dbname={database_url}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SchemaError(f"pg_dump failed: {result.stderr.strip()}")
    return normalise_dump(result.stdout, roles)


async def _server_major(database_url: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval("SHOW server_version_num")) // 10000
    finally:
        await conn.close()


async def function_definitions(conn: asyncpg.Connection) -> dict[str, str]:
    """{function name: pg_get_functiondef} of every function and procedure in schema
    public; `SchemaError` when a name is overloaded (functions.sql lists one per name)."""
    definitions: dict[str, str] = {}
    for row in await conn.fetch(_FUNCTION_DEFINITIONS):
        if row["proname"] in definitions:
            raise SchemaError(f"function {row['proname']!r} is overloaded; name each one apart")
        definitions[row["proname"]] = row["definition"]
    return definitions


def read_head(
    database_url: str, roles: Mapping[str, str], pg_dump: str | None = None
) -> HeadSchema:
    """The dump and function definitions of the (migrated) database at `database_url`."""

    async def definitions() -> dict[str, str]:
        conn = await asyncpg.connect(database_url)
        try:
            return await function_definitions(conn)
        finally:
            await conn.close()

    return HeadSchema(
        dump=dump_schema(database_url, roles, pg_dump), functions=asyncio.run(definitions())
    )


def generate_head(server_url: str, pg_dump: str | None = None) -> HeadSchema:
    """Migrate a throwaway database on `server_url` to head with throwaway roles (the path
    of `payflow migrate`), read it (`read_head`), drop the database and the roles."""
    run = uuid.uuid4().hex[:10]
    owner, app = f"payflow_schema_owner_{run}", f"payflow_schema_app_{run}"
    database_url = migrate.with_database(server_url, f"payflow_schema_{run}")
    try:
        migrate.migrate_database(database_url, owner=owner, app=app)
        return read_head(database_url, {owner: OWNER_PLACEHOLDER, app: APP_PLACEHOLDER}, pg_dump)
    finally:
        try:
            asyncio.run(_drop(server_url, migrate.database_name(database_url), (app, owner)))
        except (OSError, asyncpg.PostgresError) as error:  # the first error matters more
            print(
                f"payflow.db.schema: could not drop {migrate.database_name(database_url)}"
                f" and roles {owner}, {app}: {error}",
                file=sys.stderr,
            )


async def _drop(server_url: str, database: str, roles: tuple[str, ...]) -> None:
    conn = await asyncpg.connect(migrate.with_database(server_url, "postgres"))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        for role in roles:
            await conn.execute(f'DROP ROLE IF EXISTS "{role}"')
    finally:
        await conn.close()


@dataclass(frozen=True, slots=True)
class FunctionsUpdate:
    """What the functions.sql files become: {path: new text} of the files that change,
    the functions no file lists (need an owner), the stale entries removed."""

    files: dict[Path, str]
    unowned: list[str]
    removed: list[str]


def update_functions(definitions: Mapping[str, str], root: Path | None = None) -> FunctionsUpdate:
    """Each functions.sql under `root` with its statements set to `definitions` (see the
    module docstring for unlisted and gone functions)."""
    base = root or package_root()
    files = function_files(base)
    grants_path = base.joinpath(*GRANTS_PACKAGE.split(".")[1:], FUNCTIONS_FILE)
    parsed = {path: read_functions(path) for path in files.values()}
    parsed.setdefault(grants_path, FunctionsFile(preamble="", entries=()))
    listed = {entry.name for functions in parsed.values() for entry in functions.entries}
    removed = sorted(listed - set(definitions))
    unowned = sorted(name for name in definitions if name not in listed)
    changed: dict[Path, str] = {}
    for path, functions in parsed.items():
        entries = [
            replace(entry, statement=definitions[entry.name].rstrip())
            for entry in functions.entries
            if entry.name in definitions
        ]
        if path == grants_path:
            entries += [
                FunctionEntry(name=name, comments="", statement=definitions[name].rstrip())
                for name in unowned
                if GRANT_FUNCTION.match(name)
            ]
        text = render_functions(replace(functions, entries=tuple(entries)))
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if text != current and (entries or current is not None):
            changed[path] = text
    return FunctionsUpdate(
        files=changed,
        unowned=[name for name in unowned if not GRANT_FUNCTION.match(name)],
        removed=removed,
    )


def schema_diff(expected: str, actual: str, *, limit: int = 60) -> str:
    """A unified diff of schema.sql (expected) against a database's dump (actual), at most
    `limit` lines; "" when equal."""
    diff = list(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "schema.sql", "database", lineterm=""
        )
    )
    if len(diff) > limit:
        diff = [*diff[:limit], f"... ({len(diff) - limit} more diff lines)"]
    return "\n".join(diff)


def function_mismatches(definitions: Mapping[str, str], root: Path | None = None) -> list[str]:
    """One line per function whose functions.sql statement is not its definition in the
    database (normalised, `normalise_definition`), or which no functions.sql lists, or
    which is listed but not in the database; [] when they all agree."""
    listed: dict[str, tuple[str, FunctionEntry]] = {}
    for package, path in function_files(root).items():
        for entry in read_functions(path).entries:
            listed[entry.name] = (package, entry)
    problems = [
        f"{name}: no functions.sql lists it" for name in sorted(definitions) if name not in listed
    ]
    for name, (package, entry) in sorted(listed.items()):
        if name not in definitions:
            problems.append(f"{name}: listed by {package} but not in the head schema")
        elif normalise_definition(entry.statement) != normalise_definition(definitions[name]):
            problems.append(f"{name}: {package}'s functions.sql differs from the database")
    return problems


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m payflow.db.schema",
        description="Write payflow/db/schema.sql and the functions.sql statements from a"
        " throwaway database migrated to head.",
    )
    parser.add_argument(
        "server_url",
        nargs="?",
        default=os.environ.get("PAYFLOW_TEST_PG", DEFAULT_SERVER_URL),
        help="PostgreSQL server as a superuser or a CREATEROLE+CREATEDB role"
        f" (default $PAYFLOW_TEST_PG or {DEFAULT_SERVER_URL}); a database in it is ignored",
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    parser.add_argument("--pg-dump", help="the pg_dump binary (default $PG_DUMP, then PATH)")
    args = parser.parse_args(argv)
    server_url = migrate.with_database(args.server_url, "postgres")
    try:
        head = generate_head(server_url, args.pg_dump)
        update = update_functions(head.functions)
    except (
        PayflowError,
        ValueError,
        OSError,
        subprocess.SubprocessError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        CommandError,
        SQLAlchemyError,
    ) as error:
        # One line: a failing migration's SQL error, an unreachable server, a bad URL.
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"payflow.db.schema: {first}", file=sys.stderr)
        return 1
    target = schema_path()
    current = target.read_text(encoding="utf-8") if target.exists() else ""
    changes = dict(update.files)
    if head.dump != current:
        changes[target] = head.dump
    root = package_root().parent
    for path in sorted(changes):
        print(f"{'would change' if args.check else 'wrote'} {path.relative_to(root)}")
        if not args.check:
            path.write_text(changes[path], encoding="utf-8")
    for name in update.removed:
        print(f"{'would remove' if args.check else 'removed'} the entry of gone function {name}")
    for name in update.unowned:
        print(
            f"payflow.db.schema: function {name} is in no functions.sql: add '-- name: {name}'"
            " to the functions.sql of its owning package and run again",
            file=sys.stderr,
        )
    if update.unowned or (args.check and changes):
        return 1
    if not changes:
        print("schema.sql and every functions.sql already match the head")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
