"""Which handle class shows a communicator's state: ``Intracomm``, or its topology's class.

The communicator classes register here as they are defined (``Comm`` for COMM_NULL,
``Intracomm`` for no topology, ``Cartcomm`` / ``Graphcomm`` / ``Distgraphcomm`` for theirs), so
the code that makes communicators (Dup, Split, the topology constructors, ``fromhandle``) builds
the right handle without importing the classes above it. The facade imports every class, so all
are registered before a program can make a communicator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emucluster.mpi.errors import ERR_INTERN
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.mpi.comm.state import CommState

__all__ = [
    "INTER",
    "NO_COMM",
    "NO_TOPOLOGY",
    "dynamic",
    "handle",
    "parent",
    "register",
    "register_dynamic",
    "set_parent",
]

INTER = -3  # the key of ``Intercomm`` (a state with a ``local`` group state)
NO_COMM = -2  # the key of the class COMM_NULL is shown as (``Comm``)
NO_TOPOLOGY = -1  # the key of the class of a communicator without topology (``Intracomm``)

_classes: dict[int, Any] = {}  # kind -> a communicator class (a ``_st`` slot)
_dynamic: dict[str, Callable[..., Any]] = {}  # Spawn, Accept ... (`register_dynamic`)
_parent: list[Any] = []  # [the parent intercommunicator] in a spawned process


def register(kind: int, cls: Any) -> None:
    """Show states of topology ``kind`` (CART, GRAPH, DIST_GRAPH, `NO_TOPOLOGY`, `NO_COMM`)
    as ``cls`` handles; ``cls`` has a ``_st`` slot."""
    _classes[kind] = cls


def handle(st: CommState | None, null: int = NO_COMM) -> Any:
    """A new handle to ``st`` of the class its topology registered; for None, the null handle
    of the class registered under ``null`` (``Comm`` by default, ``Intracomm`` for a Split
    that gave this rank no communicator)."""
    if st is None:
        kind = null
    elif st.local is not None:
        kind = INTER
    else:
        kind = NO_TOPOLOGY if st.topo is None else st.topo.kind
    cls = _classes.get(kind)
    if cls is None:
        raise MPIException(ERR_INTERN, f"no communicator class registered for kind {kind}")
    comm = cls.__new__(cls)
    comm._st = st
    return comm


def register_dynamic(**calls: Callable[..., Any]) -> None:
    """The calls of processes started at run time (``spawn``, ``spawn_multiple``, ``accept``,
    ``connect``, ``join``), registered by ``emucluster.mpi.dynamic`` at Init, so ``Comm`` and
    ``Intracomm`` offer them without importing the room above them."""
    _dynamic.update(calls)


def dynamic(name: str) -> Callable[..., Any]:
    """The registered call ``name`` (ERR_INTERN before Init registered it)."""
    call = _dynamic.get(name)
    if call is None:
        raise MPIException(ERR_INTERN, f"{name}: dynamic processes are not initialised")
    return call


def set_parent(comm: Any) -> None:
    """This process was spawned: ``comm`` is its parent intercommunicator."""
    _parent[:] = [comm]


def parent() -> Any | None:
    """The parent intercommunicator handle (None: not spawned); after ``Disconnect`` the
    same handle, now null."""
    return _parent[0] if _parent else None
