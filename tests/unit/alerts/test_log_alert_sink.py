"""The log sink resolves quietly what it never fired: in `payflow up`,
`payflow.alert.resolved` must not be logged every few seconds for keys that never fired."""

from __future__ import annotations

import structlog

from payflow.alerts import LogAlertSink, Severity


async def test_only_a_fired_key_logs_its_resolution() -> None:
    sink = LogAlertSink()
    with structlog.testing.capture_logs() as logs:
        await sink.resolve("claims.stuck")
        await sink.fire("dlq.growth", Severity.WARNING, "the DLQ grew")
        await sink.resolve("dlq.growth")
        await sink.resolve("dlq.growth")
    assert [(line["event"], line["key"]) for line in logs] == [
        ("payflow.alert", "dlq.growth"),
        ("payflow.alert.resolved", "dlq.growth"),
    ]


async def test_remembered_keys_are_bounded() -> None:
    sink = LogAlertSink()
    for i in range(LogAlertSink.MAX_OPEN + 10):
        await sink.fire(f"k{i}", Severity.INFO, "m")
    with structlog.testing.capture_logs() as logs:
        await sink.resolve("k0")  # forgotten: the oldest went first
        await sink.resolve(f"k{LogAlertSink.MAX_OPEN + 9}")
    assert [line["key"] for line in logs] == [f"k{LogAlertSink.MAX_OPEN + 9}"]
