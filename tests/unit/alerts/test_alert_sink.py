"""The alert sink's cooldown per key and its memory bound, with an injected clock and no
table (store=None): what is delivered, what is only counted, what is suppressed."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from structlog.testing import capture_logs

from payflow.alerts import Severity
from payflow.alerts.build import build_alert_delivery, build_alert_sink
from payflow.alerts.delivery import (
    AlertNotice,
    LogDelivery,
    PagerDutyDelivery,
    WebhookDelivery,
)
from payflow.alerts.sink import CooldownAlertSink
from payflow.config import SettingsError, load_settings


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Recorder:
    """A delivery that records notices (or fails, to show the sink swallows it)."""

    notices: list[AlertNotice] = field(default_factory=list)
    fail: bool = False

    async def send(self, notice: AlertNotice) -> None:
        if self.fail:
            raise ConnectionError("receiver down")
        self.notices.append(notice)


def _sink(clock: Clock, recorder: Recorder, *, max_keys: int = 1000) -> CooldownAlertSink:
    return CooldownAlertSink(
        store=None, delivery=recorder, cooldown_s=300.0, max_keys=max_keys, clock=clock
    )


async def test_a_repeat_within_the_cooldown_is_counted_not_delivered() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder)
    await sink.fire("dlq.growth", Severity.WARNING, "12 new dead letters")
    clock.now += 299.0
    await sink.fire("dlq.growth", Severity.WARNING, "13 new dead letters")
    await sink.fire("dlq.growth", Severity.WARNING, "14 new dead letters")
    assert [(n.key, n.count, n.status) for n in recorder.notices] == [("dlq.growth", 1, "firing")]
    clock.now += 1.0  # the cooldown (300 s) is over: a reminder with the running count
    await sink.fire("dlq.growth", Severity.WARNING, "15 new dead letters")
    assert [(n.count, n.message) for n in recorder.notices] == [
        (1, "12 new dead letters"),
        (4, "15 new dead letters"),
    ]


async def test_the_cooldown_is_per_key() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder)
    await sink.fire("recon.mismatch:hot", Severity.CRITICAL, "sums differ")
    await sink.fire("zombies", Severity.WARNING, "3 events stuck")
    await sink.fire("recon.mismatch:hot", Severity.CRITICAL, "sums differ")
    assert [n.key for n in recorder.notices] == ["recon.mismatch:hot", "zombies"]


async def test_a_rise_in_severity_is_delivered_within_the_cooldown() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder)
    await sink.fire("zombies", Severity.WARNING, "3 events stuck")
    clock.now += 10.0
    await sink.fire("zombies", Severity.CRITICAL, "300 events stuck")
    await sink.fire("zombies", Severity.CRITICAL, "301 events stuck")
    assert [(n.severity, n.count) for n in recorder.notices] == [
        (Severity.WARNING, 1),
        (Severity.CRITICAL, 2),
    ]


async def test_resolve_delivers_once_and_a_new_incident_is_delivered_at_once() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder)
    await sink.fire("stuck_claims", Severity.CRITICAL, "2 pending claims")
    await sink.resolve("stuck_claims")
    await sink.resolve("stuck_claims")  # nothing open any more: quiet
    await sink.resolve("never.fired")
    clock.now += 1.0
    await sink.fire("stuck_claims", Severity.CRITICAL, "1 pending claim")
    assert [(n.status, n.count) for n in recorder.notices] == [
        ("firing", 1),
        ("resolved", 1),
        ("firing", 1),
    ]
    assert len(sink) == 1


async def test_memory_is_bounded_stale_keys_are_evicted_first() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder, max_keys=3)
    for key in ("a", "b", "c"):
        await sink.fire(key, Severity.WARNING, key)
    clock.now += 300.0  # a, b and c are stale now
    await sink.fire("c", Severity.WARNING, "c again")  # c delivers again: fresh
    await sink.fire("d", Severity.WARNING, "d")  # evicts the stale a and b
    assert len(sink) == 2
    assert [n.key for n in recorder.notices] == ["a", "b", "c", "c", "d"]
    assert sink.suppressed == 0


async def test_a_new_key_is_suppressed_with_a_warning_when_the_memory_is_full() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder, max_keys=2)
    await sink.fire("a", Severity.WARNING, "a")
    await sink.fire("b", Severity.WARNING, "b")
    clock.now += 100.0  # nothing is stale yet
    with capture_logs() as logs:
        for n in range(5000):
            await sink.fire(f"flood.{n}", Severity.CRITICAL, "one key per event")
    assert len(sink) == 2  # never unbounded growth
    assert sink.suppressed == 5000
    assert [n.key for n in recorder.notices] == ["a", "b"]
    suppressed = [e for e in logs if e["event"] == "payflow.alerts.suppressed"]
    assert len(suppressed) == 5000
    assert suppressed[0]["key"] == "flood.0"
    assert suppressed[0]["log_level"] == "warning"
    # Known keys keep working while the memory is full.
    clock.now += 200.0
    await sink.fire("a", Severity.WARNING, "a again")
    assert [n.key for n in recorder.notices] == ["a", "b", "a"]


async def test_a_failing_delivery_never_raises_into_the_caller() -> None:
    clock, recorder = Clock(), Recorder(fail=True)
    sink = _sink(clock, recorder)
    with capture_logs() as logs:
        await sink.fire("relay.lag", Severity.CRITICAL, "outbox 10 min behind")
        await sink.resolve("relay.lag")
    failures = [e for e in logs if e["event"] == "payflow.alerts.delivery_failed"]
    assert [(e["status"], e["error"]) for e in failures] == [
        ("firing", "ConnectionError"),
        ("resolved", "ConnectionError"),
    ]


async def test_bad_input_is_logged_never_raised() -> None:
    clock, recorder = Clock(), Recorder()
    sink = _sink(clock, recorder)
    with capture_logs() as logs:
        await sink.fire("", Severity.INFO, "no key")
        await sink.fire("k" * 201, Severity.INFO, "key too long")
        await sink.fire("odd", "loud", "unknown severity")  # type: ignore[arg-type]
        cycle: dict[str, object] = {}
        cycle["self"] = cycle
        await sink.fire("cyclic", Severity.WARNING, "details with a cycle", details=cycle)
    assert [e["event"] for e in logs][:4] == [
        "payflow.alerts.invalid_key",
        "payflow.alerts.invalid_key",
        "payflow.alerts.invalid_severity",
        "payflow.alerts.invalid_details",
    ]
    # An unknown severity or unusable details never drop the alert.
    assert [(n.key, n.severity, n.details) for n in recorder.notices] == [
        ("odd", Severity.CRITICAL, {}),
        ("cyclic", Severity.WARNING, {"details_error": "TypeError"}),
    ]


def test_delivery_follows_the_setting() -> None:
    assert isinstance(build_alert_delivery(load_settings(alert_delivery="log")), LogDelivery)
    webhook = build_alert_delivery(
        load_settings(alert_delivery="webhook", alert_webhook_url="http://127.0.0.1:9/hook")
    )
    assert isinstance(webhook, WebhookDelivery)
    pagerduty = build_alert_delivery(
        load_settings(alert_delivery="pagerduty", alert_pagerduty_routing_key="R0UTINGKEY")
    )
    assert isinstance(pagerduty, PagerDutyDelivery)
    assert pagerduty.url == "https://events.pagerduty.com/v2/enqueue"
    assert "R0UTINGKEY" not in repr(pagerduty)
    assert "R0UTINGKEY" not in repr(load_settings(alert_pagerduty_routing_key="R0UTINGKEY"))


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"alert_delivery": "webhook"}, "ALERT_WEBHOOK_URL"),
        ({"alert_delivery": "pagerduty"}, "ALERT_PAGERDUTY_ROUTING_KEY"),
        ({"alert_delivery": "pagerduty", "alert_pagerduty_routing_key": ""}, "ROUTING_KEY"),
        ({"alert_delivery": "email"}, "ALERT_DELIVERY"),
        ({"alert_webhook_url": "ftp://x"}, "ALERT_WEBHOOK_URL"),
    ],
)
def test_a_misconfigured_delivery_names_its_setting(
    overrides: dict[str, object], named: str
) -> None:
    with pytest.raises(SettingsError, match=named):
        build_alert_sink(load_settings(**overrides), None)
