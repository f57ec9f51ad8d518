"""The README's configuration table lists every setting, so the docs stay true."""

from __future__ import annotations

from pathlib import Path

from payflow.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_documented_in_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Configuration") :]
    missing = [name.upper() for name in Settings.model_fields if name.upper() not in table]
    assert missing == []
