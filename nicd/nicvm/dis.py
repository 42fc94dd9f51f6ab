"""Disassembler: a compiled module as text, one instruction a line (CPython ``dis`` layout).

Columns: source line (when it changes), ``>>`` on jump targets, offset, opcode, operand and,
in parentheses, what the operand means (variable name, function name, jump target).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nicd.nicvm.opcodes import OPS, Operand

if TYPE_CHECKING:
    from nicd.nicvm.program import Function, Instruction, Module

__all__ = ["disassemble"]


def disassemble(module: Module) -> str:
    """Every function of ``module``, in code order, with its header and instructions."""
    targets = {ins.arg for ins in module.code if OPS[ins.op].operand is Operand.JUMP}
    functions = sorted(module.functions, key=lambda f: f.entry)
    ends = [f.entry for f in functions[1:]] + [len(module.code)]
    out: list[str] = []
    for func, end in zip(functions, ends, strict=True):
        out.append(_header(func))
        last_line = -1
        for pc in range(func.entry, end):
            ins = module.code[pc]
            line = f"{ins.line:>4}" if ins.line != last_line else "    "
            last_line = ins.line
            mark = ">>" if pc in targets else "  "
            text = f"{line} {mark} {pc:>4} {ins.op.name:<18} {_operand(ins, func, module)}"
            out.append(text.rstrip())
        out.append("")
    return "\n".join(out)


def _header(func: Function) -> str:
    params = ", ".join(
        f"{name}: {kind.value}" for name, kind in zip(func.slot_names, func.params, strict=False)
    )
    return (
        f"func {func.name}({params}): {func.returns.value}"
        f"  [slots {len(func.slot_names)}, stack {func.max_stack}, entry {func.entry}]"
    )


def _operand(ins: Instruction, func: Function, module: Module) -> str:
    kind = OPS[ins.op].operand
    if kind is Operand.NONE:
        return ""
    assert isinstance(ins.arg, int | float)
    if kind is Operand.CONST:
        return repr(ins.arg)
    index = int(ins.arg)
    if kind is Operand.LOCAL:
        return f"{index} ({func.slot_names[index]})"
    if kind is Operand.JUMP:
        return str(index)  # an absolute offset: the target itself
    return f"{index} ({module.functions[index].name})"
