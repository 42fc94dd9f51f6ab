"""Dynamic processes and intercommunicator creation (spawn, connect/accept).

The room the MPI-breadth issue fills; empty today.
"""
