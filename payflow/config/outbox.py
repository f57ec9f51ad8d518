"""The outbox relay: batches, polling, linger, the backoff of refused rows and the stale
alert (docs/pipeline.md)."""

from __future__ import annotations

from pydantic import Field

from payflow.config.base import Slice


class OutboxSettings(Slice):
    """The `outbox` slice (`settings.outbox`); the module's docstring says what it covers."""

    slice_name = "outbox"

    relay_batch_size: int = Field(default=200, ge=1, le=10000)
    """Outbox rows per relay pass."""
    relay_poll_interval_s: float = Field(default=5.0, gt=0)
    """Relay fallback poll when no NOTIFY arrives."""
    # Under load (the last pass found rows) a wake-up waits this long before claiming,
    # so rows committed meanwhile join the batch: fewer round trips per row. An idle
    # relay publishes a lone row at once. 0 turns it off.
    relay_linger_ms: float = Field(default=5.0, ge=0, le=1000)
    """A busy relay (its last pass, or one of the 4 before it, found rows) claims again this long
    later without waiting for a wake-up, so rows committing meanwhile share a batch; an idle
    relay publishes a woken row at once (0: busy passes back to back)."""
    relay_retry_backoff_s: float = Field(default=1.0, gt=0)
    """First wait before an outbox row the broker refused (unroutable, nacked) is tried again; the
    n-th wait is min(this * 2^n, RELAY_RETRY_MAX_BACKOFF_S). Rows behind it are not delayed."""
    relay_retry_max_backoff_s: float = Field(default=300.0, gt=0)
    """Cap of the doubling wait between two publishes of an outbox row the broker refused."""
    relay_unpublishable_alert_attempts: int = Field(default=5, ge=1)
    """The N-th and every later refused publish of one row logs `payflow.outbox.unpublishable`
    (error)."""
    outbox_stale_alert_s: float = Field(default=60.0, gt=0)
    """Unpublished rows older than this log `payflow.outbox.stale`."""
