"""payflow_lab: the benchmark and chaos harness around payflow, never shipped with it.

`bench` (`payflow bench ...`), `chaos` (`payflow chaos`), `anvil` (a local Ethereum node
and the `TestToken` ERC-20 in `contracts/`) and `ports` (free ports for private servers).
payflow_lab imports payflow; payflow never imports payflow_lab (docs/architecture.md).
"""
