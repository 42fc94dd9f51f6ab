"""NICVM: user modules compiled once into a direct-threaded VM that runs on nicd (thesis ch. 4).

Pure: nothing here does I/O or reads a clock. nicd compiles a module at upload with
``compile_module`` and runs it per NICVM data packet with ``run``; ``emucluster.nicvm.check``
runs the same compiler on the host before upload (thesis §5.1).
"""

from __future__ import annotations

from nicd.nicvm import limits
from nicd.nicvm.builtins import SEND_TYPE, Result
from nicd.nicvm.compiler import compile_module
from nicd.nicvm.dis import disassemble
from nicd.nicvm.errors import NicvmError, NicvmLimitError, NicvmSemanticError, NicvmSyntaxError
from nicd.nicvm.machine import Fault, PacketContext, SendDescriptor
from nicd.nicvm.program import Module
from nicd.nicvm.vm import Outcome, Packet, RunResult, run

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
