"""Fault tolerance (ULFM): revoking communicators, the fault-tolerant agreement, shrinking."""
