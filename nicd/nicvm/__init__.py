"""NICVM: user modules compiled once into a direct-threaded VM that runs on nicd (thesis ch. 4).

Pure: nothing here does I/O or reads a clock. nicd compiles a module at upload with
``compile_module`` and runs it per NICVM data packet with ``run``; ``emucluster.nicvm.check``
runs the same compiler on the host before upload (thesis §5.1). The compiler (and lark, its
parser) is imported on first use: most nicds never load a module, and every nicd of a job
starts by importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nicd.nicvm import limits
from nicd.nicvm.builtins import SEND_TYPE, Result
from nicd.nicvm.dis import disassemble
from nicd.nicvm.errors import NicvmError, NicvmLimitError, NicvmSemanticError, NicvmSyntaxError
from nicd.nicvm.machine import Fault, PacketContext, SendDescriptor
from nicd.nicvm.program import Module
from nicd.nicvm.vm import Outcome, Packet, RunResult, run

if TYPE_CHECKING:
    from nicd.nicvm.compiler import compile_module


def __getattr__(name: str) -> object:
    if name == "compile_module":  # lazily: the compiler imports lark (~40 ms)
        from nicd.nicvm.compiler import compile_module

        return compile_module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SEND_TYPE",
    "Fault",
    "Module",
    "NicvmError",
    "NicvmLimitError",
    "NicvmSemanticError",
    "NicvmSyntaxError",
    "Outcome",
    "Packet",
    "PacketContext",
    "Result",
    "RunResult",
    "SendDescriptor",
    "compile_module",
    "disassemble",
    "limits",
    "run",
]
