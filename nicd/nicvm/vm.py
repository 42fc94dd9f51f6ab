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

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, NamedTuple

from nicd.nicvm.builtins import Result
from nicd.nicvm.limits import DEFAULT_FUEL, MAX_FUEL
from nicd.nicvm.machine import Fault, Machine, PacketContext, SendDescriptor, Stop
from nicd.nicvm.ops import FACTORIES

if TYPE_CHECKING:
    from nicd.nicvm.machine import Handler, Value
    from nicd.nicvm.program import Function, Instruction, Module

__all__ = [
    "Outcome",
    "Packet",
    "RunResult",
    "run",
    "thread",
]


@dataclass(slots=True)
class Packet:
    """A plain ``PacketContext``, for nicd's receive path and for tests."""

    rank: int
    size: int
    root: int
    args: list[int]
    payload: bytearray


class Outcome(Enum):
    """How an invocation ended."""

    OK = "ok"  # main returned a valid result code
    FAULT = "fault"  # the module did something illegal: see ``RunResult.fault``
    OUT_OF_FUEL = "out_of_fuel"  # the budget ran out first; the module was stopped
    VM_ERROR = "vm_error"  # a bug in this VM, not in the module: see ``RunResult.detail``


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
    except Stop as stop:
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


def thread(code: tuple[Instruction, ...], functions: tuple[Function, ...]) -> tuple[Handler, ...]:
    """Bind every instruction into its handler closure, once, at upload."""
    return tuple(FACTORIES[ins.op](ins.arg, pc + 1, functions) for pc, ins in enumerate(code))
