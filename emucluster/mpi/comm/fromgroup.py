"""Communicators made from groups: ``Comm.Create``, ``Comm.Create_group``, ``Split_type``.

New context ids are agreed as Dup and Split agree them (an AND-allreduce of the free masks).
``Create`` is collective over the parent communicator; ``Create_group`` only over the group's
members, so its agreement runs on a temporary state over the members that borrows the parent's
collective context with call numbers from the top of the sequence space (tag-dependent), far
from those the parent's own collectives use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.mpi.collective.calls import internal_allgather, internal_allreduce
from emucluster.mpi.comm.state import COLL_SEQ_MOD, CommState
from emucluster.mpi.constants import UNDEFINED
from emucluster.mpi.errors import ERR_ARG, ERR_GROUP
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import Info

if TYPE_CHECKING:
    from emucluster.mpi.comm.group import Group

__all__ = [
    "COMM_TYPE_HW_GUIDED",
    "COMM_TYPE_HW_UNGUIDED",
    "COMM_TYPE_RESOURCE_GUIDED",
    "COMM_TYPE_SHARED",
    "agreement_slot",
    "create",
    "create_group",
    "split_color",
    "split_type",
]

COMM_TYPE_SHARED = 1  # MPICH's MPI_COMM_TYPE_SHARED
COMM_TYPE_HW_UNGUIDED = 2  # MPI 4: the next smaller hardware domain
COMM_TYPE_HW_GUIDED = 3  # MPI 4: the domain named by info "mpi_hw_resource_type"
COMM_TYPE_RESOURCE_GUIDED = 4  # MPI 4.1: same, for any resource
RESOURCE_KEY = "mpi_hw_resource_type"
SHARED_MEMORY = "mpi_shared_memory"  # the one resource type an emulated node has
_CREATE_GROUP_TAGS = 4096  # call-number slots reserved for Create_group agreements


def _members(st: CommState, group: Group) -> tuple[int, ...]:
    members = group.members
    outside = set(members) - set(st.nodes)
    if outside:
        raise MPIException(ERR_GROUP, f"group processes {sorted(outside)} are not in the comm")
    return members


def create(st: CommState, group: Group) -> CommState | None:
    """Collective over ``st``: the communicator of ``group`` (None for non-members)."""
    members = _members(st, group)
    mask = internal_allreduce(st, st.runtime.free_context_mask())
    me = st.nodes[st.rank]
    if me not in members:
        return None
    return CommState(st.runtime, st.runtime.claim_context(mask), members, members.index(me))


def create_group(st: CommState, group: Group, tag: int) -> CommState | None:
    """Collective over ``group``'s members only: their communicator (None for others)."""
    members = _members(st, group)
    me = st.nodes[st.rank]
    if me not in members:
        return None
    if tag < 0:
        raise MPIException(ERR_ARG, f"Create_group: negative tag {tag}")
    temp = CommState(st.runtime, st.context, members, members.index(me))
    temp.coll_seq = agreement_slot(tag)
    mask = internal_allreduce(temp, st.runtime.free_context_mask())
    return CommState(st.runtime, st.runtime.claim_context(mask), members, members.index(me))


def agreement_slot(tag: int) -> int:
    """The call number ``create_group``'s agreement under ``tag`` runs as, on the parent's
    collective context: from the top of the sequence space, far from the parent's own calls."""
    return COLL_SEQ_MOD - 1 - (tag % _CREATE_GROUP_TAGS)


def split_color(st: CommState, split: int, info: object = None) -> int:
    """This process's color in a ``Split_type``: its node, or UNDEFINED (see `split_type`)."""
    return st.nodes[st.rank] if _by_node(st, split, info) else UNDEFINED


def split_type(st: CommState, split: int, key: int, info: object = None) -> CommState | None:
    """Split by node (each emulated node is its own shared-memory domain, the only hardware
    resource here); None for UNDEFINED and for a resource this node does not have. Guided
    splits name the resource in ``info`` ("mpi_hw_resource_type"); an unguided split yields
    the node when that is smaller than the communicator, and records the resource in
    ``info``."""
    color = split_color(st, split, info)
    entries = internal_allgather(st, (color, key))
    mask = internal_allreduce(st, st.runtime.free_context_mask())
    if color == UNDEFINED:
        return None
    ranked = sorted((k, r) for r, (c, k) in enumerate(entries) if c == color)
    nodes = tuple(st.nodes[r] for _, r in ranked)
    return CommState(
        st.runtime, st.runtime.claim_context(mask), nodes, [r for _, r in ranked].index(st.rank)
    )


def _by_node(st: CommState, split: int, info: object) -> bool:
    if split == COMM_TYPE_SHARED:
        return True
    if split in (COMM_TYPE_HW_GUIDED, COMM_TYPE_RESOURCE_GUIDED):
        return isinstance(info, Info) and bool(info) and info.Get(RESOURCE_KEY) == SHARED_MEMORY
    if split == COMM_TYPE_HW_UNGUIDED and st.size > 1:
        if isinstance(info, Info) and info:
            info.Set(RESOURCE_KEY, SHARED_MEMORY)
        return True
    return False


def string_tag(text: str) -> int:
    """The tag Create_from_group agrees under, derived from its ``stringtag``."""
    value = 0
    for byte in str(text).encode():
        value = (value * 131 + byte) % 4093
    return value
