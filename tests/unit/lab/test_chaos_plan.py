"""The chaos run's seeded plan and schedule, and the soak's growth figure."""

from __future__ import annotations

from payflow_lab.chaos.faults import MAJOR, make_schedule
from payflow_lab.chaos.load import MUST_FAIL_WITHDRAWAL, make_plan, sender_spend_eth
from payflow_lab.chaos.soak import growth_pct
from payflow_lab.chaos.system import SENDER_BALANCE_ETH


def test_plan_is_seeded_and_mixes_every_operation() -> None:
    plan = make_plan(3, 2000, 50)
    again = make_plan(3, 2000, 50)
    assert [(op.kind, op.key, op.amount) for op in plan.ops] == [
        (op.kind, op.key, op.amount) for op in again.ops
    ]
    assert plan.order == again.order
    assert 2000 <= plan.requests < 2003
    deposits = plan.of("deposit")
    assert {op.deliveries for op in deposits} == {1, 2, 3}
    assert sum(op.deliveries for op in deposits) == plan.requests - len(plan.ops) + len(deposits)
    # a must-fail withdrawal exceeds every deposit its account could ever get
    most = max(sum(op.amount for op in deposits if op.account == a) for a in range(50))
    assert any(op.must_fail for op in plan.of("withdrawal"))
    assert MUST_FAIL_WITHDRAWAL > most
    assert {op.mode for op in plan.of("payment")} == {None, "ok", "flaky", "slow", "dead"}


def test_schedule_has_every_fault_within_the_load() -> None:
    schedule = make_schedule(11, 45.0)
    kinds = {fault.kind for fault in schedule}
    assert set(MAJOR) <= kinds and "kill9" in kinds
    assert {f.target for f in schedule if f.kind == "kill9"} <= {
        "worker-1",
        "worker-2",
        "relay-1",
        "relay-2",
    }
    assert all(0 < fault.at < 45.0 for fault in schedule)
    assert make_schedule(11, 45.0) == schedule


def test_growth_is_measured_after_warm_up() -> None:
    series = [(float(t), 100.0 if t < 30 else 200.0 + t / 10) for t in range(0, 120, 10)]
    growth = growth_pct(series, 30.0)
    assert growth is not None and abs(growth - 6 / 204 * 100) < 1e-9  # 203-205 → 209-211
    assert growth_pct(series[:5], 0.0) is None


def test_the_deposit_senders_are_funded_for_the_largest_runs() -> None:
    # With anvil's default 10,000 ETH per dev account the 100k run's senders would run
    # dry after ~4 minutes and every later deposit would fail (silently, as a retry).
    long_run = sender_spend_eth(make_plan(7, 100_000, 50))
    assert long_run > 10_000
    soak = sender_spend_eth(make_plan(4, 1_000_000, 50))  # the soak's plan size
    assert max(long_run, soak) * 100 < SENDER_BALANCE_ETH
    assert sender_spend_eth(make_plan(11, 2000, 50)) > 0
