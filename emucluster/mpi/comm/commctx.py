"""mpi4py's private communicator helpers, called by its pure-Python packages
(``mpi4py.util.pkl5`` imports them from ``mpi4py.MPI``): ``_comm_lock``, ``_commctx_intra``,
``_commctx_inter``.

A communicator's *context* is a duplicate of it, made at the first call (collective, as every
member makes the same calls in the same order) and cached as an attribute that Dup does not
copy and Free deletes (freeing the duplicate), plus a tag that advances at every call, so
concurrent pickled collectives on one communicator never match each other's messages. For an
intercommunicator it also holds the local group's intracommunicator and whether the local
group is the low one (the group holding the lowest COMM_WORLD rank), the same on both sides.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from emucluster.mpi.comm.attrs import COMM_KEYVALS
from emucluster.mpi.constants import TAG_UB_VALUE

if TYPE_CHECKING:
    from collections.abc import Hashable

    from emucluster.mpi.comm.comm import Comm

__all__ = ["comm_lock", "commctx_inter", "commctx_intra"]


class _Context:
    """One communicator's cached context."""

    __slots__ = ("dup", "local", "low_group", "tag")

    def __init__(self, dup: Any, local: Any = None, low_group: bool = False) -> None:
        self.dup = dup
        self.local = local
        self.low_group = low_group
        self.tag = 0

    def next_tag(self) -> int:
        tag = self.tag
        self.tag = (tag + 1) % (TAG_UB_VALUE + 1)
        return tag


def _free_context(comm: Comm, keyval: int, ctx: _Context) -> None:
    """The attribute's delete callback: the communicator is freed, so is its context."""
    ctx.dup.Free()
    if ctx.local is not None:
        ctx.local.Free()


_keyval: list[int] = []
"""The process's keyval for contexts (made at first use)."""
_keyval_lock = threading.Lock()


def _context_keyval() -> int:
    with _keyval_lock:
        if not _keyval:
            _keyval.append(COMM_KEYVALS.create(None, _free_context))
        return _keyval[0]


def comm_lock(comm: Comm, key: Hashable | None = None) -> threading.Lock:
    """The lock of ``key`` in the communicator's lock table (``MPI._comm_lock``)."""
    return comm._state().lock("" if key is None else str(key))


def commctx_intra(comm: Any) -> tuple[Any, int]:
    """(the cached duplicate of intracommunicator ``comm``, the next tag)."""
    keyval = _context_keyval()
    ctx = comm.Get_attr(keyval)
    if ctx is None:
        ctx = _Context(comm.Dup())
        comm.Set_attr(keyval, ctx)
    assert isinstance(ctx, _Context)
    return ctx.dup, ctx.next_tag()


def commctx_inter(comm: Any) -> tuple[Any, int, Any, bool]:
    """(the cached duplicate of intercommunicator ``comm``, the next tag, the local group's
    intracommunicator, whether the local group is the low group)."""
    keyval = _context_keyval()
    ctx = comm.Get_attr(keyval)
    if ctx is None:
        dup = comm.Dup()
        low_group = min(dup.Get_group()._check()) < min(dup.Get_remote_group()._check())
        merged = dup.Merge(high=not low_group)
        ctx = _Context(dup, merged.Split(int(low_group)), low_group)
        merged.Free()
        comm.Set_attr(keyval, ctx)
    assert isinstance(ctx, _Context)
    return ctx.dup, ctx.next_tag(), ctx.local, ctx.low_group
