"""Tests of the Redis DLQ fallback and its drain (issue 9 point 4)."""
