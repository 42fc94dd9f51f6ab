"""``Create_darray``: which elements of a block/cyclic-distributed global array one process
owns (MPI 4.1 section 5.1.4), as per-dimension index lists.

The process grid is row-major whatever the array order; per dimension, BLOCK gives each
process one block of ``darg`` (default ceil(gsize/psize)) elements, CYCLIC deals blocks of
``darg`` (default 1) round-robin, NONE keeps the whole dimension (psize 1).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DISTRIBUTE_BLOCK", "DISTRIBUTE_CYCLIC", "DISTRIBUTE_DFLT_DARG", "DISTRIBUTE_NONE",
    "owned_indices",
]  # fmt: skip

DISTRIBUTE_BLOCK = 121
DISTRIBUTE_CYCLIC = 122
DISTRIBUTE_NONE = 123
DISTRIBUTE_DFLT_DARG = -49767  # MPICH's values


def owned_indices(size: int, rank: int, gsizes: list[int], distribs: list[int],
                  dargs: list[int], psizes: list[int]) -> list[np.ndarray]:  # fmt: skip
    """Per dimension, the global indices ``rank`` owns; ValueError for bad arguments."""
    ndims = len(gsizes)
    if not len(distribs) == len(dargs) == len(psizes) == ndims:
        raise ValueError("darray: as many distribs, dargs and psizes as dimensions needed")
    if int(np.prod(psizes, dtype=np.int64)) != size or not 0 <= rank < size:
        raise ValueError(f"darray: process grid {psizes} does not hold rank {rank} of {size}")
    coords = []
    rest = rank
    for p in reversed(psizes):  # row-major process grid
        coords.append(rest % p)
        rest //= p
    coords.reverse()
    owned = []
    for g, dist, darg, p, c in zip(gsizes, distribs, dargs, psizes, coords, strict=True):
        index = np.arange(g, dtype=np.int64)
        if dist == DISTRIBUTE_NONE:
            owned.append(index)
        elif dist == DISTRIBUTE_BLOCK:
            block = -(-g // p) if darg == DISTRIBUTE_DFLT_DARG else darg
            if block * p < g:
                raise ValueError(f"darray: block {block} x {p} processes < {g}")
            owned.append(index[c * block : (c + 1) * block])
        elif dist == DISTRIBUTE_CYCLIC:
            block = 1 if darg == DISTRIBUTE_DFLT_DARG else darg
            if block <= 0:
                raise ValueError(f"darray: cyclic block {block}")
            owned.append(index[(index // block) % p == c])
        else:
            raise ValueError(f"darray: unknown distribution {dist}")
    return owned
