"""Provider webhook ingress: signature checks, payload formats and address mapping."""
