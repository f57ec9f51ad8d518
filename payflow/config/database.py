"""PostgreSQL: where the service connects, its roles, its pool and the bounds of
every transaction (docs/architecture.md#database-roles)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from payflow.config.base import Slice, service_url, with_user


class DatabaseSettings(Slice):
    """The `database` slice (`settings.database`); the module's docstring says what it covers."""

    slice_name = "database"

    # The service logs in as the APP role (least privilege, see docs/architecture.md);
    # migrations connect with MIGRATION_DATABASE_URL and run as DB_OWNER_ROLE.
    database_url: str = "postgresql://payflow_app@127.0.0.1:5432/payflow"
    """PostgreSQL, the source of truth. Its user is the service's (app) role, never a superuser or
    the owner (docs/architecture.md#database-roles). With a standby, libpq's multi-host form
    `postgresql://payflow_app@h1:5432,h2:5432/payflow?target_session_attrs=read-write`: every
    new session goes to the host that takes writes (docs/deployment.md)."""
    database_direct_url: str | None = None
    """PostgreSQL itself (same app role), for the one connection that needs a session: the relay's
    LISTEN. Unset: DATABASE_URL. Set it when DATABASE_URL goes through PgBouncer in transaction
    pooling; otherwise the relay LISTENs through PgBouncer, gets no notifications and publishes
    on its RELAY_POLL_INTERVAL_S poll alone (docs/operations.md, "PgBouncer")."""
    migration_database_url: str | None = None
    """The login `payflow migrate` uses: a superuser, or a role with CREATEROLE and CREATEDB. Unset:
    DATABASE_URL's server and database as user `postgres`."""
    db_owner_role: str = Field(default="payflow_owner", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """The role that owns every table, sequence and function; migrations run as it."""
    db_pool_min: int = Field(default=2, ge=1)
    """Connections each process keeps open in its pool, at least."""
    db_pool_max: int = Field(default=20, ge=1)
    """Connections each process may open in its pool, at most."""
    db_statement_cache_size: int = Field(default=100, ge=0)
    """Prepared statements asyncpg caches per connection; **0 behind PgBouncer in transaction (or
    statement) pooling**: a named statement prepared on one server connection is missing on the
    next one (PgBouncer 1.18, Debian bookworm's; from 1.21 `max_prepared_statements` could keep
    the cache, untested here)."""
    lock_timeout_ms: int = Field(default=2000, ge=1)
    """`SET LOCAL lock_timeout` of every transaction: how long a posting queues on a hot account
    row."""
    statement_timeout_ms: int = Field(default=5000, ge=1)
    """`SET LOCAL statement_timeout` of every transaction."""
    posting_max_attempts: int = Field(default=5, ge=1)
    """Attempts of a posting on retryable errors (lock or statement timeout, deadlock,
    serialization)."""

    @field_validator("database_url", "database_direct_url", "migration_database_url")
    @classmethod
    def _database_service_url_valid(cls, value: str | None, info: ValidationInfo) -> str | None:
        return service_url(value, info.field_name)

    def migration_url(self) -> str:
        """The URL migrations connect with: MIGRATION_DATABASE_URL, or by default the
        `postgres` superuser on DATABASE_URL's servers and database (trust auth locally);
        a multi-host DATABASE_URL keeps every host and its `target_session_attrs`."""
        if self.migration_database_url:
            return self.migration_database_url
        return with_user(self.database_url, "postgres")

    def direct_url(self) -> str:
        """The URL of a session the relay may LISTEN on: DATABASE_DIRECT_URL, or by
        default DATABASE_URL (right when DATABASE_URL reaches PostgreSQL directly)."""
        return self.database_direct_url or self.database_url
