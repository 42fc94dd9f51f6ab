"""What emucluster does not offer (hardware resource information), and the helpers that say
so for MPI 4.1 calls.

Each name exists so unmodified programs import and test for it as with mpi4py; using one
raises ``NotImplementedError`` at once (mpi4py's answer for a call its MPI lacks), never
hangs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from emucluster.mpi.info import Info

__all__ = [
    "Get_hw_resource_info",
    "not_41",
    "not_offered",
]


def not_41(what: str) -> NoReturn:
    """Raise the NotImplementedError of an MPI 4.1 call (emucluster implements MPI 4.0)."""
    raise NotImplementedError(f"{what} (MPI 4.1) is not offered by emucluster, which is MPI 4.0")


def not_offered(what: str) -> NoReturn:
    """Raise the NotImplementedError of a feature emucluster does not offer."""
    raise NotImplementedError(f"{what} is not offered by emucluster (see docs/guide/mpi.md)")


def Get_hw_resource_info() -> Info:
    """Not offered (info objects)."""
    not_offered("hardware resource info (Get_hw_resource_info)")
