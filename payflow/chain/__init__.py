"""Chain truth: the Ethereum JSON-RPC client, transfer identity, the deposit lifecycle,
the scanner and on-chain payouts (docs/chain.md, docs/payouts.md)."""
