"""Typing of the ``mpi4py`` stand-in (``__init__.py``): the top-level names it defines."""

import os
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["__version__", "get_config", "get_include", "profile", "rc"]

__version__: Final[str]
__author__: Final[str]

class _Rc:
    initialize: bool
    threads: bool
    thread_level: str
    finalize: bool | None
    fast_reduce: bool
    recv_mprobe: bool
    irecv_bufsz: int
    errors: str
    def __init__(self, **kwargs: object) -> None: ...
    def __setattr__(self, name: str, value: object) -> None: ...
    def __call__(self, **kwargs: object) -> None: ...

rc: _Rc

def get_config() -> dict[str, str]: ...
def get_include() -> str: ...
def profile(
    name: str | bytes, *, path: str | bytes | os.PathLike[str] | Iterable[Any] | None = None
) -> None: ...
