"""Buffers that are not Python buffers: objects exposing ``__cuda_array_interface__``.

mpi4py accepts any object exposing the CUDA array interface as a message buffer. The
emulated cluster has no GPUs, so such memory is host memory here: `host_buffer` wraps it as a
numpy array over the same bytes (no copy) that the rest of the library reads and writes like
any other buffer. DLPack-only objects are not accepted yet (numpy's importer crashed on
mpi4py's test capsules): they get ERR_BUFFER.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["host_buffer"]

_PLAIN = (bytes, bytearray, memoryview, np.ndarray)


class _Interface:
    """Holds an ``__array_interface__`` (and the object owning the memory, to keep it alive)."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, interface: dict[str, Any], owner: object) -> None:
        self.__array_interface__ = interface
        self.owner = owner


def host_buffer(obj: object) -> object:
    """``obj`` itself if it is a Python buffer; else a numpy view of its CUDA-array-interface
    memory; else ``obj`` (the caller reports it is not a buffer)."""
    if isinstance(obj, _PLAIN):
        return obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        interface = {
            "shape": tuple(cai["shape"]),
            "typestr": cai["typestr"],
            "data": tuple(cai["data"]),
            "strides": cai.get("strides"),
            "version": 3,
        }
        return np.asarray(_Interface(interface, obj))
    return obj
