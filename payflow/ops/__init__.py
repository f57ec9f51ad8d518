"""Operations, in the composition root: the scheduler gathering every package's jobs, the
money checks, `payflow status`, the sweeps, DLQ replay and drain wired to the domains'
handlers, reconciliation reports. Nothing below the composition root imports it."""

__all__: list[str] = []
