"""The names a module sees without declaring them: builtin functions and named constants.

Each builtin compiles to exactly one instruction (its opcode in ``opcodes.OPS``), so a call costs
its arguments plus one unit of fuel. Payload words are little-endian, indexed by element
(``payload_get_u32(i)`` reads bytes 4i..4i+3), so a float64 array sent by the host is read
element by element with ``payload_get_f64(i)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from nicd.link.wire import MsgType
from nicd.nicvm.ast import Type
from nicd.nicvm.opcodes import Op

__all__ = ["BUILTINS", "CONSTANTS", "SEND_TYPE", "Builtin", "Result"]

SEND_TYPE = int(MsgType.NICVM_DATA)
"""The one packet type a module may send (``GM_ST_RELIABLE_NICVM_NIC_DATA``)."""


class Result(IntEnum):
    """What ``main`` returns (thesis §4.3.2): the MCP's next step for the packet."""

    SUCCESS = 0  # deliver the packet to the host (after the module's sends complete)
    PACKET_CONSUMED = 1  # do not deliver it to the host
    FAILURE = 2  # the module failed; deliver the packet and report the failure


CONSTANTS: dict[str, int] = {
    "NICVM_RESULT_SUCCESS": Result.SUCCESS.value,
    "NICVM_RESULT_PACKET_CONSUMED": Result.PACKET_CONSUMED.value,
    "NICVM_RESULT_FAILURE": Result.FAILURE.value,
    "GM_ST_RELIABLE_NICVM_NIC_DATA": SEND_TYPE,
}
"""Named integer constants, usable wherever an expression is."""


@dataclass(frozen=True, slots=True)
class Builtin:
    """A builtin function: its instruction, parameter types and result type."""

    op: Op
    params: tuple[Type, ...]
    returns: Type


_I, _F = Type.INT, Type.FLOAT

BUILTINS: dict[str, Builtin] = {
    "mpi_get_size": Builtin(Op.MPI_GET_SIZE, (), _I),
    "mpi_get_rank": Builtin(Op.MPI_GET_RANK, (), _I),
    "mpi_get_root": Builtin(Op.MPI_GET_ROOT, (), _I),
    "mpi_send_message": Builtin(Op.MPI_SEND_MESSAGE, (_I, _I), _I),
    "packet_length": Builtin(Op.PACKET_LENGTH, (), _I),
    "packet_get_arg": Builtin(Op.PACKET_GET_ARG, (_I,), _I),
    "packet_set_arg": Builtin(Op.PACKET_SET_ARG, (_I, _I), _I),
    "payload_get_u8": Builtin(Op.PAYLOAD_GET_U8, (_I,), _I),
    "payload_set_u8": Builtin(Op.PAYLOAD_SET_U8, (_I, _I), _I),
    "payload_get_u32": Builtin(Op.PAYLOAD_GET_U32, (_I,), _I),
    "payload_set_u32": Builtin(Op.PAYLOAD_SET_U32, (_I, _I), _I),
    "payload_get_i32": Builtin(Op.PAYLOAD_GET_I32, (_I,), _I),
    "payload_get_f64": Builtin(Op.PAYLOAD_GET_F64, (_I,), _F),
    "payload_set_f64": Builtin(Op.PAYLOAD_SET_F64, (_I, _F), _I),
    "to_float": Builtin(Op.I2F, (_I,), _F),
    "to_int": Builtin(Op.F2I, (_F,), _I),
}
"""Builtin functions by name. Setters and ``mpi_send_message`` return 0."""
