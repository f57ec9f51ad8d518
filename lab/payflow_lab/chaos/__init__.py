"""`payflow chaos`: the whole system as real processes on private PostgreSQL, RabbitMQ and
Redis, under seeded load and overlapping faults, then a verdict (docs/reliability.md).

Modules: `cluster` (the private services), `proxy` (TCP proxies that stall or cut),
`procs` (the payflow processes and their supervisor), `receiver` (the merchants' webhook
endpoint), `load` (the seeded load and its model), `faults` (the schedule), `verdict`
(the checks after drain), `run` (the command's orchestration), `soak` (`--soak`).
"""
