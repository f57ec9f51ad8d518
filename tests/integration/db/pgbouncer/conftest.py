"""The core paths through a real PgBouncer in transaction pooling mode.

One private pgbouncer runs for the whole test run (`bouncer`), on a free port, with its
own config and auth file in a temporary directory; a `*` database entry points every
database name at the shared PostgreSQL, so each test's own database is reachable
through it. The app role logs in with SCRAM against the auth file (the run's
`APP_PASSWORD`).

In this package the service's fixtures go through pgbouncer: `settings`, `pool`,
`pipe_settings` and `api_settings` use `DATABASE_URL` = pgbouncer with
`DB_STATEMENT_CACHE_SIZE=0`, and `DATABASE_DIRECT_URL` = PostgreSQL itself for the
relay's LISTEN. `owner_pool` (set-up the service may not do) stays direct.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote

import asyncpg
import pytest

from payflow.config import Settings
from payflow.db.pool import create_pool
from tests.conftest import APP_PASSWORD, APP_ROLE
from tests.integration.api.conftest import (  # noqa: F401 (fixtures used by the tests here)
    admin,
    anon,
    app,
    client,
    redis_cleanup,
    redis_prefix,
)
from tests.integration.api.conftest import (  # noqa: F401 (fixture direct_api_settings)
    api_settings as direct_api_settings,
)
from tests.integration.conftest import (  # noqa: F401 (fixture direct_pipe_settings)
    pipe_settings as direct_pipe_settings,
)
from tests.integration.db.pgbouncer.bouncer import PgBouncer

BEHIND_BOUNCER = {"db_statement_cache_size": 0}


@pytest.fixture(scope="session")
def bouncer(db_roles: tuple[str, str]) -> Iterator[PgBouncer]:
    """This run's pgbouncer (transaction pooling), stopped at the end of the session."""
    # Not under pytest's 0700 tmp tree: pgbouncer drops root privileges to `postgres`
    # and must still read its directory.
    workdir = Path(tempfile.mkdtemp(prefix="payflow-pgbouncer-"))
    workdir.chmod(0o700)
    running = PgBouncer.start(workdir, {APP_ROLE: APP_PASSWORD})
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def bouncer_url(bouncer: PgBouncer, database_name: str) -> str:
    """The test's database as the app role, through pgbouncer."""
    return bouncer.url(APP_ROLE, quote(APP_PASSWORD), database_name)


def through_bouncer(settings: Settings, bouncer_url: str) -> Settings:
    """`settings` with the service behind pgbouncer: DATABASE_URL through it, the
    statement cache off, and the former direct URL kept for the relay's LISTEN."""
    return settings.model_copy(
        update={
            "database_url": bouncer_url,
            "database_direct_url": settings.database_url,
            **BEHIND_BOUNCER,
        }
    )


@pytest.fixture
def settings(settings: Settings, bouncer_url: str) -> Settings:
    return through_bouncer(settings, bouncer_url)


@pytest.fixture
async def pool(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """The service's view (app role) through pgbouncer; more client connections than
    pgbouncer has server connections for the database."""
    pool = await create_pool(settings, min_size=1, max_size=12)
    yield pool
    await pool.close()


# The pipeline's and the API's own settings, imported under other names (fixtures
# `direct_pipe_settings` / `direct_api_settings`), then moved behind pgbouncer.
@pytest.fixture
def pipe_settings(direct_pipe_settings: Settings, bouncer_url: str) -> Settings:  # noqa: F811
    return through_bouncer(direct_pipe_settings, bouncer_url)


@pytest.fixture
def api_settings(direct_api_settings: Settings, bouncer_url: str) -> Settings:  # noqa: F811
    return through_bouncer(direct_api_settings, bouncer_url)
