"""Remote atomics executed by the NIC (MPI one-sided accumulate, fetch-and-op and
compare-and-swap): the operation codes, the message's meta word, and applying one operation to
registered memory.

An ``RM_ATOMIC`` message (layout in :mod:`nicd.hostlink.grim`) names a range of the target's
registered memory, an element type (a numpy type character: the host's native layout), an
operation and whether the old contents go back to the initiator. The NIC is single-threaded and
applies each message whole before it looks at the next, so every atomic is atomic per element
(indeed per message) with respect to every other remote operation on that memory, as MPI
requires of accumulates. Pure: numpy on a memoryview, no I/O.

Invariants: only the named range is written; an operation the element type cannot take (a
bitwise op on floats, an unknown code) raises :class:`AtomicError` before anything is written.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

__all__ = [
    "ELEMENT_CODES",
    "LOCK_OPS",
    "AtomicError",
    "AtomicOp",
    "apply_atomic",
    "pack_meta",
    "target_length",
    "unpack_meta",
]


class AtomicOp(IntEnum):
    """What an ``RM_ATOMIC`` does to each element (MPI's predefined ops, plus CAS)."""

    SUM = 1
    PROD = 2
    MAX = 3
    MIN = 4
    LAND = 5
    BAND = 6
    LOR = 7
    BOR = 8
    LXOR = 9
    BXOR = 10
    REPLACE = 11
    NO_OP = 12
    CAS = 13
    """Compare-and-swap: the payload is the compare value then the new value."""
    LOCK_SHARED = 14
    """Passive-target lock (:mod:`nicd.grim.locks`): the status answers at the grant."""
    LOCK_EXCLUSIVE = 15
    UNLOCK = 16


LOCK_OPS = frozenset({AtomicOp.LOCK_SHARED, AtomicOp.LOCK_EXCLUSIVE, AtomicOp.UNLOCK})
"""Operations on a NIC-kept lock queue, not on memory (:func:`apply_atomic` refuses them)."""


ELEMENT_CODES = frozenset("bBhHiIlLqQfdg?FDG")
"""Element types the NIC computes on (numpy type characters, the host's native order)."""
_FETCH = 1 << 16
_BITWISE = frozenset("bBhHiIlLqQ?")
_ARITH: dict[AtomicOp, np.ufunc] = {
    AtomicOp.SUM: np.add,
    AtomicOp.PROD: np.multiply,
    AtomicOp.MAX: np.maximum,
    AtomicOp.MIN: np.minimum,
}
_LOGICAL: dict[AtomicOp, np.ufunc] = {
    AtomicOp.LAND: np.logical_and,
    AtomicOp.LOR: np.logical_or,
    AtomicOp.LXOR: np.logical_xor,
}
_BITS: dict[AtomicOp, np.ufunc] = {
    AtomicOp.BAND: np.bitwise_and,
    AtomicOp.BOR: np.bitwise_or,
    AtomicOp.BXOR: np.bitwise_xor,
}


class AtomicError(ValueError):
    """The operation cannot be applied (unknown op or type, or a type the op does not take)."""


def pack_meta(op: AtomicOp, code: str, *, fetch: bool) -> int:
    """The meta word: op (8 bits) | element type character (8) | fetch flag (bit 16)."""
    return int(op) | ord(code) << 8 | (_FETCH if fetch else 0)


def unpack_meta(meta: int) -> tuple[int, str, bool]:
    """(op code, element type character, fetch) of a meta word (not validated here)."""
    return meta & 0xFF, chr(meta >> 8 & 0xFF), bool(meta & _FETCH)


def target_length(meta: int, payload_len: int) -> int:
    """Bytes of target memory an atomic with this meta and payload touches."""
    return payload_len // 2 if meta & 0xFF == AtomicOp.CAS else payload_len


def apply_atomic(op_code: int, code: str, target: memoryview, payload: bytes) -> bytes:
    """Apply one atomic to ``target`` (writable bytes); return the old contents."""
    try:
        op = AtomicOp(op_code)
    except ValueError:
        raise AtomicError(f"unknown atomic op {op_code}") from None
    if op in LOCK_OPS:
        raise AtomicError(f"{op.name} is a lock queue operation, not one on memory")
    if code not in ELEMENT_CODES:
        raise AtomicError(f"unknown element type {code!r}")
    dtype = np.dtype(code)
    n = len(target)
    if n % dtype.itemsize or target_length(int(op), len(payload)) != n:
        raise AtomicError(f"{len(payload)} B of operand do not fit {n} B of {code!r} elements")
    old = bytes(target)
    if op is AtomicOp.NO_OP:
        return old
    if op is AtomicOp.CAS:
        if old == payload[:n]:
            target[:] = payload[n:]
        return old
    if op is AtomicOp.REPLACE:
        target[:] = payload
        return old
    mem = np.frombuffer(target, dtype)
    operand = np.frombuffer(payload, dtype)
    with np.errstate(all="ignore"):
        if op in _ARITH:
            if code in "FDG" and op in (AtomicOp.MAX, AtomicOp.MIN):
                raise AtomicError(f"{op.name} on complex elements")
            _ARITH[op](mem, operand, out=mem, casting="unsafe")
        elif op in _LOGICAL:
            mem[:] = _LOGICAL[op](mem, operand)
        elif code in _BITWISE:
            _BITS[op](mem, operand, out=mem, casting="unsafe")
        else:
            raise AtomicError(f"{op.name} on {code!r} elements")
    return old
