"""One-sided communication (windows, Put/Get/Accumulate).

The room the MPI-breadth issue fills; empty today.
"""
