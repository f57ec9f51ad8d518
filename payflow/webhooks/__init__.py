"""Outbound webhook delivery: signing, SSRF guard, retry classification."""
