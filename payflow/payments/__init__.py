"""Merchant payments: creation with its outbox row, tenant-scoped reads, gateway processing,
crediting and webhook jobs."""
