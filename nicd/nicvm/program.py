"""A compiled module: its instructions, its function table and the threaded handlers.

Produced once by ``compiler.compile_module`` at upload; read-only afterwards. ``code`` is the
instruction list the disassembler prints; ``threaded[pc]`` is the pre-bound handler the VM calls
for ``code[pc]`` (direct threading: no decoding and no dispatch table at run time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nicd.nicvm.ast import Type
    from nicd.nicvm.machine import Handler, Value
    from nicd.nicvm.opcodes import Op

__all__ = ["Function", "Instruction", "Module"]


@dataclass(frozen=True, slots=True)
class Instruction:
    op: Op
    arg: Value | None
    line: int  # source line, for the disassembler and fault reports


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    params: tuple[Type, ...]
    returns: Type
    slot_names: tuple[str, ...]  # parameters first, then `var` declarations in source order
    slot_types: tuple[Type, ...]
    entry: int  # offset of the first instruction
    max_stack: int  # operand-stack slots the body needs (static bound)
    zero_slots: tuple[Value, ...]  # each slot's initial value: 0 for int, 0.0 for float


@dataclass(frozen=True, slots=True)
class Module:
    functions: tuple[Function, ...]
    code: tuple[Instruction, ...]
    threaded: tuple[Handler, ...]
    main: int  # index of `main` in functions
    source_bytes: int
