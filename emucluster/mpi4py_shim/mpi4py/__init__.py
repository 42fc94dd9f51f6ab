"""``mpi4py`` as seen by unmodified programs on emucluster: ``mpi4py.MPI`` is emucluster.MPI.

Only the top-level names programs and mpi4py's tests touch are here: ``rc`` (accepted, mostly
ignored: MPI is initialised at import of ``mpi4py.MPI`` whatever it says), ``get_config``,
``get_include`` (no C headers: raises), ``profile`` (no-op) and the version.

mpi4py's pure-Python packages (``mpi4py.util``, ``mpi4py.futures``, ``mpi4py.run`` and
``python -m mpi4py``, ``mpi4py.bench``, ``mpi4py.typing``) come from the real mpi4py, an
emucluster dependency: its directory is this package's second search path, after this one,
so ``mpi4py.MPI`` is still emucluster's and no MPI library is ever loaded.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

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
    """mpi4py's runtime configuration options (``mpi4py.rc``)."""

    def __init__(self) -> None:
        self.initialize = True
        self.threads = True
        self.thread_level = "multiple"
        self.finalize: bool | None = None
        self.fast_reduce = True
        self.recv_mprobe = True
        self.irecv_bufsz = 32768
        self.errors = "exception"

    def __call__(self, **kwargs: object) -> None:
        for name, value in kwargs.items():
            if not hasattr(self, name):
                raise TypeError(f"unexpected argument {name!r}")
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"<mpi4py.rc: {vars(self)}>"


rc = _Rc()


def get_config() -> dict[str, str]:
    """Build configuration: none, emucluster.MPI is pure Python."""
    return {}


def get_include() -> str:
    """No C headers: emucluster.MPI has no C API."""
    raise NotImplementedError("emucluster.MPI is pure Python: no mpi4py C headers")


def profile(name: str = "", *, path: str | list[str] | None = None) -> None:
    """Accepted and ignored (no PMPI profiling libraries)."""
