"""The alert rules: `promtool check rules`, `promtool test rules` (each alert fires from
synthetic series and stays silent on healthy ones), and a runbook for every alert.

promtool comes from Debian's `prometheus` package; `make test` installs it. The promtool
tests skip, naming the reason, only when it is truly absent."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
TESTS = ROOT / "deploy" / "prometheus" / "tests.yml"
OPERATIONS = ROOT / "docs" / "operations.md"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (`make promtool`: apt-get install prometheus)",
)


def _alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False
    )


@needs_promtool
def test_promtool_check_rules() -> None:
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    result = _promtool("test", "rules", str(TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_promtool_unit_tests_catch_a_broken_rule(tmp_path: Path) -> None:
    """The unit tests can fail: a rule whose threshold moved is reported by name."""
    broken = RULES.read_text(encoding="utf-8").replace(
        "max(payflow_dlq_created_last_hour) > 10", "max(payflow_dlq_created_last_hour) > 11"
    )
    assert broken != RULES.read_text(encoding="utf-8")
    (tmp_path / "rules.yml").write_text(broken, encoding="utf-8")
    shutil.copy(TESTS, tmp_path / "tests.yml")
    result = _promtool("test", "rules", str(tmp_path / "tests.yml"))
    assert result.returncode != 0
    assert "PayflowDLQGrowth" in result.stdout + result.stderr


def test_every_alert_fires_in_a_test_and_stays_silent_on_healthy_series() -> None:
    names = {str(rule["alert"]) for rule in _alerts()}
    tests = yaml.safe_load(TESTS.read_text(encoding="utf-8"))["tests"]
    fired: set[str] = set()
    silent: set[str] = set()
    for case in tests:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else silent).add(check["alertname"])
    assert names - fired == set(), "alerts never shown to fire"
    healthy = next(case for case in tests if case["name"] == "healthy")
    assert {c["alertname"] for c in healthy["alert_rule_test"] if not c["exp_alerts"]} == names


def test_every_alert_has_a_runbook_section() -> None:
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in OPERATIONS.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for rule in _alerts():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        runbook = str(annotations["runbook"])
        path, _, anchor = runbook.partition("#")
        assert path == "docs/operations.md", rule["alert"]
        assert anchor in headings, f"{rule['alert']}: no heading for #{anchor}"
        assert annotations.get("summary"), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}  # type: ignore[index]
