"""``mpi4py`` as seen by unmodified programs on emucluster: ``mpi4py.MPI`` is emucluster.MPI.

Only the top-level names programs and mpi4py's tests touch are here: ``rc`` (accepted, mostly
ignored: MPI is initialised at import of ``mpi4py.MPI`` whatever it says), ``get_config``,
``get_include`` (no C headers: raises), ``profile`` (loads the library, as mpi4py does; no MPI
call goes through it) and the version.

mpi4py's pure-Python packages (``mpi4py.util``, ``mpi4py.futures``, ``mpi4py.run`` and
``python -m mpi4py``, ``mpi4py.bench``, ``mpi4py.typing``) come from the real mpi4py, an
emucluster dependency: its directory is this package's second search path, after this one,
so ``mpi4py.MPI`` is still emucluster's and no MPI library is ever loaded.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    PathSpec = str | bytes | os.PathLike[str] | Iterable[Any] | None

__all__ = ["__version__", "get_config", "get_include", "profile", "rc"]


def _real_package_dirs() -> list[str]:
    """Where the installed mpi4py's package lives (none if it is not installed)."""
    shim_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    elsewhere = [p for p in sys.path if os.path.abspath(p or os.curdir) != shim_root]
    spec = importlib.machinery.PathFinder.find_spec(__name__, elsewhere)
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [d for d in spec.submodule_search_locations if d not in __path__]


__path__ += _real_package_dirs()

__version__ = "4.1.2"
__author__ = "emucluster (mpi4py-compatible surface)"


class _Rc:
    """mpi4py's runtime configuration options (``mpi4py.rc``): the defaults are class
    attributes; an unknown option is a TypeError, whether set or passed."""

    initialize = True
    threads = True
    thread_level = "multiple"
    finalize: bool | None = None
    fast_reduce = True
    recv_mprobe = True
    irecv_bufsz = 32768
    errors = "exception"

    def __init__(self, **kwargs: object) -> None:
        self(**kwargs)

    def __setattr__(self, name: str, value: object) -> None:
        if not hasattr(self, name):
            raise TypeError(f"object has no attribute {name!r}")
        super().__setattr__(name, value)

    def __call__(self, **kwargs: object) -> None:
        for name in kwargs:
            if not hasattr(self, name):
                raise TypeError(f"unexpected argument {name!r}")
        for name, value in kwargs.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"<mpi4py.rc: {vars(self)}>"


rc = _Rc()
sys.modules[f"{__name__}.rc"] = rc  # type: ignore[assignment]  # ``import mpi4py.rc``, as mpi4py


def get_config() -> dict[str, str]:
    """Build configuration: none, emucluster.MPI is pure Python."""
    return {}


def get_include() -> str:
    """No C headers: emucluster.MPI has no C API."""
    raise NotImplementedError("emucluster.MPI is pure Python: no mpi4py C headers")


def profile(name: str | bytes, *, path: PathSpec = None) -> None:
    """Load the profiler library ``name`` (searched in ``path``, as ``lib<name>.so`` too) as
    mpi4py does: ValueError if it is not found, a UserWarning if it cannot be loaded. No MPI
    call of emucluster goes through a C library, so a PMPI profiler sees nothing."""
    if path is None:
        paths: list[Any] = [""]
    elif isinstance(path, os.PathLike):
        paths = [path]
    elif isinstance(path, str):
        paths = path.split(os.pathsep)
    elif isinstance(path, bytes):
        paths = path.split(os.fsencode(os.pathsep))
    else:
        paths = list(path)
    libname = os.fsdecode(name)
    found = None
    for directory in map(os.fsdecode, paths):
        for prefix, suffix in (("", ""), ("lib", ".so")):
            candidate = os.path.join(directory, f"{prefix}{libname}{suffix}")
            if os.path.isfile(candidate):
                found = os.path.realpath(candidate)
                break
        if found:
            break
    if found is None:
        raise ValueError(f"profiler {libname!r} not found")
    try:
        ctypes.CDLL(found, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except OSError as exc:
        warnings.warn(str(exc), stacklevel=2)
