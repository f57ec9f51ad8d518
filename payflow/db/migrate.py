"""Apply migrations (idempotently), creating the roles and the database first.

`migrate(settings)` is what `payflow migrate` runs, connecting with the migration URL
(a superuser, or a role with CREATEROLE and CREATEDB that may SET ROLE to the owner):

1. `ensure_roles`: the OWNER role (NOLOGIN, owns every object) and the APP role (the
   user of DATABASE_URL: LOGIN, no superuser, no CREATEROLE/CREATEDB), when missing;
2. `ensure_database`: the database, owned by the owner;
3. `adopt_schema`: schema `public` closed to PUBLIC, and objects an earlier run left
   owned by another role (e.g. `postgres`) handed to the owner;
4. `upgrade(..., owner_role=…)`: the migrations, as the owner (`SET ROLE`);
5. `grant_service`: the app role's privileges (`payflow_grant_service`, migration 0009).
Every step is idempotent and safe to run concurrently. `downgrade` steps the schema down,
refusing steps that would drop data unless forced.
"""

from __future__ import annotations

import asyncio
import re
from importlib import resources
from urllib.parse import unquote, urlsplit, urlunsplit

import asyncpg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from payflow.db.migrations.statements import DataLossRefused

__all__ = [
    "CommandError",
    "DataLossRefused",
    "admin_url",
    "database_name",
    "downgrade",
    "ensure_database",
    "script_directory",
    "upgrade",
]

from payflow.errors import PayflowError

# The key env.py's session lock uses: role set-up, schema adoption, migrations and grants
# of one database never run concurrently (role set-up takes it in database `postgres`).
MIGRATION_LOCK_KEY = 7_240_001


class RoleSetupError(PayflowError):
    """The roles cannot give least privilege (for example the app role is a superuser)."""


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def single_host_url(database_url: str) -> str:
    """`database_url` itself, or for libpq's multi-host form (`postgresql://u@h1,h2/db`,
    which SQLAlchemy cannot parse) the URL of the one host that takes writes now: the
    driver picks it (`target_session_attrs=read-write` is added when absent) and the
    server names its own address. Runs outside an event loop."""
    if "," not in urlsplit(database_url).netloc:
        return database_url
    parts = urlsplit(database_url)
    query = [q for q in parts.query.split("&") if q and not q.startswith("target_session_attrs=")]
    dsn = urlunsplit(
        (
            parts.scheme,
            parts.netloc,
            parts.path,
            "&".join([*query, "target_session_attrs=read-write"]),
            "",
        )
    )

    async def ask() -> tuple[str, int]:
        conn = await asyncpg.connect(dsn)
        try:
            row = await conn.fetchrow("SELECT host(inet_server_addr()), inet_server_port()")
        finally:
            await conn.close()
        assert row is not None and row[0] is not None, "a multi-host URL needs TCP hosts"
        return str(row[0]), int(row[1])

    host, port = asyncio.run(ask())
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + (f"[{host}]" if ":" in host else host)
    return urlunsplit((parts.scheme, f"{netloc}:{port}", parts.path, "&".join(query), ""))


def _alembic_config(database_url: str) -> Config:
    config = Config()
    location = resources.files("payflow.db").joinpath("migrations")
    config.set_main_option("script_location", str(location))
    if database_url != "postgresql://unused/unused":
        database_url = single_host_url(database_url)
    scheme, rest = database_url.split("://", 1)
    config.set_main_option("sqlalchemy.url", "postgresql+asyncpg://" + rest)
    del scheme
    return config


def script_directory() -> ScriptDirectory:
    """The migration history (one linear chain of revisions, 0001 to the head)."""
    return ScriptDirectory.from_config(_alembic_config("postgresql://unused/unused"))


def database_name(database_url: str) -> str:
    """The database named in a postgres URL."""
    return urlsplit(database_url).path.lstrip("/")


def admin_url(database_url: str) -> str:
    """The same server, but the `postgres` maintenance database."""
    parts = urlsplit(database_url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` instead (same server and credentials)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def login_password(database_url: str) -> str | None:
    """The password a URL carries, if any."""
    password = urlsplit(database_url).password
    return unquote(password) if password else None


def login_role(database_url: str) -> str:
    """The role a URL logs in as; `ValueError` when it names none."""
    user = urlsplit(database_url).username
    if not user:
        raise ValueError("DATABASE_URL must name the service's role (postgresql://ROLE@host/db)")
    return unquote(user)


async def ensure_database(database_url: str, *, owner: str | None = None) -> bool:
    """Create the database named in `database_url` if absent; True when it was created.

    Connects to the `postgres` maintenance database with `database_url`'s credentials;
    `owner` (a role that login may SET ROLE to) becomes the new database's owner.
    """
    name = database_name(database_url)
    conn = await asyncpg.connect(admin_url(database_url))
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists:
            return False
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            owned = f" OWNER {_quote(owner)}" if owner else ""
            await conn.execute(f"CREATE DATABASE {quoted}{owned}")
        except asyncpg.DuplicateDatabaseError:
            return False
        return True
    finally:
        await conn.close()


def upgrade(database_url: str, revision: str = "head", *, owner_role: str | None = None) -> None:
    """Bring the schema to `revision`; running it again changes nothing.

    With `owner_role`, the migrations run after `SET ROLE owner_role`, so the owner owns
    every object they create.
    """
    config = _alembic_config(database_url)
    config.attributes["owner_role"] = owner_role
    command.upgrade(config, revision)


def downgrade(
    database_url: str, revision: str, *, force: bool = False, owner_role: str | None = None
) -> None:
    """Take the schema down to `revision` (use "base" for an empty schema).

    All steps run in ONE transaction. A step that would drop data raises
    `DataLossRefused` unless `force` is True; then every step rolls back, so a refused
    (or failed) downgrade leaves the schema and its data exactly as they were, never
    part-way down. An unknown revision, or a name that is not a step down (`head`, a
    branch or relative-up form), raises alembic's `CommandError` before anything runs.
    """
    check_downgrade_target(revision)
    config = _alembic_config(database_url)
    config.attributes["force"] = force
    config.attributes["atomic"] = True
    config.attributes["owner_role"] = owner_role
    command.downgrade(config, revision)


async def _create_role(conn: asyncpg.Connection, name: str, options: str) -> bool:
    """CREATE ROLE when missing; a concurrent creator winning the race is not an error."""
    if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", name):
        return False
    try:
        await conn.execute(f"CREATE ROLE {_quote(name)} {options}")
    except (asyncpg.DuplicateObjectError, asyncpg.UniqueViolationError):
        return False  # 42710, or 23505 on pg_authid_rolname_index while both were in flight
    return True


async def ensure_roles(
    conn: asyncpg.Connection, *, owner: str, app: str, app_password: str | None = None
) -> list[str]:
    """Create the owner (NOLOGIN) and app (LOGIN) roles when missing; returns those created.

    A new app role gets `app_password` (the password of DATABASE_URL) when one is given;
    an existing role's password is never changed.

    Roles that already exist are used as they are (bring your own roles), but must give
    least privilege: raises `RoleSetupError` when the app role is the owner, a member of
    it, a superuser, or may create roles or databases. The connected login is made a
    member of the owner when it is not a superuser, so it can `SET ROLE` to it.
    """
    if owner == app:
        raise RoleSetupError(f"the app role and DB_OWNER_ROLE are both {app!r}")
    created = []
    if await _create_role(conn, owner, "NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"):
        created.append(owner)
    login = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE INHERIT"
    if app_password:
        login += " " + await conn.fetchval("SELECT format('PASSWORD %L', $1::text)", app_password)
    if await _create_role(conn, app, login):
        created.append(app)
    row = await conn.fetchrow(
        "SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,"
        " pg_has_role($1, $2, 'MEMBER') AS in_owner FROM pg_roles r WHERE r.rolname = $1",
        app,
        owner,
    )
    assert row is not None
    if row["rolsuper"] or row["rolcreaterole"] or row["rolcreatedb"] or row["rolbypassrls"]:
        raise RoleSetupError(
            f"the app role {app!r} must not be a superuser or have CREATEROLE, CREATEDB or"
            " BYPASSRLS: the database could not defend the ledger against it"
        )
    if row["in_owner"]:
        raise RoleSetupError(f"the app role {app!r} must not be a member of the owner {owner!r}")
    if not await conn.fetchval(
        "SELECT rolsuper OR pg_has_role(current_user, $1, 'MEMBER') FROM pg_roles"
        " WHERE rolname = current_user",
        owner,
    ):
        await conn.execute(f"GRANT {_quote(owner)} TO CURRENT_USER")
    return created


_FOREIGN_OBJECTS = """
SELECT format('ALTER %s %s OWNER TO %I',
              CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                             ELSE 'TABLE' END,
              c.oid::regclass, $1::text)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND c.relowner <> $1::text::regrole
  -- sequences behind serial/identity columns follow their table
  AND NOT (c.relkind = 'S' AND EXISTS (
      SELECT 1 FROM pg_depend d
      WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
UNION ALL
SELECT format('ALTER ROUTINE %s OWNER TO %I', p.oid::regprocedure, $1::text)
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> $1::text::regrole
"""


async def adopt_schema(conn: asyncpg.Connection, *, owner: str) -> int:
    """Close schema `public` to PUBLIC, let the owner create in it, and hand every table,
    view, sequence and function in it that another role owns (a database migrated as
    `postgres` before migration 0009 added the owner role) to the owner. Returns how
    many objects changed owner."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
        if await conn.fetchval("SELECT has_schema_privilege('public', 'public', 'CREATE')"):
            await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        if not await conn.fetchval("SELECT has_schema_privilege($1, 'public', 'CREATE')", owner):
            await conn.execute(f"GRANT USAGE, CREATE ON SCHEMA public TO {_quote(owner)}")
        statements = [row[0] for row in await conn.fetch(_FOREIGN_OBJECTS, owner)]
        for statement in statements:
            await conn.execute(statement)
    return len(statements)


async def prepare_database(
    migration_url: str, *, owner: str, app: str, app_password: str | None = None
) -> bool:
    """Steps 1-3 of `migrate`: roles, the database (owned by `owner`), its schema.

    `migration_url` names the target database and logs in as a superuser or a role with
    CREATEROLE and CREATEDB. Returns True when the database was created.
    """
    conn = await asyncpg.connect(admin_url(migration_url))
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await ensure_roles(conn, owner=owner, app=app, app_password=app_password)
    finally:
        await conn.close()
    created = await ensure_database(migration_url, owner=owner)
    conn = await asyncpg.connect(migration_url)
    try:
        await adopt_schema(conn, owner=owner)
    finally:
        await conn.close()
    return created


async def grant_service(migration_url: str, *, owner: str, app: str) -> bool:
    """Step 5 of `migrate`: as the owner, give `app` exactly the service's privileges
    (`payflow_grant_service`, migration 0009). False when the schema is below 0009;
    `RoleSetupError` (nothing granted) when the app role could still create objects."""
    conn = await asyncpg.connect(migration_url)
    try:
        async with conn.transaction():
            if not await conn.fetchval("SELECT to_regprocedure('payflow_grant_service(name)')"):
                return False
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK_KEY)
            await conn.execute(f"SET LOCAL ROLE {_quote(owner)}")
            await conn.execute("SELECT payflow_grant_service($1)", app)
            # Later migrations' own narrowing (0012: `payflow_grant_extra_<revision>`).
            if await conn.fetchval("SELECT to_regprocedure('payflow_grant_hooks(name)')"):
                await conn.execute("SELECT payflow_grant_hooks($1)", app)
            # A database or schema the app role owns would let it create objects anyway.
            if await conn.fetchval("SELECT has_schema_privilege($1, 'public', 'CREATE')", app):
                raise RoleSetupError(
                    f"the app role {app!r} may create objects in schema public: it must not"
                    " own the database or the schema (ALTER DATABASE … OWNER TO the owner)"
                )
        return True
    finally:
        await conn.close()


def migrate_database(
    migration_url: str,
    *,
    owner: str,
    app: str,
    app_password: str | None = None,
    revision: str = "head",
) -> bool:
    """The whole of `payflow migrate` for one database: roles, database, schema,
    migrations as `owner`, grants to `app`. Idempotent; call it outside an event loop
    (Alembic runs its own). Returns True when the database was created."""
    created = asyncio.run(
        prepare_database(migration_url, owner=owner, app=app, app_password=app_password)
    )
    upgrade(migration_url, revision, owner_role=owner)
    asyncio.run(grant_service(migration_url, owner=owner, app=app))
    return created


def current_revision_sql() -> str:
    """SQL that reads the applied revision (for checks and tests)."""
    return "SELECT version_num FROM alembic_version"


DOWNGRADE_TARGETS = "a revision id (or its unique prefix), 'base', or -N steps"


def check_downgrade_target(revision: str) -> None:
    """Raise `CommandError` (one line) unless `revision` names a place to step down to:
    `base`, `-N` (N steps down) or a revision of this project's history. `head`, `heads`
    and alembic's branch and relative forms (`x@head`, `+1`) are refused: they name no
    step down, and alembic would take some of them as a successful no-op."""
    if revision == "base" or re.fullmatch(r"-[1-9][0-9]{0,3}", revision):
        return
    if revision not in ("head", "heads") and re.fullmatch(r"[0-9A-Za-z_]{1,64}", revision):
        try:
            if script_directory().get_revision(revision) is not None:
                return
        except CommandError:  # unknown, or an ambiguous prefix
            pass
    raise CommandError(f"--downgrade {revision!r} is not {DOWNGRADE_TARGETS}")


async def applied_revision(database_url: str) -> str | None:
    """The schema's applied revision (None at base or before any migration)."""
    conn = await asyncpg.connect(database_url)
    try:
        if await conn.fetchval("SELECT to_regclass('alembic_version')") is None:
            return None
        value: str | None = await conn.fetchval(current_revision_sql())
        return value
    finally:
        await conn.close()
