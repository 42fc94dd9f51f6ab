"""The per-process trace recorder: a bounded ring of fixed-shape events, written at exit.

A process that traces holds one ``Recorder`` in the module global ``tracer``; hook sites test
``if tracer is not None:`` and nothing else, so tracing off costs one attribute load and one
comparison. The ring is a ``deque(maxlen=...)``: when full the oldest event falls out and
``dropped`` counts it. ``flush`` writes one msgpack file per process into the trace directory;
``start_from_env`` arms it from ``EMU_TRACE_DIR`` (set by ``emurun --trace``) and flushes at
exit and on SIGTERM (when nobody else handles SIGTERM).
"""

from __future__ import annotations

import atexit
import collections
import os
import signal
import struct
import time
from typing import TYPE_CHECKING

import msgpack

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import FrameType

__all__ = [
    "ENV_TRACE_DIR",
    "RING_EVENTS",
    "Facts",
    "Recorder",
    "packet_fields",
    "start_from_env",
    "tracer",
]

ENV_TRACE_DIR = "EMU_TRACE_DIR"
RING_EVENTS = 1 << 20  # events kept per process (oldest dropped first)
FILE_SUFFIX = ".trace.msgpack"

# Datagram headers (nicd/link/wire.py), after the route: the first word, then the data or
# control layout.
_FIRST = struct.Struct(">HBB")  # packet type, message type, flags / NACK reason
_DATA_TAIL = struct.Struct(">IHHHH")  # at 8: seq, src node, src LC, dst node, dst LC
_CONTROL_TAIL = struct.Struct(">IHHHH")  # at 4: seq, from node, LC, to node, LC
# wire.CONTROL_TYPES: ACK, NACK, MCAST_ACK, PING, PONG, SACK (their short control header)
_CONTROL_TYPES = frozenset({10, 11, 13, 20, 21, 22})
_NO_FIELDS = (0, 0, 0, 0, 0, 0, 0)

Facts = list[tuple[int | str | bytes, ...]]
"""What a sans-IO core notes for the trace while tracing is on: ``(kind, *fields)`` tuples
(ints and strings; a last ``bytes`` field is a datagram, recorded as its header fields and
size). The shell stamps and records them (:meth:`Recorder.emit_facts`) and empties the list."""


class Recorder:
    """Events of one process, in arrival order, at most ``capacity`` of them."""

    def __init__(self, role: str, node: int, capacity: int = RING_EVENTS) -> None:
        self.role = role
        self.node = node
        self.capacity = capacity
        self.ring: collections.deque[tuple[int | str, ...]] = collections.deque(maxlen=capacity)
        self.emitted = 0

    @property
    def dropped(self) -> int:
        """Events that fell out of the full ring."""
        return self.emitted - len(self.ring)

    def emit(self, kind: int, *fields: int | str) -> None:
        """Record one event of ``kind`` now."""
        self.emitted += 1
        self.ring.append((time.monotonic_ns(), kind, *fields))

    def emit_facts(self, facts: Facts) -> None:
        """Record a core's facts (see :data:`Facts`) with the time now; empty ``facts``."""
        now = time.monotonic_ns()
        ring = self.ring
        for fact in facts:
            *head, last = fact
            if isinstance(last, bytes):
                ring.append((now, *_plain(head), *packet_fields(last), len(last)))
            else:
                ring.append((now, *_plain(head), last))
        self.emitted += len(facts)
        facts.clear()

    def emit_packet(self, kind: int, datagram: bytes) -> None:
        """Record a datagram sent or received, decoding only its header fields."""
        self.emitted += 1
        self.ring.append((time.monotonic_ns(), kind, *packet_fields(datagram), len(datagram)))

    def snapshot(self) -> dict[str, object]:
        """The file's content: who recorded, what was lost, the events."""
        return {
            "role": self.role,
            "node": self.node,
            "pid": os.getpid(),
            "clock": "CLOCK_MONOTONIC",
            "emitted": self.emitted,
            "dropped": self.dropped,
            "events": [list(e) for e in self.ring],
        }

    def flush(self, directory: str) -> str:
        """Write the ring to ``directory``/<role><node>-<pid>.trace.msgpack; return the path."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{self.role}{self.node}-{os.getpid()}{FILE_SUFFIX}")
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(self.snapshot()))
        os.replace(tmp, path)
        return path


def _plain(fields: list[int | str | bytes]) -> list[int | str]:
    """The fields of a fact before its last (no datagram may stand there: dropped)."""
    return [f for f in fields if not isinstance(f, bytes)]


def packet_fields(datagram: bytes) -> tuple[int, ...]:
    """(mtype, flags, seq, src, src_port, dst, dst_port) of a datagram; zeros if too short."""
    try:
        base = 1 + datagram[0]  # the route length byte, then the route (wire._frame)
        _, mtype, flags = _FIRST.unpack_from(datagram, base)
        if mtype in _CONTROL_TYPES:
            seq, src, sport, dst, dport = _CONTROL_TAIL.unpack_from(datagram, base + 4)
        else:
            seq, src, sport, dst, dport = _DATA_TAIL.unpack_from(datagram, base + 8)
    except (struct.error, IndexError):
        return _NO_FIELDS
    return (mtype, flags, seq, src, sport, dst, dport)


tracer: Recorder | None = None
"""This process's recorder, or None when tracing is off."""


def start_from_env(
    role: str, node: int, environ: Mapping[str, str] | None = None
) -> Recorder | None:
    """Arm ``tracer`` if ``EMU_TRACE_DIR`` is set: flush it at exit and on SIGTERM."""
    global tracer
    env = os.environ if environ is None else environ
    directory = env.get(ENV_TRACE_DIR)
    if not directory or tracer is not None:
        return tracer
    rec = tracer = Recorder(role, node)
    atexit.register(rec.flush, directory)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:

        def _on_term(signum: int, frame: FrameType | None) -> None:
            rec.flush(directory)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, _on_term)
    return rec
