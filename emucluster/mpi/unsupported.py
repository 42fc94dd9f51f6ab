"""What emucluster does not offer (dynamic processes, generalized requests).

Each name exists so unmodified programs import and test for it as with mpi4py; using one
raises ``NotImplementedError`` at once (mpi4py's answer for a call its MPI lacks), never
hangs. The null handles compare false, as mpi4py's do.
"""

from __future__ import annotations

from typing import Any, NoReturn

from emucluster.mpi.info import INFO_NULL, Info
from emucluster.mpi.request.request import Request

__all__ = [
    "Close_port",
    "Get_hw_resource_info",
    "Grequest",
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


class _Unoffered:
    """A class of objects emucluster cannot create; only its null handle exists."""

    __slots__ = ("_null",)
    _what = "this object"

    def __init__(self, other: Any = None) -> None:
        if other is not None and not isinstance(other, type(self)):
            raise TypeError(f"{type(self).__name__}() takes a {type(self).__name__}")
        self._null = True

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unoffered) and type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def Free(self) -> None:
        """Freeing a null handle is an error in MPI; here it is a no-op."""

    def __getattr__(self, name: str) -> Any:
        not_offered(f"{self._what} ({type(self).__name__}.{name})")




class Grequest(Request):
    """Generalized requests: not offered (``Start`` raises NotImplementedError)."""

    __slots__ = ()

    @classmethod
    def _check(cls, pending: object) -> None:
        if pending is not None:
            raise TypeError("Grequest() takes a generalized request")

    @classmethod
    def Start(cls, *args: object, **kwargs: object) -> Grequest:
        """Not offered."""
        not_offered("generalized requests (Grequest.Start)")


def Open_port(info: Info = INFO_NULL) -> str:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Open_port)")


def Close_port(port_name: str) -> None:
    """Not offered (dynamic processes)."""
    not_offered("dynamic processes (Close_port)")


def Get_hw_resource_info() -> Info:
    """Not offered (info objects)."""
    not_offered("hardware resource info (Get_hw_resource_info)")
