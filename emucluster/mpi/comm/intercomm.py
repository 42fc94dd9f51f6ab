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

Offered: creation, point-to-point, ``Get_remote_group/size``, ``Merge``, ``Dup``, ``Split``,
``Compare``, ``Free``, and the collectives of `emucluster.mpi.collective.inter` (barrier,
broadcast, allreduce, allgather of objects). The other collectives, ``Create``/``Create_group``
(ERR_COMM) and ``Split_type`` (NotImplementedError) are not; see docs/guide/mpi.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.collective.calls import internal_allgather, internal_allreduce
from emucluster.mpi.collective.inter import InterCollectives
from emucluster.mpi.comm import kinds
from emucluster.mpi.comm.attrs import CommAttributes
from emucluster.mpi.comm.comm import Comm
from emucluster.mpi.comm.delegate import delegate
from emucluster.mpi.comm.group import Group
from emucluster.mpi.comm.roles import hints_of
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.constants import CONGRUENT, IDENT, SIMILAR, UNDEFINED, UNEQUAL
from emucluster.mpi.errors import ERR_ARG, ERR_COMM, ERR_RANK
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.unsupported import not_41

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.intracomm import Intracomm

__all__ = ["Intercomm", "create_intercomm"]

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
    ``inner_mask``)."""
    context = runtime.claim_context(mask)
    inner = runtime.claim_context(inner_mask)
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

    # -- collectives (``emucluster.mpi.collective.inter``; the others raise ERR_COMM) ----------

    Barrier = delegate(InterCollectives, InterCollectives.Barrier)
    barrier = delegate(InterCollectives, InterCollectives.barrier)
    Bcast = delegate(InterCollectives, InterCollectives.Bcast)
    bcast = delegate(InterCollectives, InterCollectives.bcast)
    Allreduce = delegate(InterCollectives, InterCollectives.Allreduce)
    allreduce = delegate(InterCollectives, InterCollectives.allreduce)
    allgather = delegate(InterCollectives, InterCollectives.allgather)

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
        """MPI 4.0 (sessions): not offered (NotImplementedError)."""
        not_41("Intercomm.Create_from_groups")

    def Create(self, group: Group) -> Any:
        """Not offered on an intercommunicator (ERR_COMM)."""
        raise self._not_offered("Create")

    def Create_group(self, group: Group, tag: int = 0) -> Any:
        """Not offered on an intercommunicator (ERR_COMM)."""
        raise self._not_offered("Create_group")

    def Split_type(self, split_type: int, key: int = 0, info: object = None) -> Any:
        """Not offered on an intercommunicator (NotImplementedError)."""
        raise NotImplementedError("Split_type on an intercommunicator is not offered")

    def _free(self) -> Any:
        local = self._local()
        release = super()._free()
        local.runtime.release_context(local.context)
        return release


kinds.register(kinds.INTER, Intercomm)
