"""Pure rank arithmetic for the host-based collectives: binomial trees, folds, peer schedules.

Nothing here sends; every function maps ``(rank, size, ...)`` to ranks. The collectives in this
package are written against these functions, and the tests check their properties alone.

Invariants:

* Binomial trees are root-relative: the tree for ``root`` is the tree for root 0 with every
  rank shifted by ``root`` (mod ``size``). Work in *virtual* ranks ``v = (rank - root) % size``.
* In virtual ranks a parent is always smaller than its children, and the subtree of ``v`` is the
  contiguous range ``v .. v + span - 1`` (clipped to ``size``), where ``span`` is the lowest set
  bit of ``v`` (the smallest power of two >= ``size`` for the root). A rank's children cover
  consecutive sub-ranges of its own subtree, so a reduction that combines "mine, then children
  by increasing distance" keeps virtual-rank order.
* The recursive-doubling fold (MPICH's handling of non-power-of-two sizes) keeps rank order
  too: the kept ranks, renumbered, own contiguous increasing blocks of original ranks.
"""

from __future__ import annotations

__all__ = [
    "absolute_rank",
    "binomial_children",
    "binomial_parent",
    "binomial_subtree",
    "ceil_log2",
    "dissemination_peers",
    "fold_partner",
    "pairwise_peers",
    "pof2_ceil",
    "pof2_floor",
    "rd_new_rank",
    "rd_old_rank",
    "relative_rank",
]


def _check(rank: int, size: int) -> None:
    if size < 1:
        raise ValueError(f"communicator size {size} < 1")
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} outside 0..{size - 1}")


def pof2_floor(n: int) -> int:
    """The largest power of two <= ``n`` (``n`` >= 1)."""
    if n < 1:
        raise ValueError(f"pof2_floor({n}): need n >= 1")
    return 1 << (n.bit_length() - 1)


def pof2_ceil(n: int) -> int:
    """The smallest power of two >= ``n`` (``n`` >= 1)."""
    if n < 1:
        raise ValueError(f"pof2_ceil({n}): need n >= 1")
    return 1 << (n - 1).bit_length()


def ceil_log2(n: int) -> int:
    """Rounds of a doubling schedule over ``n`` ranks: 0 for 1, 1 for 2, 2 for 3 and 4, ..."""
    if n < 1:
        raise ValueError(f"ceil_log2({n}): need n >= 1")
    return (n - 1).bit_length()


def relative_rank(rank: int, root: int, size: int) -> int:
    """The virtual rank of ``rank`` in a tree rooted at ``root`` (the root is 0)."""
    _check(rank, size)
    _check(root, size)
    return (rank - root) % size


def absolute_rank(vrank: int, root: int, size: int) -> int:
    """The real rank of virtual rank ``vrank`` in a tree rooted at ``root``."""
    _check(vrank, size)
    _check(root, size)
    return (vrank + root) % size


def _span(vrank: int, size: int) -> int:
    # Lowest set bit of vrank; the root spans the whole (power-of-two rounded) tree.
    return vrank & -vrank if vrank else pof2_ceil(size)


def binomial_parent(rank: int, root: int, size: int) -> int | None:
    """The rank ``rank`` receives from in the binomial tree rooted at ``root`` (None at root)."""
    v = relative_rank(rank, root, size)
    if v == 0:
        return None
    return absolute_rank(v - _span(v, size), root, size)


def binomial_children(rank: int, root: int, size: int) -> list[int]:
    """The ranks ``rank`` sends to in the binomial tree rooted at ``root``.

    Farthest first (virtual distance ``span/2``, ``span/4``, ..., 1, each child heading a
    subtree of up to that many ranks): the order a broadcast sends in, so the deepest subtree
    starts earliest. Reverse it for the order a reduction combines in (nearest child first
    keeps virtual-rank order).
    """
    v = relative_rank(rank, root, size)
    children: list[int] = []
    mask = _span(v, size) >> 1
    while mask:
        if v + mask < size:
            children.append(absolute_rank(v + mask, root, size))
        mask >>= 1
    return children


def binomial_subtree(rank: int, root: int, size: int) -> range:
    """The virtual ranks in the subtree of ``rank`` (itself first), as a contiguous range."""
    v = relative_rank(rank, root, size)
    return range(v, min(v + _span(v, size), size))


def dissemination_peers(rank: int, size: int) -> list[tuple[int, int]]:
    """Per round of the dissemination barrier, ``(send_to, recv_from)``: ``rank +- 2**k``.

    ``ceil_log2(size)`` rounds; after round k every rank has heard, transitively, from the
    ``2**(k+1) - 1`` ranks before it, so after the last round from everyone.
    """
    _check(rank, size)
    peers: list[tuple[int, int]] = []
    distance = 1
    while distance < size:
        peers.append(((rank + distance) % size, (rank - distance) % size))
        distance <<= 1
    return peers


def pairwise_peers(rank: int, size: int, step: int) -> tuple[int, int]:
    """Step ``step`` (1 .. size-1) of the pairwise-exchange alltoall: ``(send_to, recv_from)``.

    Power-of-two sizes exchange with ``rank XOR step`` (both directions, one partner per step);
    other sizes send ``step`` ranks ahead and receive from ``step`` ranks behind.
    """
    _check(rank, size)
    if not 1 <= step < size:
        raise ValueError(f"pairwise step {step} outside 1..{size - 1}")
    if size & (size - 1) == 0:
        partner = rank ^ step
        return partner, partner
    return (rank + step) % size, (rank - step) % size


# -- recursive doubling over a non-power-of-two size ---------------------------------------------
# MPICH folds the first 2*rem ranks (rem = size - pof2) in pairs: the even rank of each pair hands
# its contribution to the odd one and sits out; the odd one, and every rank >= 2*rem, take part
# in recursive doubling among pof2 "new" ranks; at the end the odd ranks hand the result back.


def rd_new_rank(rank: int, size: int) -> int | None:
    """The rank's number among the ``pof2_floor(size)`` doubling ranks, or None if it sits out."""
    _check(rank, size)
    rem = size - pof2_floor(size)
    if rank < 2 * rem:
        return None if rank % 2 == 0 else rank // 2
    return rank - rem


def rd_old_rank(new_rank: int, size: int) -> int:
    """The real rank of doubling rank ``new_rank`` (inverse of `rd_new_rank`)."""
    pof2 = pof2_floor(size)
    if not 0 <= new_rank < pof2:
        raise ValueError(f"doubling rank {new_rank} outside 0..{pof2 - 1}")
    rem = size - pof2
    return new_rank * 2 + 1 if new_rank < rem else new_rank + rem


def fold_partner(rank: int, size: int) -> int | None:
    """The rank's partner in the fold before and after doubling, or None if not folded.

    Even ranks below ``2*rem`` pair with ``rank + 1``, odd ones with ``rank - 1``.
    """
    _check(rank, size)
    rem = size - pof2_floor(size)
    if rank >= 2 * rem:
        return None
    return rank + 1 if rank % 2 == 0 else rank - 1
