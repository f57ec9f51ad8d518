"""Outbound merchant webhooks: signing, the SSRF guard and delivery."""
