"""Tests of the Redis DLQ fallback and its drain (PostgreSQL unreachable while a message dies)."""
