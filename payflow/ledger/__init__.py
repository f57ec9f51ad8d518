"""Accounts, payment events and their state machine, exactly-once posting, reconciliation."""
