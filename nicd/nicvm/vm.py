"""Runs a compiled module's ``main`` against one packet, within a fuel budget, never raising.

Invariants: ``run`` returns a ``RunResult`` for every module and packet; a guest fault, an
exhausted budget, and a bug in this VM are three distinct outcomes, never exceptions. Effects are
all-or-nothing: unless the outcome is OK, the payload and header arguments are restored to what
they were and no send is reported. The VM reads and writes only the packet it is given and the
running module's own variables; every payload and header index is bounds-checked (a negative or
too-large index is a fault, never Python's wrap-around indexing).

Direct threading (thesis §4.3.2, Vmgen): ``thread`` turns each instruction, once, into a closure
with its operand and successor pc bound in; the run loop is ``pc = code[pc](machine)``, charging
one unit of fuel per instruction.

MPI view (how Fig 4.3 broadcasts from any root): the builtins see the communicator renumbered so
that the root is rank 0, as MPICH's tree collectives use "relative ranks": ``mpi_get_rank()`` is
``(rank - root) mod size``, ``mpi_get_root()`` is 0, and a send to relative rank ``r`` is
recorded as a send to the real rank ``(r + root) mod size``.

Integers are 64-bit two's complement and wrap (``+ - * /``, unary ``-``, ``to_int``); ``/``
truncates toward zero and ``%`` takes the sign of the dividend (C99); division by zero (int or
float) and ``to_int`` of NaN or infinity are faults. Floats are IEEE float64 otherwise.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple, Protocol

from nicd.nicvm.builtins import SEND_TYPE, Result
from nicd.nicvm.limits import DEFAULT_FUEL, INT_MAX, INT_MIN, MAX_CALL_DEPTH, MAX_FUEL, MAX_SENDS
from nicd.nicvm.opcodes import Op

if TYPE_CHECKING:
    from nicd.nicvm.program import Function, Handler, Instruction, Module, Value

__all__ = [
    "Fault",
    "Machine",
    "Outcome",
    "Packet",
    "PacketContext",
    "RunResult",
    "SendDescriptor",
    "run",
    "thread",
]


class PacketContext(Protocol):
    """What a module may see of the packet that invoked it and of its MPI environment."""

    @property
    def rank(self) -> int:
        """This node's rank in the communicator (``mpi_get_rank()``)."""

    @property
    def size(self) -> int:
        """The communicator's size (``mpi_get_size()``); sends go to ranks 0..size-1."""

    @property
    def root(self) -> int:
        """The operation's root rank (``mpi_get_root()``)."""

    @property
    def args(self) -> list[int]:
        """The header's user argument words (u32); modules may rewrite them in place."""

    @property
    def payload(self) -> bytearray:
        """The packet payload; modules may rewrite it in place (never resize it)."""


@dataclass(slots=True)
class Packet:
    """A plain ``PacketContext``, for nicd's receive path and for tests."""

    rank: int
    size: int
    root: int
    args: list[int]
    payload: bytearray


class SendDescriptor(NamedTuple):
    """A send the module asked for (thesis Fig 4.7); the caller performs it after the run."""

    type: int
    rank: int


class Outcome(Enum):
    """How an invocation ended."""

    OK = "ok"  # main returned a valid result code
    FAULT = "fault"  # the module did something illegal: see ``RunResult.fault``
    OUT_OF_FUEL = "out_of_fuel"  # the budget ran out first; the module was stopped
    VM_ERROR = "vm_error"  # a bug in this VM, not in the module: see ``RunResult.detail``


class Fault(Enum):
    """Why a module was stopped (outcome FAULT)."""

    DIV_ZERO = "division by zero"
    FLOAT_TO_INT = "to_int of NaN or infinity"
    PAYLOAD_RANGE = "payload index out of range"
    ARG_RANGE = "header argument index out of range"
    SEND_TYPE = "send of a type other than GM_ST_RELIABLE_NICVM_NIC_DATA"
    SEND_RANK = "send to a rank outside 0..size-1"
    SEND_LIMIT = f"more than {MAX_SENDS} sends"
    CALL_DEPTH = f"calls nested deeper than {MAX_CALL_DEPTH}"
    BAD_RESULT = "main returned a value that is not a NICVM_RESULT_* code"


class RunResult(NamedTuple):
    """What ``run`` returns, always (a NamedTuple: built on every packet, it must be cheap)."""

    outcome: Outcome
    result: Result
    """main's result when OK; FAILURE for every other outcome."""
    sends: tuple[SendDescriptor, ...]
    """The sends to perform, in order (empty unless OK)."""
    fuel_used: int
    """Instructions executed, the faulting one included; the budget when out of fuel."""
    fault: Fault | None = None
    line: int | None = None
    """Source line of the faulting instruction, or of the next one when out of fuel."""
    detail: str = ""
    """For VM_ERROR: the internal exception, for the bug report."""


class Machine:
    """The explicit state of one invocation: operand stack, frames, packet, recorded sends."""

    __slots__ = (
        "args",
        "frames",
        "payload",
        "rank",
        "real_root",
        "root",
        "saved",
        "sends",
        "size",
        "slots",
        "stack",
    )

    def __init__(self, ctx: PacketContext, slots: list[Value]) -> None:
        self.stack: list[Value] = []
        self.slots = slots  # the current frame's variables
        self.frames: list[tuple[int, list[Value]]] = []  # callers: (return pc, their slots)
        self.sends: list[SendDescriptor] = []
        self.size = ctx.size
        self.root = 0  # the root-relative view (module docstring)
        self.rank = (ctx.rank - ctx.root) % ctx.size
        self.real_root = ctx.root
        self.args = ctx.args
        self.payload = ctx.payload
        self.saved: tuple[bytes, list[int]] | None = None  # packet before the first write

    def before_write(self) -> None:
        if self.saved is None:
            self.saved = (bytes(self.payload), list(self.args))

    def restore(self) -> None:
        if self.saved is not None:
            self.payload[:] = self.saved[0]
            self.args[:] = self.saved[1]


class _Stop(Exception):
    """Raised by a handler to leave the run loop: a fault, or (fault None) main returned."""

    def __init__(self, fault: Fault | None) -> None:
        self.fault = fault


def run(module: Module, ctx: PacketContext, *, fuel: int = DEFAULT_FUEL) -> RunResult:
    """Run ``module``'s main on ``ctx`` with at most ``fuel`` instructions (clamped to
    ``0..MAX_FUEL``). Never raises; rewrites ``ctx.payload``/``ctx.args`` only when OK."""
    budget = min(max(fuel, 0), MAX_FUEL)
    main = module.functions[module.main]
    if ctx.size < 1 or not 0 <= ctx.root < ctx.size or not 0 <= ctx.rank < ctx.size:
        detail = f"bad context: rank {ctx.rank}, root {ctx.root}, size {ctx.size}"
        return RunResult(Outcome.VM_ERROR, Result.FAILURE, (), 0, detail=detail)
    machine = Machine(ctx, list(main.zero_slots))
    code = module.threaded
    pc = main.entry
    used = 0
    try:
        for used in range(1, budget + 1):  # noqa: B007 - `used` is read after the loop
            pc = code[pc](machine)
        machine.restore()
        line = module.code[pc].line
        return RunResult(Outcome.OUT_OF_FUEL, Result.FAILURE, (), budget, line=line)
    except _Stop as stop:
        fault = stop.fault
        if fault is None:
            stop.__traceback__ = None  # the shared _HALT must not keep frames alive
            value = machine.stack[-1]
            if value in _RESULTS:
                return RunResult(Outcome.OK, _RESULTS[value], tuple(machine.sends), used)
            fault = Fault.BAD_RESULT
        machine.restore()
        line = module.code[pc].line
        return RunResult(Outcome.FAULT, Result.FAILURE, (), used, fault=fault, line=line)
    except Exception as exc:  # a VM bug must not take nicd down with it
        machine.restore()
        return RunResult(Outcome.VM_ERROR, Result.FAILURE, (), used, detail=repr(exc))


_RESULTS: dict[Value, Result] = {int(r): r for r in Result}
_HALT = _Stop(None)  # main returned; built once, raised once per invocation


def thread(code: tuple[Instruction, ...], functions: tuple[Function, ...]) -> tuple[Handler, ...]:
    """Bind every instruction into its handler closure, once, at upload."""
    return tuple(_FACTORIES[ins.op](ins.arg, pc + 1, functions) for pc, ins in enumerate(code))


# -- handlers: one small factory per opcode --------------------------------------------------------

_Factory = Callable[["Value | None", int, "tuple[Function, ...]"], "Handler"]
_FACTORIES: dict[Op, _Factory] = {}
_MASK64 = (1 << 64) - 1
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_F64 = struct.Struct("<d")


def _factory(op: Op) -> Callable[[_Factory], _Factory]:
    def register(make: _Factory) -> _Factory:
        _FACTORIES[op] = make
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
            raise _Stop(Fault.DIV_ZERO)
        s[-1] = _wrap(_c_divmod(int(s[-1]), b)[0])
        return nxt

    return div_i


@_factory(Op.MOD_I)
def _mod_i(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def mod_i(m: Machine) -> int:
        s = m.stack
        b = int(s.pop())
        if b == 0:
            raise _Stop(Fault.DIV_ZERO)
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


_FACTORIES[Op.ADD_F] = _float_binary(float.__add__)
_FACTORIES[Op.SUB_F] = _float_binary(float.__sub__)
_FACTORIES[Op.MUL_F] = _float_binary(float.__mul__)


@_factory(Op.DIV_F)
def _div_f(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def div_f(m: Machine) -> int:
        s = m.stack
        b = s.pop()
        if b == 0.0:
            raise _Stop(Fault.DIV_ZERO)
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


_FACTORIES[Op.CMP_EQ] = _compare(lambda a, b: a == b)
_FACTORIES[Op.CMP_NE] = _compare(lambda a, b: a != b)
_FACTORIES[Op.CMP_LT] = _compare(lambda a, b: a < b)
_FACTORIES[Op.CMP_LE] = _compare(lambda a, b: a <= b)
_FACTORIES[Op.CMP_GT] = _compare(lambda a, b: a > b)
_FACTORIES[Op.CMP_GE] = _compare(lambda a, b: a >= b)


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
            raise _Stop(Fault.CALL_DEPTH)
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
            raise _HALT
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
            raise _Stop(Fault.FLOAT_TO_INT)
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


_FACTORIES[Op.MPI_GET_SIZE] = _push_attribute("size")
_FACTORIES[Op.MPI_GET_RANK] = _push_attribute("rank")
_FACTORIES[Op.MPI_GET_ROOT] = _push_attribute("root")


@_factory(Op.MPI_SEND_MESSAGE)
def _send(arg: Value | None, nxt: int, fns: tuple[Function, ...]) -> Handler:
    def send(m: Machine) -> int:
        s = m.stack
        rank = int(s.pop())
        kind = int(s[-1])
        if kind != SEND_TYPE:
            raise _Stop(Fault.SEND_TYPE)
        if not 0 <= rank < m.size:
            raise _Stop(Fault.SEND_RANK)
        if len(m.sends) >= MAX_SENDS:
            raise _Stop(Fault.SEND_LIMIT)
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
            raise _Stop(Fault.ARG_RANGE)
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
            raise _Stop(Fault.ARG_RANGE)
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
                raise _Stop(Fault.PAYLOAD_RANGE)
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
                raise _Stop(Fault.PAYLOAD_RANGE)
            m.before_write()
            word.pack_into(m.payload, at, value if mask is None else int(value) & mask)
            s[-1] = 0
            return nxt

        return payload_set

    return make


_U8 = struct.Struct("<B")
_FACTORIES[Op.PAYLOAD_GET_U8] = _payload_get(_U8)
_FACTORIES[Op.PAYLOAD_SET_U8] = _payload_set(_U8, 0xFF)
_FACTORIES[Op.PAYLOAD_GET_U32] = _payload_get(_U32)
_FACTORIES[Op.PAYLOAD_SET_U32] = _payload_set(_U32, 0xFFFFFFFF)
_FACTORIES[Op.PAYLOAD_GET_I32] = _payload_get(_I32)
_FACTORIES[Op.PAYLOAD_GET_F64] = _payload_get(_F64)
_FACTORIES[Op.PAYLOAD_SET_F64] = _payload_set(_F64, None)

assert set(_FACTORIES) == set(Op), "every opcode has a handler"
