"""Merchant payments: processing through a gateway, crediting, and webhook jobs."""
