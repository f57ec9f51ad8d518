"""`payflow status --cluster` asks each host of a multi-host URL on its own: the same
login and database, the default port when none is written, no `target_session_attrs`."""

from __future__ import annotations

from payflow.ops.cluster import host_urls


def test_each_host_of_a_multi_host_url_is_asked_alone() -> None:
    url = "postgresql://postgres:pw@10.0.0.1:5433,db2/payflow?target_session_attrs=read-write&sslmode=disable"
    assert host_urls(url) == [
        ("10.0.0.1", 5433, "postgresql://postgres:pw@10.0.0.1:5433/payflow?sslmode=disable"),
        ("db2", 5432, "postgresql://postgres:pw@db2:5432/payflow?sslmode=disable"),
    ]
    assert host_urls("postgresql://u@[::1]/x") == [("::1", 5432, "postgresql://u@[::1]:5432/x")]
