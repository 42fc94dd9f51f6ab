"""The algorithm tags of the host-based collectives: one small fixed value per message role.

Each collective call runs on a `CollContext` of its own whose tags (``0 <= tag < TAG_LIMIT``)
the MPI layer maps to a wire tag carrying the communicator's collective sequence number
(``emucluster.coll.context``), so calls never see each other's messages. Within one call these
tags keep the phases of an algorithm apart (an allreduce's fold, doubling and unfold), and
composed algorithms (reduce then bcast) apart from each other. Messages between one pair of
ranks on one tag match in send order, which the algorithms rely on for repeated steps.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Tag"]


class Tag(IntEnum):
    """Algorithm tag per message role; values are unique so a trace names the role."""

    BCAST = 1
    REDUCE = 2
    REDUCE_FORWARD = 3  # non-commutative reduce: rank 0 hands the result to the root
    BARRIER = 4
    ALLREDUCE_FOLD = 5  # non-power-of-two: even rank -> odd partner, before doubling
    ALLREDUCE_EXCHANGE = 6
    ALLREDUCE_UNFOLD = 7  # odd rank -> even partner, after doubling
    GATHER = 8
    SCATTER = 9
    ALLGATHER = 10
    ALLTOALL = 11
    SCAN = 12
    EXSCAN = 13
    MCAST = 14  # NIC-multicast bcast: the root's multicast message (offload.nic_mcast)
    MCAST_CALIBRATE = 15  # ... and the ping-pongs that measure the postal-model costs
    INTER = 16  # intercommunicator collectives: between the two groups (mpi.collective.inter)
