"""The host's side of its NIC (shells).

The GM-port client, its bookkeeping, registered memory, the signal line, the wait policy and the
progress loop.
"""
