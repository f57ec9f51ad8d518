"""On-chain payouts: holds, signing exactly once, broadcast, tracking, posting.

`holds.py` places a payout (hold + row + outbox) in the API's transaction, refusing known
sinks (`sinks.py`); `signer.py` keeps the hot-wallet key; `engine.py` holds the chain and
wallets, `signing.py` signs held payouts, `tracking.py` tracks receipts, bumps within the
payout's hold, rebroadcasts and marks stalls; `proof.py` says what a receipt proves;
`settle.py` posts or voids at finality; `actions.py` is the audited operator `void` and
`resign`; `job.py` is the scheduler job; `wallet.py` answers `payflow wallet status` and
counts stalled payouts for `payflow status`. See docs/payouts.md.
"""
