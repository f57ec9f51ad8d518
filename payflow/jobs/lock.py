"""The per-job lock: one replica runs a job's pass at a time."""

from __future__ import annotations

from payflow.db import Connection
from payflow.db.queries import load_queries

SQL = load_queries("payflow.jobs")


async def job_lock(conn: Connection, job: str) -> bool:
    """Take the job's transaction-scoped advisory lock; False when another replica has it.

    Released at commit or rollback (safe behind PgBouncer in transaction mode).
    """
    return bool(await conn.fetchval(SQL["try_job_lock"], job))
