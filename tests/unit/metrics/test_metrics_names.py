"""Metric names: Prometheus conventions, the families the issue asks for, and every
PromQL query of the Grafana dashboard and the alert rules names a metric payflow
exports (collected from the registries after importing the modules)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

import payflow.broker.consumer
import payflow.chain.watch.scanner
import payflow.ledger.posting
import payflow.roles
import payflow.webhooks.sender  # noqa: F401 - importing registers every family
from payflow.api.metrics import Metrics
from payflow.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "payflow.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
OPERATIONS = ROOT / "docs" / "operations.md"
# Defined by the chain work (its breaker), alerted on already: see docs/operations.md.
FUTURE = {"payflow_rpc_breaker_state"}
REQUIRED = {
    "payflow_events": "gauge",
    "payflow_payments": "gauge",
    "payflow_dlq_unresolved": "gauge",
    "payflow_outbox_unpublished": "gauge",
    "payflow_outbox_oldest_unpublished_age_seconds": "gauge",
    "payflow_queue_messages": "gauge",
    "payflow_consumer_messages_total": "counter",
    "payflow_postings_total": "counter",
    "payflow_webhook_attempts_total": "counter",
    "payflow_recon_runs_total": "counter",
    "payflow_recon_mismatches": "gauge",
    "payflow_recon_last_success_timestamp_seconds": "gauge",
    "payflow_job_runs_total": "counter",
}
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}


def _registries() -> list[CollectorRegistry]:
    return [REGISTRY, Metrics().registry]


def exported() -> dict[str, str]:
    """Every sample name payflow exports -> its family type."""
    names: dict[str, str] = {}
    for registry in _registries():
        for family in registry.collect():
            for suffix in SUFFIXES[family.type]:
                names[family.name + suffix] = family.type
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not function
    calls, keywords, label names or values, durations or grouping clauses."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        name = match.group(0)
        if rest.startswith("(") or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def _dashboard_exprs() -> list[str]:
    def walk(panels: list[dict[str, object]]) -> list[str]:
        found: list[str] = []
        for panel in panels:
            for target in panel.get("targets", []):  # type: ignore[attr-defined]
                found.append(target["expr"])
            found.extend(walk(panel.get("panels", [])))  # type: ignore[arg-type]
        return found

    return walk(json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"])


def _rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def test_extractor_finds_metrics_and_skips_promql_syntax() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(payflow_x_bucket{a="b c"}[5m])))'
        " / on (queue) group_left sum without (x) (payflow_y) > bool 2 * 60 or vector(0)"
    )
    assert metric_names(expr) == {"payflow_x_bucket", "payflow_y"}


def test_required_families_exist_with_their_types() -> None:
    names = exported()
    for name, kind in REQUIRED.items():
        assert names.get(name) == kind, name


def test_names_follow_prometheus_conventions() -> None:
    for name, kind in exported().items():
        assert re.fullmatch(r"payflow_[a-z0-9_]+", name), name
        if kind == "counter":
            assert name.endswith("_total"), name
        if kind == "gauge":
            assert not name.endswith("_total"), name
        # Base units only: seconds, never milliseconds or minutes.
        assert not re.search(r"_(ms|milliseconds|minutes|hours)(_|$)", name), name


def test_every_exported_metric_is_documented() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    families = {family.name for registry in _registries() for family in registry.collect()}
    missing = sorted(name for name in families if f"`{name}" not in text)
    assert not missing, f"not in docs/operations.md: {missing}"


def test_dashboard_queries_name_only_exported_metrics() -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 15
    names = exported()
    for expr in exprs:
        used = metric_names(expr)
        assert used, f"no metric in {expr!r}"
        assert used <= names.keys(), f"{expr!r} names {sorted(used - names.keys())}"


def test_dashboard_covers_the_money_and_the_flow() -> None:
    used = set().union(*(metric_names(e) for e in _dashboard_exprs()))
    assert set(REQUIRED) <= used, sorted(set(REQUIRED) - used)


@pytest.mark.parametrize("expr", _rule_exprs())
def test_rules_name_only_exported_metrics(expr: str) -> None:
    used = metric_names(expr)
    assert used
    assert used <= exported().keys() | FUTURE, sorted(used - exported().keys() - FUTURE)
