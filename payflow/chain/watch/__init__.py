"""What payflow watches on a chain: the deposit addresses it derives from a watch-only
xpub (`derivation`) and the blocks its scanner walks (`scanner`, `blocks`)."""
