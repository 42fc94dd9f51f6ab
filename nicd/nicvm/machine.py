"""The state one NICVM invocation runs against, and what its handlers may raise.

``Machine`` is the explicit state (operand stack, frames, packet, recorded sends) that every
threaded handler (:mod:`nicd.nicvm.ops`) receives; ``Stop`` leaves the run loop
(:mod:`nicd.nicvm.vm`). Kept apart from both so that the program, the ops and the run loop
depend on this module and never on each other in a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import NamedTuple, Protocol

from nicd.nicvm.limits import MAX_CALL_DEPTH, MAX_SENDS

__all__ = [
    "HALT",
    "Fault",
    "Handler",
    "Machine",
    "PacketContext",
    "SendDescriptor",
    "Stop",
    "Value",
]

Value = int | float
Handler = Callable[["Machine"], int]
"""Executes one instruction against the machine and returns the next pc."""


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


class SendDescriptor(NamedTuple):
    """A send the module asked for (thesis Fig 4.7); the caller performs it after the run."""

    type: int
    rank: int


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


class Stop(Exception):
    """Raised by a handler to leave the run loop: a fault, or (fault None) main returned."""

    def __init__(self, fault: Fault | None) -> None:
        self.fault = fault


HALT = Stop(None)
"""main returned; built once, raised once per invocation."""
