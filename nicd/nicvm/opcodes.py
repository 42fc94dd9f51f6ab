"""The NICVM instruction set, declared once: each opcode's number, operand kind and stack effect.

The compiler emits from it, the VM builds one handler per opcode from it, the disassembler prints
from it (as CPython's ``Lib/opcode.py`` feeds ``compile``, ``ceval`` and ``dis``). A test checks
that every opcode here has a handler, is emitted by some program and is disassembled.

Fuel: every instruction costs one unit, charged before it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

__all__ = ["OPS", "Op", "OpInfo", "Operand"]


class Operand(Enum):
    """What an instruction's argument means (CPython's hasconst / haslocal / hasjrel tags)."""

    NONE = "none"
    CONST = "const"  # an int or float pushed as is
    LOCAL = "local"  # a variable slot of the current frame
    JUMP = "jump"  # an absolute instruction offset
    FUNC = "func"  # an index into the module's function table


class Op(IntEnum):
    """Opcode numbers; the names are what the disassembler prints."""

    CONST = 1
    LOAD = 2
    STORE = 3
    POP = 4
    ADD_I = 10
    SUB_I = 11
    MUL_I = 12
    DIV_I = 13
    MOD_I = 14
    NEG_I = 15
    ADD_F = 20
    SUB_F = 21
    MUL_F = 22
    DIV_F = 23
    NEG_F = 24
    CMP_EQ = 30
    CMP_NE = 31
    CMP_LT = 32
    CMP_LE = 33
    CMP_GT = 34
    CMP_GE = 35
    NOT = 40
    TO_BOOL = 41
    JUMP = 50
    JUMP_IF_FALSE = 51
    AND_JUMP = 52
    OR_JUMP = 53
    CALL = 60
    RETURN = 61
    I2F = 70
    F2I = 71
    MPI_GET_SIZE = 80
    MPI_GET_RANK = 81
    MPI_GET_ROOT = 82
    MPI_SEND_MESSAGE = 83
    PACKET_LENGTH = 90
    PACKET_GET_ARG = 91
    PACKET_SET_ARG = 92
    PAYLOAD_GET_U8 = 93
    PAYLOAD_SET_U8 = 94
    PAYLOAD_GET_U32 = 95
    PAYLOAD_SET_U32 = 96
    PAYLOAD_GET_I32 = 97
    PAYLOAD_GET_F64 = 98
    PAYLOAD_SET_F64 = 99


@dataclass(frozen=True, slots=True)
class OpInfo:
    """One row of the table."""

    op: Op
    operand: Operand
    pops: int  # operands taken on the fall-through path (CALL: the callee's parameter count)
    pushes: int  # operands left on the fall-through path
    doc: str


def _row(op: Op, operand: Operand, pops: int, pushes: int, doc: str) -> tuple[Op, OpInfo]:
    return op, OpInfo(op, operand, pops, pushes, doc)


N, C, L, J, F = Operand.NONE, Operand.CONST, Operand.LOCAL, Operand.JUMP, Operand.FUNC

OPS: dict[Op, OpInfo] = dict(
    [
        _row(Op.CONST, C, 0, 1, "push the constant"),
        _row(Op.LOAD, L, 0, 1, "push a variable"),
        _row(Op.STORE, L, 1, 0, "pop into a variable"),
        _row(Op.POP, N, 1, 0, "discard the top (a call used as a statement)"),
        _row(Op.ADD_I, N, 2, 1, "a + b, wrapping to 64 bits"),
        _row(Op.SUB_I, N, 2, 1, "a - b, wrapping to 64 bits"),
        _row(Op.MUL_I, N, 2, 1, "a * b, wrapping to 64 bits"),
        _row(Op.DIV_I, N, 2, 1, "a / b truncated toward zero, wrapping; b == 0 faults"),
        _row(Op.MOD_I, N, 2, 1, "a - b * (a / b), sign of a; b == 0 faults"),
        _row(Op.NEG_I, N, 1, 1, "-a, wrapping to 64 bits"),
        _row(Op.ADD_F, N, 2, 1, "a + b in float64"),
        _row(Op.SUB_F, N, 2, 1, "a - b in float64"),
        _row(Op.MUL_F, N, 2, 1, "a * b in float64"),
        _row(Op.DIV_F, N, 2, 1, "a / b in float64; b == 0.0 faults"),
        _row(Op.NEG_F, N, 1, 1, "-a in float64"),
        _row(Op.CMP_EQ, N, 2, 1, "1 if a == b else 0"),
        _row(Op.CMP_NE, N, 2, 1, "1 if a != b else 0"),
        _row(Op.CMP_LT, N, 2, 1, "1 if a < b else 0"),
        _row(Op.CMP_LE, N, 2, 1, "1 if a <= b else 0"),
        _row(Op.CMP_GT, N, 2, 1, "1 if a > b else 0"),
        _row(Op.CMP_GE, N, 2, 1, "1 if a >= b else 0"),
        _row(Op.NOT, N, 1, 1, "1 if a == 0 else 0"),
        _row(Op.TO_BOOL, N, 1, 1, "0 if a == 0 else 1"),
        _row(Op.JUMP, J, 0, 0, "continue at the target"),
        _row(Op.JUMP_IF_FALSE, J, 1, 0, "pop; continue at the target if it was 0"),
        _row(Op.AND_JUMP, J, 1, 0, "if the top is 0 keep it and jump, else pop (`and`)"),
        _row(Op.OR_JUMP, J, 1, 0, "if the top is not 0 make it 1 and jump, else pop (`or`)"),
        _row(Op.CALL, F, 0, 1, "pop the arguments, enter the function; depth-limited"),
        _row(Op.RETURN, N, 1, 0, "leave the function with the top; from main, halt"),
        _row(Op.I2F, N, 1, 1, "to_float(a)"),
        _row(Op.F2I, N, 1, 1, "to_int(a): truncate, wrap; NaN or infinity faults"),
        _row(Op.MPI_GET_SIZE, N, 0, 1, "push the communicator size"),
        _row(Op.MPI_GET_RANK, N, 0, 1, "push this node's rank"),
        _row(Op.MPI_GET_ROOT, N, 0, 1, "push the operation's root rank"),
        _row(Op.MPI_SEND_MESSAGE, N, 2, 1, "record a send (type, rank); push 0"),
        _row(Op.PACKET_LENGTH, N, 0, 1, "push the payload length in bytes"),
        _row(Op.PACKET_GET_ARG, N, 1, 1, "push header argument word i (u32)"),
        _row(Op.PACKET_SET_ARG, N, 2, 1, "header argument i = v mod 2**32; push 0"),
        _row(Op.PAYLOAD_GET_U8, N, 1, 1, "push payload byte i"),
        _row(Op.PAYLOAD_SET_U8, N, 2, 1, "payload byte i = v mod 2**8; push 0"),
        _row(Op.PAYLOAD_GET_U32, N, 1, 1, "push little-endian u32 word i"),
        _row(Op.PAYLOAD_SET_U32, N, 2, 1, "u32 word i = v mod 2**32; push 0"),
        _row(Op.PAYLOAD_GET_I32, N, 1, 1, "push little-endian i32 word i"),
        _row(Op.PAYLOAD_GET_F64, N, 1, 1, "push little-endian float64 word i"),
        _row(Op.PAYLOAD_SET_F64, N, 2, 1, "float64 word i = v; push 0"),
    ]
)

assert set(OPS) == set(Op), "every opcode is declared in the table"
