"""Idempotency keys cannot be forged across field boundaries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from payflow.idempotency import idempotency_key


def test_separator_collision_from_the_seed_is_impossible() -> None:
    assert idempotency_key("a::b") != idempotency_key("a:", ":b")
    assert idempotency_key("a:", ":b") != idempotency_key("a::", "b")


def test_nul_separator_collision_is_impossible() -> None:
    assert idempotency_key("a\x00b") != idempotency_key("a", "b")
    assert idempotency_key("a\x00", "b") != idempotency_key("a", "\x00b")


def test_field_count_matters() -> None:
    assert idempotency_key("a") != idempotency_key("a", "")
    assert idempotency_key() != idempotency_key("")


def test_key_is_stable_sha256_hex() -> None:
    key = idempotency_key("deposit", "0xabc", "7")
    assert key == idempotency_key("deposit", "0xabc", "7")
    assert len(key) == 64 and int(key, 16) >= 0


@given(st.lists(st.text(), max_size=4), st.lists(st.text(), max_size=4))
def test_distinct_field_tuples_give_distinct_keys(a: list[str], b: list[str]) -> None:
    if a != b:
        assert idempotency_key(*a) != idempotency_key(*b)
