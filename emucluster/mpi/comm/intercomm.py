"""Intercommunicators: ``Intercomm``, ``Intracomm.Create_intercomm`` and ``Merge``.

An intercommunicator joins two disjoint groups. Its `CommState` is seen from this side:
``nodes``, ``size`` are the *remote* group's (so point-to-point, which addresses remote ranks,
runs unchanged over it) and ``rank`` is this process's rank in its own group; ``local`` is the
state of an intracommunicator of the local group with a context of its own, over which the
library agrees things within the group. Context ids are agreed across both groups as
MPICH does: each group ANDs its members' free masks, the two leaders swap their group's mask
(over the peer communicator at creation, over the intercommunicator's collective context
later), each leader hands the other group's answer to its group, and every member claims the
lowest pair free in both.

Offered: creation (``Create_intercomm``; ``Create_from_groups`` without a parent, its leaders
trading over COMM_WORLD's collective context in the slot of the group agreement),
point-to-point, ``Get_remote_group/size``, ``Merge``, ``Dup``, ``Split``, ``Split_type`` (by
node: each emulated node is its own domain, so COMM_NULL), ``Compare``, ``Free``, and every
collective MPI defines on intercommunicators, blocking, nonblocking and persistent
(`emucluster.mpi.collective.intercalls`). ``Create``/``Create_group`` are not (ERR_COMM); see
docs/guide/mpi.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi import lifecycle
from emucluster.mpi.collective.calls import internal_allgather, internal_allreduce, internal_trade
from emucluster.mpi.collective.intercalls import InterCollectives
from emucluster.mpi.comm import free as commfree
from emucluster.mpi.comm import fromgroup as commgroup
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.attrs import CommAttributes
from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import hints_of
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.constants import CONGRUENT, IDENT, SIMILAR, UNDEFINED, UNEQUAL
from emucluster.mpi.errors import ERR_ARG, ERR_COMM, ERR_GROUP, ERR_RANK
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.ft.ulfm import guard

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.intracomm import Intracomm

__all__ = ["Intercomm", "create_from_groups", "create_intercomm"]

_LEADER = 0  # rank of the leader of each group inside an intercommunicator


def _agree(local: CommState, leader: int, swap: Callable[[object], Any],
           value: object) -> tuple[int, Any]:  # fmt: skip
    """With every member of ``local``'s group: the free-context mask of both groups and the
    other group's ``value``; ``swap`` (run by ``leader`` only) trades this group's
    ``(mask, value)`` for the other group's."""
    mask = internal_allreduce(local, local.runtime.free_context_mask())
    theirs = swap((mask, value)) if local.rank == leader else None
    remote_mask, remote_value = internal_allgather(local, theirs)[leader]
    return mask & remote_mask, remote_value


def _build(local_nodes: tuple[int, ...], local_rank: int, remote_nodes: tuple[int, ...],
           runtime: Any, mask: int, inner_mask: int) -> CommState:  # fmt: skip
    """The state of an intercommunicator: its context (from the both-group ``mask``) and a
    local intracommunicator with a context of its own (from the local group's
    ``inner_mask``, read before the first claim: so without the pair just claimed, which
    every member of the group leaves out alike)."""
    context = runtime.claim_context(mask)
    inner = runtime.claim_context(inner_mask & ~(1 << (context // 2)))
    st = CommState(runtime, context, remote_nodes, local_rank)
    st.local = CommState(runtime, inner, local_nodes, local_rank)
    return st


def _inner_mask(local: CommState) -> int:
    """The AND of the local group's free masks (for the local intracommunicator's context)."""
    return internal_allreduce(local, local.runtime.free_context_mask())


def _members(entries: list[tuple[int, int]], color: int,
             nodes: tuple[int, ...]) -> tuple[int, ...]:  # fmt: skip
    """The nodes of ``color`` in a group's Split ``entries``, by (key, rank)."""
    return tuple(nodes[r] for _, r in sorted((k, r) for r, (c, k) in enumerate(entries)
                                             if c == color))  # fmt: skip


def create_intercomm(local_comm: Comm, local_leader: int, peer_comm: Comm,
                     remote_leader: int, tag: int) -> Intercomm:  # fmt: skip
    """``Intracomm.Create_intercomm`` (collective over both groups)."""
    local = local_comm._state()
    if not 0 <= local_leader < local.size:
        raise MPIException(ERR_RANK, f"local_leader {local_leader} of {local.size}")
    if local.local is not None:
        raise MPIException(ERR_COMM, "Create_intercomm: the local communicator is an inter")

    def swap(mine: object) -> Any:
        return peer_comm.sendrecv(mine, remote_leader, tag, None, remote_leader, tag)

    mask, remote_nodes = _agree(local, local_leader, swap, local.nodes)
    if set(remote_nodes) & set(local.nodes):
        raise MPIException(ERR_ARG, "Create_intercomm: the two groups overlap")
    inner_mask = _inner_mask(local)
    st = _build(local.nodes, local.rank, tuple(remote_nodes), local.runtime, mask, inner_mask)
    found: Intercomm = kinds.handle(st)
    return found


def create_from_groups(local_group: Group, local_leader: int, remote_group: Group,
                       remote_leader: int, stringtag: str) -> Intercomm:  # fmt: skip
    """``Intercomm.Create_from_groups``: the local group's communicator agreed as
    ``Create_from_group`` does, then the leaders trade their groups' masks on COMM_WORLD's
    collective context, in the call slot of that agreement (`fromgroup.agreement_slot`)."""
    world = lifecycle.current().world
    assert world is not None  # built with the runtime
    for leader, group in ((local_leader, local_group), (remote_leader, remote_group)):
        if not 0 <= leader < group.Get_size():
            raise MPIException(ERR_RANK, f"leader {leader} of a group of {group.Get_size()}")
    tag = commgroup.string_tag(stringtag)
    local = commgroup.create_group(world, local_group, tag)
    if local is None:
        raise MPIException(ERR_GROUP, "Create_from_groups: this process is not in local_group")
    peer, slot = remote_group.members[remote_leader], commgroup.agreement_slot(tag)
    try:
        mask, remote_nodes = _agree(local, local_leader,
                                    lambda mine: internal_trade(world, slot, peer, mine),
                                    local.nodes)  # fmt: skip
        if set(remote_nodes) & set(local.nodes):
            raise MPIException(ERR_ARG, "Create_from_groups: the two groups overlap")
        st = _build(local.nodes, local.rank, tuple(remote_nodes), local.runtime, mask,
                    _inner_mask(local))  # fmt: skip
    finally:
        local.runtime.release_context(local.context)
    found: Intercomm = kinds.handle(st)
    return found


class Intercomm(Comm):
    """An intercommunicator (mpi4py's ``MPI.Intercomm``): sizes, ranks and groups are the
    local group's; point-to-point ranks name the remote group's processes."""

    __slots__ = ()

    def __new__(cls, comm: Comm | None = None) -> Intercomm:
        """A handle to the intercommunicator ``comm`` (COMM_NULL if None); TypeError for an
        intracommunicator."""
        if comm is not None and comm._st is not None and comm._st.local is None:
            raise TypeError("Intercomm() takes an intercommunicator")
        self = super().__new__(cls, comm)
        assert isinstance(self, Intercomm)
        return self

    # -- collectives (``emucluster.mpi.collective.intercalls``; the persistent ``*_init`` of
    # ``Comm`` start the nonblocking ones below) -------------------------------------------

    barrier = delegate(InterCollectives, InterCollectives.barrier)
    bcast = delegate(InterCollectives, InterCollectives.bcast)
    gather = delegate(InterCollectives, InterCollectives.gather)
    scatter = delegate(InterCollectives, InterCollectives.scatter)
    allgather = delegate(InterCollectives, InterCollectives.allgather)
    alltoall = delegate(InterCollectives, InterCollectives.alltoall)
    reduce = delegate(InterCollectives, InterCollectives.reduce)
    allreduce = delegate(InterCollectives, InterCollectives.allreduce)

    Barrier = delegate(InterCollectives, InterCollectives.Barrier)
    Bcast = delegate(InterCollectives, InterCollectives.Bcast)
    Gather = delegate(InterCollectives, InterCollectives.Gather)
    Gatherv = delegate(InterCollectives, InterCollectives.Gatherv)
    Scatter = delegate(InterCollectives, InterCollectives.Scatter)
    Scatterv = delegate(InterCollectives, InterCollectives.Scatterv)
    Allgather = delegate(InterCollectives, InterCollectives.Allgather)
    Allgatherv = delegate(InterCollectives, InterCollectives.Allgatherv)
    Alltoall = delegate(InterCollectives, InterCollectives.Alltoall)
    Alltoallv = delegate(InterCollectives, InterCollectives.Alltoallv)
    Alltoallw = delegate(InterCollectives, InterCollectives.Alltoallw)
    Reduce = delegate(InterCollectives, InterCollectives.Reduce)
    Allreduce = delegate(InterCollectives, InterCollectives.Allreduce)
    Reduce_scatter_block = delegate(InterCollectives, InterCollectives.Reduce_scatter_block)
    Reduce_scatter = delegate(InterCollectives, InterCollectives.Reduce_scatter)

    Ibarrier = delegate(InterCollectives, InterCollectives.Ibarrier)
    Ibcast = delegate(InterCollectives, InterCollectives.Ibcast)
    Igather = delegate(InterCollectives, InterCollectives.Igather)
    Igatherv = delegate(InterCollectives, InterCollectives.Igatherv)
    Iscatter = delegate(InterCollectives, InterCollectives.Iscatter)
    Iscatterv = delegate(InterCollectives, InterCollectives.Iscatterv)
    Iallgather = delegate(InterCollectives, InterCollectives.Iallgather)
    Iallgatherv = delegate(InterCollectives, InterCollectives.Iallgatherv)
    Ialltoall = delegate(InterCollectives, InterCollectives.Ialltoall)
    Ialltoallv = delegate(InterCollectives, InterCollectives.Ialltoallv)
    Ialltoallw = delegate(InterCollectives, InterCollectives.Ialltoallw)
    Ireduce = delegate(InterCollectives, InterCollectives.Ireduce)
    Iallreduce = delegate(InterCollectives, InterCollectives.Iallreduce)
    Ireduce_scatter_block = delegate(InterCollectives, InterCollectives.Ireduce_scatter_block)
    Ireduce_scatter = delegate(InterCollectives, InterCollectives.Ireduce_scatter)

    def _local(self) -> CommState:
        local = self._state().local
        assert local is not None  # an Intercomm handle shows only intercommunicator states
        return local

    def _not_offered(self, call: str) -> MPIException:
        return MPIException(ERR_COMM, f"{call} on an intercommunicator is not offered")

    def Get_size(self) -> int:
        """Number of processes in the local group."""
        return self._local().size

    @property
    def size(self) -> int:
        """Number of processes in the local group."""
        return self.Get_size()

    def Get_group(self) -> Group:
        """The local group."""
        return Group._of(self._local().nodes)

    @property
    def group(self) -> Group:
        """The local group."""
        return self.Get_group()

    def Get_remote_group(self) -> Group:
        """The remote group."""
        return Group._of(self._state().nodes)

    @property
    def remote_group(self) -> Group:
        """The remote group."""
        return self.Get_remote_group()

    def Get_remote_size(self) -> int:
        """Number of processes in the remote group."""
        return self._state().size

    @property
    def remote_size(self) -> int:
        """Number of processes in the remote group."""
        return self.Get_remote_size()

    def _swap(self, mine: object) -> Any:
        """The leaders' trade, on the intercommunicator's collective context (no program
        message can match it)."""
        st = self._state()
        channel = CommState(st.runtime, st.context + 1, st.nodes, st.rank)
        return kinds.handle(channel).sendrecv(mine, _LEADER, 0, None, _LEADER, 0)

    def Merge(self, high: bool = False) -> Intracomm:
        """An intracommunicator of both groups: the group that passed ``high=False`` first
        (if both passed the same, the group whose leader has the lower node first)."""
        st, local = self._state(), self._local()
        mine = (bool(high), local.nodes)
        mask, (their_high, their_nodes) = _agree(local, _LEADER, self._swap, mine)
        first = (bool(high), local.nodes[0]) < (their_high, their_nodes[0])
        nodes = local.nodes + tuple(their_nodes) if first else tuple(their_nodes) + local.nodes
        context = st.runtime.claim_context(mask)
        rank = nodes.index(local.nodes[local.rank])
        found: Intracomm = kinds.handle(CommState(st.runtime, context, nodes, rank))
        return found

    def Dup(self, info: object = None) -> Intercomm:
        """A new intercommunicator of the same groups with new contexts (collective)."""
        st, local = self._state(), self._local()
        mask, _ = _agree(local, _LEADER, self._swap, None)
        new = _build(local.nodes, local.rank, st.nodes, st.runtime, mask, _inner_mask(local))
        new.errhandler = st.errhandler.acquire()
        new.info = dict(st.info) if info is None else hints_of(info)
        CommAttributes(self).copy_into(new)
        comm = type(self).__new__(type(self))
        comm._st = new
        return comm

    def Compare(self, comm: Comm) -> int:
        """IDENT for the same intercommunicator, else by both groups (CONGRUENT / SIMILAR /
        UNEQUAL)."""
        st, other = self._state(), comm._state()
        if st is other:
            return IDENT
        if other.local is None:
            return UNEQUAL
        local, theirs = self._local(), other.local
        if (st.nodes, local.nodes) == (other.nodes, theirs.nodes):
            return CONGRUENT
        if (set(st.nodes), set(local.nodes)) == (set(other.nodes), set(theirs.nodes)):
            return SIMILAR
        return UNEQUAL

    def Split(self, color: int = 0, key: int = 0) -> Any:
        """Intercommunicators between the processes of each group with equal ``color``,
        ranked by (key, old rank); COMM_NULL for color UNDEFINED or when the other group has
        no process of that color (collective over both groups)."""
        st, local = self._state(), self._local()
        entries = internal_allgather(local, (color, key))
        mask, their_entries = _agree(local, _LEADER, self._swap, entries)
        inner_mask = _inner_mask(local)
        mine = _members(entries, color, local.nodes)
        theirs = _members(their_entries, color, st.nodes)
        if color == UNDEFINED or not theirs:
            found: Intercomm = kinds.handle(None, kinds.INTER)
            return found
        rank = mine.index(local.nodes[local.rank])
        new = _build(mine, rank, theirs, st.runtime, mask, inner_mask)
        found = kinds.handle(new)
        return found

    @classmethod
    def Create_from_groups(cls, local_group: Group, local_leader: int, remote_group: Group,
                           remote_leader: int, stringtag: str = "org.mpi4py",
                           info: object = None,
                           errhandler: object = None) -> Intercomm:  # fmt: skip
        """The intercommunicator between ``local_group`` (this process's) and
        ``remote_group``, without a parent communicator (MPI 4.0; collective over both
        groups, which agree under ``stringtag``)."""
        return create_from_groups(local_group, local_leader, remote_group, remote_leader,
                                  stringtag)  # fmt: skip

    def Create(self, group: Group) -> Any:
        """Not offered on an intercommunicator (ERR_COMM)."""
        raise self._not_offered("Create")

    def Create_group(self, group: Group, tag: int = 0) -> Any:
        """Not offered on an intercommunicator (ERR_COMM)."""
        raise self._not_offered("Create_group")

    def Split_type(self, split_type: int, key: int = 0, info: object = None) -> Any:
        """Split by shared-memory domain (``Split`` with this process's node as the color,
        `fromgroup.split_color`): every emulated node is its own, so the other group has no
        process of the same color and the result is COMM_NULL (collective over both groups;
        UNDEFINED gives COMM_NULL too)."""
        return self.Split(commgroup.split_color(self._local(), split_type, info), key)

    def _free(self) -> Any:
        """Free as ``Comm`` does; the local group's context goes back after the
        intercommunicator's (a nonblocking collective still running uses both)."""
        local = self._local()
        release = super()._free()
        engine = local.runtime.engine
        checks = [lambda: release.released, *commfree.pending_on(engine, local.context)]
        task = commfree.DeferredRelease(local.context, checks, local.runtime.release_context)
        if not task.advance():
            engine.add(task)
        return release


kinds.register(kinds.INTER, guard(Intercomm))
