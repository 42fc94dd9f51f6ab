"""MPI process groups (mpi4py's ``MPI.Group``): an ordered tuple of node ids (COMM_WORLD ranks).

A group is pure local bookkeeping: set operations, rank translation and comparison never talk
to other processes. ``Comm.Get_group`` makes one from a communicator; ``Comm.Create`` and
``Comm.Create_group`` make a communicator from one (see `emucluster.mpi.comm.comm`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.constants import IDENT, PROC_NULL, SIMILAR, UNDEFINED, UNEQUAL
from emucluster.mpi.errors import ERR_ARG, ERR_GROUP, ERR_RANK
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["GROUP_EMPTY", "GROUP_NULL", "Group", "set_local_node"]

_local_node = 0


def set_local_node(node: int) -> None:
    """Record this process's node id (its COMM_WORLD rank), for ``Group.Get_rank``."""
    global _local_node
    _local_node = node


class Group(Handled):
    """An ordered set of processes (mpi4py's ``MPI.Group``)."""

    __slots__ = ("_members",)

    def _handle_key(self) -> object:
        return self._members

    def __init__(self, group: Group | None = None) -> None:
        if group is not None and not isinstance(group, Group):
            raise TypeError(f"Group() takes a Group, not {type(group).__name__}")
        self._members: tuple[int, ...] | None = None if group is None else group._members

    @classmethod
    def _of(cls, members: Sequence[int]) -> Group:
        group = cls()
        group._members = tuple(members)
        return group

    # -- handle semantics ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        if self._members is None or other._members is None:
            return self._members is other._members
        if not self._members and not other._members:
            return True
        return self is other

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._members is not None

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self is GROUP_NULL:
            return "GROUP_NULL"
        if self is GROUP_EMPTY:
            return "GROUP_EMPTY"
        if self._members is None:
            return type(self), ()
        if not self._members:
            return type(self), (GROUP_EMPTY,)
        raise ValueError(f"cannot serialize {self!r}")

    def __repr__(self) -> str:
        return f"<emucluster.MPI.Group {self._members}>"

    def _check(self) -> tuple[int, ...]:
        if self._members is None:
            raise MPIException(ERR_GROUP, "the group is GROUP_NULL (or freed)")
        return self._members

    @property
    def members(self) -> tuple[int, ...]:
        """Node ids of the group's ranks, in rank order."""
        return self._check()

    # -- queries ---------------------------------------------------------------------------------

    def Get_size(self) -> int:
        """Number of processes."""
        return len(self._check())

    def Get_rank(self) -> int:
        """This process's rank in the group, UNDEFINED if not a member."""
        members = self._check()
        return members.index(_local_node) if _local_node in members else UNDEFINED

    @property
    def size(self) -> int:
        """Number of processes."""
        return self.Get_size()

    @property
    def rank(self) -> int:
        """This process's rank (UNDEFINED if not a member)."""
        return self.Get_rank()

    def Translate_ranks(self, ranks: Sequence[int] | None = None,
                        group: Group | None = None) -> list[int]:  # fmt: skip
        """The ranks in ``group`` (default: COMM_WORLD's) of ``ranks`` of this group."""
        members = self._check()
        others = group._check() if group is not None else None
        ranks = range(len(members)) if ranks is None else ranks
        result = []
        for rank in ranks:
            if rank == PROC_NULL:
                result.append(PROC_NULL)
                continue
            node = members[self._valid(rank)]
            if others is None:
                result.append(node)
            else:
                result.append(others.index(node) if node in others else UNDEFINED)
        return result

    def Compare(self, group: Group) -> int:
        """IDENT (same members, same order), SIMILAR (same members) or UNEQUAL."""
        a, b = self._check(), group._check()
        if a == b:
            return IDENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    # -- constructors ----------------------------------------------------------------------------

    def Dup(self) -> Group:
        """A copy of the group."""
        return Group._of(self._check())

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The processes of ``ranks`` (in that order)."""
        members = self._check()
        ranks = [self._valid(r) for r in ranks]
        if len(set(ranks)) != len(ranks):
            raise MPIException(ERR_RANK, f"Incl: repeated ranks in {ranks}")
        return Group._of([members[r] for r in ranks])

    def Excl(self, ranks: Sequence[int]) -> Group:
        """Every process but those of ``ranks`` (in group order)."""
        members = self._check()
        drop = {self._valid(r) for r in ranks}
        return Group._of([m for i, m in enumerate(members) if i not in drop])

    def Range_incl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """Incl of the ranks of (first, last, stride) triplets."""
        return self.Incl(_expand(ranks))

    def Range_excl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        """Excl of the ranks of (first, last, stride) triplets."""
        return self.Excl(_expand(ranks))

    def Union(self, group: Group) -> Group:
        """This group's processes, then ``group``'s that are not in it."""
        a, b = self._check(), group._check()
        return Group._of(a + tuple(m for m in b if m not in a))

    def Intersection(self, group: Group) -> Group:
        """This group's processes that are also in ``group`` (this group's order)."""
        b = group._check()
        return Group._of([m for m in self._check() if m in b])

    def Difference(self, group: Group) -> Group:
        """This group's processes that are not in ``group``."""
        b = group._check()
        return Group._of([m for m in self._check() if m not in b])

    @classmethod
    def Create_from_session_pset(cls, session: Any, pset_name: str) -> Group:
        """The group of a session's process set (``session.Create_group``)."""
        group: Group = session.Create_group(pset_name)
        return cls._of(group.members)

    def Free(self) -> None:
        """Free the group; the handle becomes GROUP_NULL."""
        self._check()
        if self is GROUP_EMPTY:
            raise MPIException(ERR_GROUP, "cannot free GROUP_EMPTY")
        self._members = None

    def free(self) -> None:
        """Free safely (mpi4py): GROUP_EMPTY and GROUP_NULL stay; any other handle (another
        handle of the empty group too) becomes GROUP_NULL."""
        if self is not GROUP_EMPTY and self._members is not None:
            self._members = None

    def _valid(self, rank: int) -> int:
        size = len(self._check())
        if not 0 <= rank < size:
            raise MPIException(ERR_RANK, f"invalid rank {rank} (group of {size})")
        return rank


def _expand(ranges: Sequence[tuple[int, int, int]]) -> list[int]:
    ranks: list[int] = []
    for first, last, stride in ranges:
        if stride == 0:
            raise MPIException(ERR_ARG, "Range_incl/Range_excl: zero stride")
        ranks.extend(range(first, last + (1 if stride > 0 else -1), stride))
    return ranks


GROUP_NULL = Group()
GROUP_EMPTY = Group._of(())
