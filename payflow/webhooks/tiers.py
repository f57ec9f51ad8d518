"""When a failed webhook send comes back from the broker's retry tiers: shared by the
payments' webhook sender and the endpoint sender, which both note it on their job row so
that the sweep and duplicates wait for the retry instead of racing it."""

from __future__ import annotations

from collections.abc import Sequence

from payflow.errors import RetryableError, classify


def retry_after_s(
    tiers_ms: Sequence[int], failure: BaseException | None, attempt: int
) -> float | None:
    """Seconds until the retry of the message's `attempt` (1-based) is back from its tier
    (`RETRY_TIERS_MS`, the consumer's policy: a retryable failure with tiers left); None
    when no retry follows (a 2xx, a final failure, the tiers used up)."""
    if failure is None or attempt > len(tiers_ms):
        return None
    if not isinstance(failure, Exception) or not isinstance(classify(failure), RetryableError):
        return None
    return tiers_ms[attempt - 1] / 1000.0
