"""Merchant payments: creation (with its outbox row) and tenant-scoped reads."""
