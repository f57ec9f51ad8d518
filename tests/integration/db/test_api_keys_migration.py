"""The api_keys migration (0038_api_keys): an existing merchant's key keeps working after
the upgrade, as its `default` write key, and its console session names that key; the
downgrade puts the key back into `merchants` and refuses while it would lose a key (or
revive a revoked, expired or read-only one) unless forced."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator

import httpx
import pytest

from payflow.app import create_app
from payflow.config import load_settings
from payflow.db import migrate
from payflow.db.migrations.statements import DataLossRefused
from tests.integration.db.scratch import run_sql, scratch_database

# The api_keys revision and the one before it, by name: right after any renumbering.
(_REVISION,) = [
    r for r in migrate.script_directory().walk_revisions() if r.revision.endswith("_api_keys")
]
AFTER = _REVISION.revision
BEFORE = str(_REVISION.down_revision)
KEY = "pf_" + "k" * 43  # a key of the older releases' shape
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()
SESSION = "ab" * 32


@pytest.fixture
def url() -> Iterator[str]:
    with scratch_database("api_keys") as url:
        migrate.upgrade(url, BEFORE)
        run_sql(
            url,
            "INSERT INTO merchants (id, name, api_key_hash, webhook_secret) VALUES"
            f" ('00000000-0000-0000-0000-00000000000a', 'shop', '{DIGEST}', 'whsec_a')",
            "INSERT INTO console_sessions (token_sha256, merchant_id, csrf_token, expires_at)"
            f" VALUES ('{SESSION}', '00000000-0000-0000-0000-00000000000a', '{'c' * 32}',"
            " now() + interval '1 hour')",
        )
        yield url


async def _health(url: str, key: str) -> int:
    settings = load_settings(
        database_url=url,
        provider_webhook_secret="s" * 32,
        redis_key_prefix=f"payflow-test:{uuid.uuid4().hex[:12]}:",
        log_json=False,
        log_level="WARNING",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get("/health", headers={"X-API-Key": key})).status_code


def test_an_existing_key_keeps_working_as_the_default_write_key(url: str) -> None:
    migrate.upgrade(url, AFTER)
    (key,) = run_sql(url, "SELECT * FROM api_keys")
    assert (key["name"], key["scope"], key["key_hash"]) == ("default", "write", DIGEST)
    assert key["revoked_at"] is None and key["expires_at"] is None and key["hint"] is None
    (session,) = run_sql(url, "SELECT api_key_id FROM console_sessions")
    assert session["api_key_id"] == key["id"]
    columns = run_sql(
        url,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'merchants'",
    )
    assert "api_key_hash" not in {c["column_name"] for c in columns}
    assert asyncio.run(_health(url, KEY)) == 200
    assert asyncio.run(_health(url, "pf_" + "x" * 43)) == 401
    # Down and up again: the same key, still working.
    migrate.downgrade(url, BEFORE)
    (merchant,) = run_sql(url, "SELECT api_key_hash FROM merchants")
    assert merchant["api_key_hash"] == DIGEST
    migrate.upgrade(url, AFTER)
    assert asyncio.run(_health(url, KEY)) == 200


def test_the_downgrade_refuses_to_lose_or_revive_keys_unless_forced(url: str) -> None:
    migrate.upgrade(url, AFTER)
    run_sql(
        url,
        "UPDATE api_keys SET revoked_at = now()",
        "INSERT INTO api_keys (merchant_id, name, scope, key_hash) VALUES"
        f" ('00000000-0000-0000-0000-00000000000a', 'ro', 'read', '{'e' * 64}')",
    )
    with pytest.raises(DataLossRefused):
        migrate.downgrade(url, BEFORE)
    assert run_sql(url, "SELECT count(*) AS n FROM api_keys")[0]["n"] == 2
    migrate.downgrade(url, BEFORE, force=True)
    (merchant,) = run_sql(url, "SELECT api_key_hash FROM merchants")
    # No live write key: a digest no key has, never the revoked key's.
    assert merchant["api_key_hash"] not in (DIGEST, "e" * 64)
    assert len(merchant["api_key_hash"]) == 64
