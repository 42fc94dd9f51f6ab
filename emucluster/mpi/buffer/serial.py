"""``MPI.pickle``: how lowercase (object) point-to-point calls serialise Python objects.

As mpi4py's ``MPI.pickle``: ``dumps``/``loads`` default to the standard pickle at the highest
protocol; ``MPI.pickle.__init__(dumps, loads, protocol)`` swaps in another serialiser (dill,
marshal, json ...) for every later send and receive of this process. ``MPI.Pickle`` is the
class; its ``dumps_oob``/``loads_oob`` (pickle protocol 5 with out-of-band buffers of at least
``THRESHOLD`` bytes) are what ``mpi4py.util.pkl5`` sends with.
"""

from __future__ import annotations

import pickle as _std
from typing import TYPE_CHECKING, Any

from emucluster.mpi.buffer.membuf import buffer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DEFAULT_THRESHOLD", "PICKLE", "Pickle"]

DEFAULT_THRESHOLD = 262144
"""mpi4py's default out-of-band threshold (256 KiB)."""


class Pickle:
    """A serialiser: ``dumps(obj) -> bytes`` and ``loads(bytes) -> obj``."""

    def __init__(self, dumps: Callable[..., Any] = _std.dumps,
                 loads: Callable[..., Any] = _std.loads,
                 protocol: int | None = None) -> None:  # fmt: skip
        self._dumps = dumps
        self._loads = loads
        if protocol is None and dumps is _std.dumps:
            protocol = _std.HIGHEST_PROTOCOL
        self.PROTOCOL = protocol
        self._threshold = DEFAULT_THRESHOLD

    @property
    def THRESHOLD(self) -> int:
        """Bytes from which ``dumps_oob`` sends a buffer out of band; setting None restores
        the default (as mpi4py)."""
        return self._threshold

    @THRESHOLD.setter
    def THRESHOLD(self, value: int | None) -> None:
        self._threshold = DEFAULT_THRESHOLD if value is None else int(value)

    def dumps(self, obj: Any) -> bytes:
        """Serialise ``obj``."""
        if self.PROTOCOL is None:
            return bytes(self._dumps(obj))
        return bytes(self._dumps(obj, self.PROTOCOL))

    def loads(self, data: bytes | bytearray | memoryview) -> Any:
        """Rebuild an object from ``data``; an empty message is None (as mpi4py: a buffer
        send of zero bytes received by ``recv``)."""
        if len(data) == 0:
            return None
        return self._loads(data)

    def dumps_oob(self, obj: Any) -> tuple[bytes, list[buffer]]:
        """Serialise ``obj`` with protocol 5 (at least): (the pickle, its out-of-band buffers
        as ``MPI.buffer`` views of the object's memory, each ``THRESHOLD`` bytes or more;
        smaller ones stay in band)."""
        buffers: list[buffer] = []

        def out_of_band(buf: _std.PickleBuffer) -> bool:
            view = buf.raw()
            if view.nbytes < self.THRESHOLD:
                return True  # serialised in band
            buffers.append(buffer.frombuffer(view, readonly=view.readonly))
            return False

        protocol = max(self.PROTOCOL or 0, 5)
        return bytes(self._dumps(obj, protocol, buffer_callback=out_of_band)), buffers

    def loads_oob(self, data: Any, buffers: Any) -> Any:
        """Rebuild an object from a ``dumps_oob`` pickle and its buffers."""
        return self._loads(data, buffers=buffers)


PICKLE = Pickle()
"""The process's serialiser (``MPI.pickle``)."""
