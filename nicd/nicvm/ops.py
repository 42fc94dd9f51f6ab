"""The threaded handlers: one small factory per opcode, registered in ``FACTORIES``.

``vm.thread`` calls ``FACTORIES[op](arg, next_pc, functions)`` once per instruction at upload;
the closure it gets back runs that instruction against a :class:`~nicd.nicvm.machine.Machine`
and returns the next pc (direct threading, thesis §4.3.2). Semantics (wrapping 64-bit ints,
C99 division, bounds-checked packet access, faults) are stated in :mod:`nicd.nicvm.vm`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from nicd.nicvm.builtins import SEND_TYPE
from nicd.nicvm.limits import INT_MAX, INT_MIN, MAX_CALL_DEPTH, MAX_SENDS
from nicd.nicvm.machine import HALT, Fault, SendDescriptor, Stop
from nicd.nicvm.opcodes import Op

if TYPE_CHECKING:
    from nicd.nicvm.machine import Handler, Machine, Value
    from nicd.nicvm.program import Function

__all__ = ["FACTORIES"]

# -- handlers: one small factory per opcode --------------------------------------------------------

_Factory = Callable[["Value | None", int, "tuple[Function, ...]"], "Handler"]
FACTORIES: dict[Op, _Factory] = {}
_MASK64 = (1 << 64) - 1
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_F64 = struct.Struct("<d")


def _factory(op: Op) -> Callable[[_Factory], _Factory]:
    def register(make: _Factory) -> _Factory:
        FACTORIES[op] = make
        return make

    return register


def _wrap(value: int) -> int:
    return ((value - INT_MIN) & _MASK64) + INT_MIN


def _index(arg: Value | None) -> int:
    assert isinstance(arg, int)
    return arg


@_factory(Op.CONST)
def _const(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    assert arg is not None
    value: Value = arg

    def const(m: Machine) -> int:
        m.stack.append(value)
        return nxt

    return const


@_factory(Op.LOAD)
def _load(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    slot = _index(arg)

    def load(m: Machine) -> int:
        m.stack.append(m.slots[slot])
        return nxt

    return load


@_factory(Op.STORE)
def _store(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    slot = _index(arg)

    def store(m: Machine) -> int:
        m.slots[slot] = m.stack.pop()
        return nxt

    return store


@_factory(Op.POP)
def _pop(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def pop(m: Machine) -> int:
        m.stack.pop()
        return nxt

    return pop


@_factory(Op.ADD_I)
def _add_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def add_i(m: Machine) -> int:
        s = m.stack
        b = s.pop()
        r = s[-1] + b
        s[-1] = r if INT_MIN <= r <= INT_MAX else _wrap(int(r))
        return nxt

    return add_i


@_factory(Op.SUB_I)
def _sub_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def sub_i(m: Machine) -> int:
        s = m.stack
        b = s.pop()
        r = s[-1] - b
        s[-1] = r if INT_MIN <= r <= INT_MAX else _wrap(int(r))
        return nxt

    return sub_i


@_factory(Op.MUL_I)
def _mul_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def mul_i(m: Machine) -> int:
        s = m.stack
        b = s.pop()
        r = s[-1] * b
        s[-1] = r if INT_MIN <= r <= INT_MAX else _wrap(int(r))
        return nxt

    return mul_i


def _c_divmod(a: int, b: int) -> tuple[int, int]:
    """C99 quotient (toward zero, unwrapped) and remainder (sign of a)."""
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return q, a - b * q


@_factory(Op.DIV_I)
def _div_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def div_i(m: Machine) -> int:
        s = m.stack
        b = int(s.pop())
        if b == 0:
            raise Stop(Fault.DIV_ZERO)
        s[-1] = _wrap(_c_divmod(int(s[-1]), b)[0])
        return nxt

    return div_i


@_factory(Op.MOD_I)
def _mod_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def mod_i(m: Machine) -> int:
        s = m.stack
        b = int(s.pop())
        if b == 0:
            raise Stop(Fault.DIV_ZERO)
        s[-1] = _c_divmod(int(s[-1]), b)[1]
        return nxt

    return mod_i


@_factory(Op.NEG_I)
def _neg_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def neg_i(m: Machine) -> int:
        s = m.stack
        s[-1] = _wrap(-int(s[-1]))
        return nxt

    return neg_i


def _float_binary(fn: Callable[[float, float], float]) -> _Factory:
    def make(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
        def float_op(m: Machine) -> int:
            s = m.stack
            b = s.pop()
            s[-1] = fn(s[-1], b)
            return nxt

        return float_op

    return make


FACTORIES[Op.ADD_F] = _float_binary(float.__add__)
FACTORIES[Op.SUB_F] = _float_binary(float.__sub__)
FACTORIES[Op.MUL_F] = _float_binary(float.__mul__)


@_factory(Op.DIV_F)
def _div_f(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def div_f(m: Machine) -> int:
        s = m.stack
        b = s.pop()
        if b == 0.0:
            raise Stop(Fault.DIV_ZERO)
        s[-1] = s[-1] / b
        return nxt

    return div_f


@_factory(Op.NEG_F)
def _neg_f(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def neg_f(m: Machine) -> int:
        s = m.stack
        s[-1] = -s[-1]
        return nxt

    return neg_f


def _compare(fn: Callable[[Value, Value], bool]) -> _Factory:
    def make(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
        def compare(m: Machine) -> int:
            s = m.stack
            b = s.pop()
            s[-1] = 1 if fn(s[-1], b) else 0
            return nxt

        return compare

    return make


FACTORIES[Op.CMP_EQ] = _compare(lambda a, b: a == b)
FACTORIES[Op.CMP_NE] = _compare(lambda a, b: a != b)
FACTORIES[Op.CMP_LT] = _compare(lambda a, b: a < b)
FACTORIES[Op.CMP_LE] = _compare(lambda a, b: a <= b)
FACTORIES[Op.CMP_GT] = _compare(lambda a, b: a > b)
FACTORIES[Op.CMP_GE] = _compare(lambda a, b: a >= b)


@_factory(Op.NOT)
def _not(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def not_(m: Machine) -> int:
        s = m.stack
        s[-1] = 1 if s[-1] == 0 else 0
        return nxt

    return not_


@_factory(Op.TO_BOOL)
def _to_bool(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def to_bool(m: Machine) -> int:
        s = m.stack
        s[-1] = 0 if s[-1] == 0 else 1
        return nxt

    return to_bool


@_factory(Op.JUMP)
def _jump(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    target = _index(arg)

    def jump(m: Machine) -> int:
        return target

    return jump


@_factory(Op.JUMP_IF_FALSE)
def _jump_if_false(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    target = _index(arg)

    def jump_if_false(m: Machine) -> int:
        return target if m.stack.pop() == 0 else nxt

    return jump_if_false


@_factory(Op.AND_JUMP)
def _and_jump(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    target = _index(arg)

    def and_jump(m: Machine) -> int:
        s = m.stack
        if s[-1] == 0:
            return target
        s.pop()
        return nxt

    return and_jump


@_factory(Op.OR_JUMP)
def _or_jump(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    target = _index(arg)

    def or_jump(m: Machine) -> int:
        s = m.stack
        if s[-1] != 0:
            s[-1] = 1
            return target
        s.pop()
        return nxt

    return or_jump


@_factory(Op.CALL)
def _call(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    callee = fns[_index(arg)]
    entry, nparams = callee.entry, len(callee.params)
    template = list(callee.zero_slots)

    def call(m: Machine) -> int:
        if len(m.frames) >= MAX_CALL_DEPTH - 1:
            raise Stop(Fault.CALL_DEPTH)
        slots = template.copy()
        if nparams:
            s = m.stack
            slots[:nparams] = s[-nparams:]
            del s[-nparams:]
        m.frames.append((nxt, m.slots))
        m.slots = slots
        return entry

    return call


@_factory(Op.RETURN)
def _return(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def return_(m: Machine) -> int:
        if not m.frames:
            raise HALT
        pc, m.slots = m.frames.pop()
        return pc

    return return_


@_factory(Op.I2F)
def _i2f(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def i2f(m: Machine) -> int:
        s = m.stack
        s[-1] = float(s[-1])
        return nxt

    return i2f


@_factory(Op.F2I)
def _f2i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def f2i(m: Machine) -> int:
        s = m.stack
        value = s[-1]
        if not math.isfinite(value):
            raise Stop(Fault.FLOAT_TO_INT)
        s[-1] = _wrap(int(value))
        return nxt

    return f2i


def _push_attribute(name: str) -> _Factory:
    def make(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
        def push(m: Machine) -> int:
            m.stack.append(getattr(m, name))
            return nxt

        return push

    return make


FACTORIES[Op.MPI_GET_SIZE] = _push_attribute("size")
FACTORIES[Op.MPI_GET_RANK] = _push_attribute("rank")
FACTORIES[Op.MPI_GET_ROOT] = _push_attribute("root")


@_factory(Op.MPI_SEND_MESSAGE)
def _send(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def send(m: Machine) -> int:
        s = m.stack
        rank = int(s.pop())
        kind = int(s[-1])
        if kind != SEND_TYPE:
            raise Stop(Fault.SEND_TYPE)
        if not 0 <= rank < m.size:
            raise Stop(Fault.SEND_RANK)
        if len(m.sends) >= MAX_SENDS:
            raise Stop(Fault.SEND_LIMIT)
        m.sends.append(SendDescriptor(kind, (rank + m.real_root) % m.size))
        s[-1] = 0
        return nxt

    return send


@_factory(Op.PACKET_LENGTH)
def _packet_length(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def packet_length(m: Machine) -> int:
        m.stack.append(len(m.payload))
        return nxt

    return packet_length


@_factory(Op.PACKET_GET_ARG)
def _get_arg(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def get_arg(m: Machine) -> int:
        s = m.stack
        i = int(s[-1])
        if not 0 <= i < len(m.args):
            raise Stop(Fault.ARG_RANGE)
        s[-1] = m.args[i]
        return nxt

    return get_arg


@_factory(Op.PACKET_SET_ARG)
def _set_arg(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def set_arg(m: Machine) -> int:
        s = m.stack
        value = int(s.pop())
        i = int(s[-1])
        if not 0 <= i < len(m.args):
            raise Stop(Fault.ARG_RANGE)
        m.before_write()
        m.args[i] = value & 0xFFFFFFFF
        s[-1] = 0
        return nxt

    return set_arg


def _payload_get(word: struct.Struct) -> _Factory:
    width = word.size

    def make(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
        def payload_get(m: Machine) -> int:
            s = m.stack
            at = int(s[-1]) * width
            if at < 0 or at + width > len(m.payload):
                raise Stop(Fault.PAYLOAD_RANGE)
            s[-1] = word.unpack_from(m.payload, at)[0]
            return nxt

        return payload_get

    return make


def _payload_set(word: struct.Struct, mask: int | None) -> _Factory:
    width = word.size

    def make(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
        def payload_set(m: Machine) -> int:
            s = m.stack
            value = s.pop()
            at = int(s[-1]) * width
            if at < 0 or at + width > len(m.payload):
                raise Stop(Fault.PAYLOAD_RANGE)
            m.before_write()
            word.pack_into(m.payload, at, value if mask is None else int(value) & mask)
            s[-1] = 0
            return nxt

        return payload_set

    return make


_U8 = struct.Struct("<B")
FACTORIES[Op.PAYLOAD_GET_U8] = _payload_get(_U8)
FACTORIES[Op.PAYLOAD_SET_U8] = _payload_set(_U8, 0xFF)
FACTORIES[Op.PAYLOAD_GET_U32] = _payload_get(_U32)
FACTORIES[Op.PAYLOAD_SET_U32] = _payload_set(_U32, 0xFFFFFFFF)
FACTORIES[Op.PAYLOAD_GET_I32] = _payload_get(_I32)
FACTORIES[Op.PAYLOAD_GET_F64] = _payload_get(_F64)
FACTORIES[Op.PAYLOAD_SET_F64] = _payload_set(_F64, None)

assert set(FACTORIES) == set(Op), "every opcode has a handler"
