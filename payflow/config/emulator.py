"""The gateway emulator the worker charges merchant payments through: latency, declines,
its seed."""

from __future__ import annotations

from pydantic import Field

from payflow.config.base import Slice


class EmulatorSettings(Slice):
    """The `emulator` slice (`settings.emulator`); the module's docstring says what it covers."""

    slice_name = "emulator"

    gateway_delay_min_s: float = Field(default=2.0, ge=0)
    """The gateway emulator's shortest latency per charge."""
    gateway_delay_max_s: float = Field(default=5.0, ge=0)
    """The gateway emulator's longest latency per charge."""
    gateway_failure_rate: float = Field(default=0.1, ge=0, le=1)
    """Share of payments the emulator declines."""
    gateway_seed: int | None = None
    """Seed of the emulator's per-payment decision (SHA-256 of seed and payment id)."""
