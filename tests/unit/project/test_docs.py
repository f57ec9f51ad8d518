"""The docs stay true: docs/configuration.md is what the settings' descriptions generate,
it names every setting, and the README's links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payflow import config_docs
from payflow.config import Settings

ROOT = Path(__file__).resolve().parents[3]
CONFIGURATION = ROOT / "docs" / "configuration.md"
README = ROOT / "README.md"


def test_every_setting_is_documented_in_the_configuration_doc() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    table = text[text.index("## Required") :]
    missing = [name.upper() for name in Settings.model_fields if f"`{name.upper()}`" not in table]
    assert missing == []


def test_every_setting_has_a_description() -> None:
    bare = [name for name, field in Settings.model_fields.items() if not field.description]
    assert bare == []


def test_configuration_doc_is_what_the_generator_writes() -> None:
    """Fails when a setting or its description changed without regenerating
    (`uv run python -m payflow.config_docs`)."""
    assert CONFIGURATION.read_text(encoding="utf-8") == config_docs.render()
    assert config_docs.main(["--check"]) == 0


def test_each_setting_sits_in_exactly_one_tier() -> None:
    text = config_docs.render()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    assert [section.split("\n", 1)[0] for section in sections] == ["Required", "Common", "Tuning"]
    for name in Settings.model_fields:
        holding = [s.split("\n", 1)[0] for s in sections if f"| `{name.upper()}` |" in s]
        assert holding == [config_docs.tier(name).capitalize()], name


def test_a_setting_without_a_description_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    field = Settings.model_fields["redis_url"]
    monkeypatch.setattr(field, "description", None)
    with pytest.raises(ValueError, match="REDIS_URL"):
        config_docs.render()


def test_readme_links_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = sorted(t for t in targets if not t.startswith(("http://", "https://")))
    assert local, "the README links no docs"
    assert [t for t in local if not (ROOT / t).exists()] == []
