"""W3C trace context: the strict `traceparent` parser and what payflow sends out."""

from __future__ import annotations

import re

import pytest

from payflow.broker.messages import build_message, trace_id_of
from payflow.observability import (
    TraceParent,
    format_traceparent,
    is_trace_id,
    new_span_id,
    new_trace_id,
    outbound_traceparent,
    parse_traceparent,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
OUTBOUND = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"00-{TRACE}-{SPAN}-01", TraceParent(TRACE, SPAN, "01")),
        (f"00-{TRACE}-{SPAN}-00", TraceParent(TRACE, SPAN, "00")),
        (f"00-{TRACE}-{SPAN}-ff".encode(), TraceParent(TRACE, SPAN, "ff")),
    ],
)
def test_valid_traceparent_is_parsed(value: str | bytes, expected: TraceParent) -> None:
    assert parse_traceparent(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        f"01-{TRACE}-{SPAN}-01",  # another version: not ours to interpret strictly
        f"ff-{TRACE}-{SPAN}-01",  # the forbidden version
        f"00-{'0' * 32}-{SPAN}-01",  # all-zero trace id
        f"00-{TRACE}-{'0' * 16}-01",  # all-zero parent id
        f"00-{TRACE.upper()}-{SPAN}-01",  # upper-case hex
        f"00-{TRACE[:-1]}-{SPAN}-01",  # 31 hex
        f"00-{TRACE}0-{SPAN}-01",  # 33 hex
        f"00-{TRACE}-{SPAN[:-1]}-01",  # 15 hex
        f"00-{TRACE}-{SPAN}-1",  # 1-hex flags
        f"00-{TRACE}-{SPAN}-01-extra",  # version 00 has exactly four fields
        f"00-{TRACE}-{SPAN}-0g",  # non-hex flags
        f" 00-{TRACE}-{SPAN}-01",  # whitespace inside the value
        f"00_{TRACE}_{SPAN}_01",
        f"00-{TRACE}-{SPAN}-01\n",
        "00-" + "é" * 32 + f"-{SPAN}-01",
        b"\xff\xfe",  # not ASCII
        "trace-abc.1",
    ],
)
def test_invalid_traceparent_is_ignored(value: str | bytes | None) -> None:
    assert parse_traceparent(value) is None


def test_fresh_ids_are_w3c_ids() -> None:
    trace = new_trace_id()
    assert is_trace_id(trace)
    assert re.fullmatch(r"[0-9a-f]{16}", new_span_id())
    assert new_span_id() != new_span_id()
    assert format_traceparent(TRACE, SPAN) == f"00-{TRACE}-{SPAN}-01"
    assert parse_traceparent(format_traceparent(trace)) is not None


def test_outbound_traceparent_keeps_the_trace_and_opens_a_new_span() -> None:
    first, second = outbound_traceparent(TRACE), outbound_traceparent(TRACE)
    assert first is not None and second is not None
    assert (m1 := OUTBOUND.fullmatch(first)) and (m2 := OUTBOUND.fullmatch(second))
    assert m1.group(1) == m2.group(1) == TRACE
    assert m1.group(2) != m2.group(2)


@pytest.mark.parametrize("stored", [None, "", "t-1", "0" * 32, TRACE.upper()])
def test_no_traceparent_leaves_for_a_stored_id_that_is_not_w3c(stored: str | None) -> None:
    assert outbound_traceparent(stored) is None


def test_broker_message_carries_the_trace_both_ways() -> None:
    message = build_message(b"{}", message_id="1", trace_id=TRACE, attempt=1)
    headers = dict(message.headers)
    assert headers["trace-id"] == TRACE
    match = OUTBOUND.fullmatch(str(headers["traceparent"]))
    assert match is not None and match.group(1) == TRACE
    assert trace_id_of(headers) == TRACE


def test_broker_trace_falls_back_to_the_trace_id_header() -> None:
    legacy = dict(build_message(b"{}", message_id="1", trace_id="t-1", attempt=1).headers)
    assert "traceparent" not in legacy
    assert trace_id_of(legacy) == "t-1"
    assert trace_id_of({"traceparent": b"garbage", "trace-id": b"t-2"}) == "t-2"
    assert trace_id_of({}) == ""
