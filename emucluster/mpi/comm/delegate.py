"""How a communicator class hands a call to the plain object of one concern.

``Bcast = delegate(Collectives, Collectives.Bcast)`` in ``Intracomm``'s body makes
``comm.Bcast(buf, root)`` build ``Collectives(comm)`` (a small object holding what the concern
needs of the communicator: its state, or the handle itself) and call its ``Bcast``. The method
keeps the delegate's signature and docstring (``help(MPI.Intracomm.Bcast)``, ``inspect``), mypy
checks every call against it, and the class body reads as the table of what a communicator
does and where each call lives, instead of a stack of mixins.

The method carries ``__delegate__ = (role, method)``, so a class decorator that wraps the
class's methods (``emucluster.mpi.ft.ulfm.guard``) can make one wrapper doing both jobs
instead of stacking a second frame on every call.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["delegate"]

P = ParamSpec("P")
R = TypeVar("R")
Role = TypeVar("Role")
Handle = TypeVar("Handle")


def delegate(
    role: Callable[[Handle], Role], method: Callable[Concatenate[Role, P], R]
) -> Callable[Concatenate[Handle, P], R]:
    """A method of the handle class that calls ``method`` on ``role(handle)``."""

    @functools.wraps(method)
    def call(handle: Handle, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(role(handle), *args, **kwargs)

    call.__delegate__ = (role, method)  # type: ignore[attr-defined]
    return call
