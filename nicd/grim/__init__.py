"""GRIM on the NIC (seed 002): service, address translation cache, AM handler registry."""
