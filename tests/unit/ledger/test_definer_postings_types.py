"""Migration 0032's posting functions check the success path's arguments against its own
copy of the event types' signs and of the open statuses: they must stay those of
payflow.ledger.posting (a migration's text never imports the code it guards)."""

from __future__ import annotations

import importlib

from payflow.idempotency import idempotency_key
from payflow.ledger import posting

_0032 = importlib.import_module("payflow.db.migrations.versions.0032_definer_postings")


def test_the_migrations_event_types_and_statuses_are_the_postings() -> None:
    key, sources, credit_types, active_types = posting.success_path_args("ev-1")
    assert list(_0032.CREDIT_TYPES) == credit_types
    assert list(_0032.ACTIVE_TYPES) == active_types
    assert list(_0032.OPEN_STATUSES) == sources
    assert key == idempotency_key("ledger.post", "ev-1")  # what ledger_posting_key computes
