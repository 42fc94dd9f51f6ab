"""MPI-IO (files): the room the MPI-breadth issue fills; empty today."""
