"""Buffers that are not Python buffers: objects exposing ``__cuda_array_interface__``.

mpi4py accepts any object exposing the CUDA array interface as a message buffer. The
emulated cluster has no GPUs, so such memory is host memory here: `host_buffer` wraps it as a
numpy array over the same bytes (no copy, `caibuf.cai_array`) that the rest of the library
reads and writes like any other buffer. DLPack objects are read by `dlpack.dlpack_view`.
"""

from __future__ import annotations

import numpy as np

from emucluster.mpi.buffer.caibuf import cai_array

__all__ = ["host_buffer"]

_PLAIN = (bytes, bytearray, memoryview, np.ndarray)


def host_buffer(obj: object) -> object:
    """``obj`` itself if it is a Python buffer; else a numpy view of its CUDA-array-interface
    memory; else ``obj`` (the caller reports it is not a buffer)."""
    if isinstance(obj, _PLAIN):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        return cai_array(obj)
    return obj
