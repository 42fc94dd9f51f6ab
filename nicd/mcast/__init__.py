"""NIC-based multicast (seed 001): service (host records, NicCore side), engine, send and
receive halves, config."""
