"""What emucluster does not offer (dynamic processes: ports and spawn; hardware resource
information), and the helpers that say so for MPI 4.1 calls.

Each name exists so unmodified programs import and test for it as with mpi4py; using one
raises ``NotImplementedError`` at once (mpi4py's answer for a call its MPI lacks), never
hangs.
"""

from __future__ import annotations

from typing import NoReturn

from emucluster.mpi.info import INFO_NULL, Info

__all__ = [
    "Close_port",
    "Get_hw_resource_info",
    "Open_port",
    "not_41",
    "not_offered",
]


def not_41(what: str) -> NoReturn:
    """Raise the NotImplementedError of an MPI 4.1 call (emucluster implements MPI 3.1)."""
    raise NotImplementedError(f"{what} (MPI 4.1) is not offered by emucluster, which is MPI 3.1")


def not_offered(what: str) -> NoReturn:
    """Raise the NotImplementedError of a feature emucluster does not offer."""
    raise NotImplementedError(f"{what} is not offered by emucluster (see docs/guide/mpi.md)")


def Open_port(info: Info = INFO_NULL) -> str:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Open_port)")


def Close_port(port_name: str) -> None:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Close_port)")


def Get_hw_resource_info() -> Info:
    """Not offered (info objects)."""
    not_offered("hardware resource info (Get_hw_resource_info)")
