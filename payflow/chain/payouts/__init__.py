"""On-chain payouts (issue 11): holds, signing exactly once, broadcast, tracking, posting.

`holds.py` places a payout (hold + row + outbox) in the API's transaction; `signer.py`
keeps the hot-wallet key; `engine.py` signs, broadcasts, tracks, bumps, rebroadcasts;
`settle.py` posts or voids at finality; `job.py` is the scheduler job; `wallet.py`
answers `payflow wallet status`. See docs/payouts.md.
"""
