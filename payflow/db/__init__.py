"""Thin connector layer: pool creation, named queries and explicit transactions."""

from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# What query functions accept: a bare connection or one borrowed from a pool.
Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"

__all__ = ["Connection"]
