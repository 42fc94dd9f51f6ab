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
    from emucluster.mpi.comm.state import CommState

__all__ = ["INTER", "NO_COMM", "NO_TOPOLOGY", "handle", "register"]

INTER = -3  # the key of ``Intercomm`` (a state with a ``local`` group state)
NO_COMM = -2  # the key of the class COMM_NULL is shown as (``Comm``)
NO_TOPOLOGY = -1  # the key of the class of a communicator without topology (``Intracomm``)

_classes: dict[int, Any] = {}  # kind -> a communicator class (a ``_st`` slot)


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
