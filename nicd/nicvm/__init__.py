"""NICVM: user modules compiled once into a direct-threaded VM that runs on nicd (thesis ch. 4).

Pure: nothing here does I/O or reads a clock. nicd compiles a module at upload with
:func:`nicd.nicvm.compiler.compile_module` and runs it per NICVM data packet with
:func:`nicd.nicvm.vm.run`; a host checks a module with the same compiler before upload
(thesis §5.1), through :mod:`nicd.contract`.

This ``__init__`` loads none of the modules below it: take each name from the module that owns
it (the VM in ``vm``, ``machine``, ``program``; the compiler in ``compiler``; the errors in
``errors``; the packet preamble in ``packet``; the bundled modules' sources in ``modules``).
Importing the VM costs ~25 ms and the compiler (with lark) ~40 ms more, and every host that
takes the packet preamble or a module's source imports this package: they pay for neither.
The errors are re-exported (they cost nothing), and ``compile_module`` is resolved on first
use for ``emucluster.nicvm``, which takes both from here until it switches to
:mod:`nicd.contract`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nicd.nicvm.errors import NicvmError, NicvmLimitError, NicvmSemanticError, NicvmSyntaxError

if TYPE_CHECKING:
    from nicd.nicvm.compiler import compile_module


def __getattr__(name: str) -> object:
    if name == "compile_module":  # lazily: the compiler imports lark (~40 ms)
        from nicd.nicvm.compiler import compile_module

        return compile_module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NicvmError",
    "NicvmLimitError",
    "NicvmSemanticError",
    "NicvmSyntaxError",
    "compile_module",
]
