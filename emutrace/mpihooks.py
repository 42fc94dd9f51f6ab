"""Trace MPI calls on the host: wrap the blocking calls of ``Intracomm`` when tracing is on.

Nothing is wrapped when ``EMU_TRACE_DIR`` is unset, so an untraced job runs the methods
unchanged. A wrapped call records ``mpi_enter`` (call, peer, tag, bytes) and ``mpi_exit``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from emutrace import recorder
from emutrace.kinds import K_MPI_ENTER, K_MPI_EXIT, MPI_CALLS

__all__ = ["install"]

_PEER_ARGS = ("dest", "source", "root")
_NO_PEER = -1  # ANY_SOURCE, or a call without a peer


def install(cls: type, node: int) -> bool:
    """Start this host's recorder and wrap ``cls``'s traced methods; False when off."""
    rec = recorder.start_from_env("host", node)
    if rec is None or getattr(cls, "_emutrace_wrapped", False):
        return rec is not None
    for code, name in enumerate(MPI_CALLS):
        method = getattr(cls, name, None)
        if method is not None:
            setattr(cls, name, _wrap(rec, code, method))
    cls._emutrace_wrapped = True  # type: ignore[attr-defined]
    return True


def _wrap(rec: recorder.Recorder, code: int, method: Any) -> Any:
    signature = inspect.signature(method)

    @functools.wraps(method)
    def traced(*args: Any, **kwargs: Any) -> Any:
        rec.emit(K_MPI_ENTER, code, *_describe(signature, args, kwargs))
        try:
            return method(*args, **kwargs)
        finally:
            rec.emit(K_MPI_EXIT, code)

    return traced


def _describe(signature: inspect.Signature, args: Any, kwargs: Any) -> tuple[int, int, int]:
    """(peer, tag, bytes) of one call, -1 where the call has none."""
    try:
        bound = signature.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return (_NO_PEER, -1, -1)
    peer = next((bound[a] for a in _PEER_ARGS if isinstance(bound.get(a), int)), _NO_PEER)
    tag = bound.get("tag", bound.get("sendtag", -1))
    buf = next((bound[a] for a in ("buf", "sendbuf") if a in bound), None)
    try:
        nbytes = memoryview(buf).nbytes if buf is not None else -1
    except TypeError:
        nbytes = -1  # an object (lowercase API) or a [buf, type] spec
    return (int(peer), int(tag) if isinstance(tag, int) else -1, nbytes)
