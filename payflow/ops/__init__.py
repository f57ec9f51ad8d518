"""Operations: scheduler, recovery, cleanup, DLQ tooling, reconciliation reports."""
