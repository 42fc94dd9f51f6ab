"""Buffers as MPI reads them: message specs, foreign buffers, addresses, pickling."""
