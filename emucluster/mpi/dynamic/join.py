"""How two groups that share no communicator make an intercommunicator: the two roots trade
over a bootstrap channel, then each group agrees as ``Create_intercomm`` does.

The bootstrap channel is a one-process communicator state whose only rank is the other root's
node, on a context id no communicator can own (above every context pair a rank may claim):
spawn's children reach the parents' root on `SPAWN_CONTEXT` with the spawn's id as tag;
``Comm.Connect`` reaches ``Comm.Accept``'s root on `ACCEPT_CONTEXT` with the port's tag (its
sender's node travels in the message, since the accepting root cannot know it) and hears back
on `SPAWN_CONTEXT`. The agreement is `emucluster.mpi.comm.intercomm`'s: each group ANDs its
members' free context masks, the roots swap their group's mask and nodes, every member claims
the lowest pair free in both (and one for the local group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.intercomm import _agree, _build, _inner_mask
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.constants import ANY_SOURCE
from emucluster.mpi.runtime import MAX_CONTEXT_PAIRS

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.intercomm import Intercomm
    from emucluster.mpi.runtime import Runtime

__all__ = ["ACCEPT_CONTEXT", "SPAWN_CONTEXT", "accept_swap", "connect_swap", "join", "swap_with"]

SPAWN_CONTEXT = 2 * MAX_CONTEXT_PAIRS
"""Context of the roots' trade (no claimable pair reaches it)."""
ACCEPT_CONTEXT = SPAWN_CONTEXT + 2
"""Context on which an accepting root hears connecting roots (from any node)."""


def _channel(rt: Runtime, context: int, node: int) -> Any:
    """A handle to a one-rank communicator state whose rank 0 is ``node``."""
    return kinds.handle(CommState(rt, context, (node,), 0))


def swap_with(rt: Runtime, node: int, tag: int) -> Callable[[object], Any]:
    """The trade of this root with the root on ``node`` under ``tag``."""

    def swap(mine: object) -> Any:
        return _channel(rt, SPAWN_CONTEXT, node).sendrecv(mine, 0, tag, None, 0, tag)

    return swap


def accept_swap(rt: Runtime, tag: int) -> Callable[[object], Any]:
    """``Accept``'s root: wait for a connecting root on ``tag`` (its node comes with it),
    answer it."""

    def swap(mine: object) -> Any:
        node, theirs = _channel(rt, ACCEPT_CONTEXT, rt.node).recv(None, ANY_SOURCE, tag)
        _channel(rt, SPAWN_CONTEXT, node).send(mine, 0, tag)
        return theirs

    return swap


def connect_swap(rt: Runtime, node: int, tag: int) -> Callable[[object], Any]:
    """``Connect``'s root: reach the accepting root on ``node`` under ``tag``."""

    def swap(mine: object) -> Any:
        reply = _channel(rt, SPAWN_CONTEXT, node).irecv(None, 0, tag)
        _channel(rt, ACCEPT_CONTEXT, node).send((rt.node, mine), 0, tag)
        return reply.wait()

    return swap


def join(local: CommState, root: int, swap: Callable[[object], Any]) -> Intercomm:
    """The intercommunicator between ``local``'s group and the group whose root ``swap``
    (run by ``local``'s rank ``root`` only) trades with (collective over both groups)."""
    mask, remote_nodes = _agree(local, root, swap, local.nodes)
    inner_mask = _inner_mask(local)
    st = _build(local.nodes, local.rank, tuple(remote_nodes), local.runtime, mask, inner_mask)
    found: Intercomm = kinds.handle(st)
    return found
