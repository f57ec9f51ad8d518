"""`payflow chaos --soak SECONDS` (placeholder, filled below)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console


@dataclass(frozen=True, slots=True)
class SoakConfig:
    seconds: float
    seed: int = 1
    log_dir: Path = Path("chaos-logs")


async def run_soak(config: SoakConfig, console: Console) -> bool:
    raise NotImplementedError
