"""Trace MPI calls on the host: wrap the blocking calls of ``Intracomm`` when tracing is on.

Nothing is wrapped when ``EMU_TRACE_DIR`` is unset, so an untraced job runs the methods
unchanged. A wrapped call records ``mpi_enter`` (call, peer, tag, bytes, communicator,
algorithm) and ``mpi_exit``. emutrace knows no MPI library: the caller hands ``install`` a
``describe`` function that names the communicator and the collective algorithm a call will use.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from emutrace import recorder
from emutrace.kinds import K_MPI_ENTER, K_MPI_EXIT, MPI_CALLS

__all__ = ["install"]

_PEER_ARGS = ("dest", "source", "root")
_NO_PEER = -1  # ANY_SOURCE, or a call without a peer

Describe = Callable[[Any, str, Any], tuple[int, str]]
"""(communicator, call name, its ``algorithm=`` argument) -> (communicator id, the name of the
algorithm the call runs, "" for a call that has none)."""


def _undescribed(comm: Any, call: str, algorithm: Any) -> tuple[int, str]:
    return (-1, algorithm if isinstance(algorithm, str) else "")


def install(cls: type, node: int, describe: Describe = _undescribed) -> bool:
    """Start this host's recorder and wrap ``cls``'s traced methods; False when off."""
    rec = recorder.start_from_env("host", node)
    if rec is None or getattr(cls, "_emutrace_wrapped", False):
        return rec is not None
    for code, name in enumerate(MPI_CALLS):
        method = getattr(cls, name, None)
        if method is not None:
            setattr(cls, name, _wrap(rec, code, method, describe))
    cls._emutrace_wrapped = True  # type: ignore[attr-defined]
    return True


def _wrap(rec: recorder.Recorder, code: int, method: Any, describe: Describe) -> Any:
    signature = inspect.signature(method)
    call = MPI_CALLS[code]

    @functools.wraps(method)
    def traced(*args: Any, **kwargs: Any) -> Any:
        try:
            binding = signature.bind_partial(*args, **kwargs)
            binding.apply_defaults()  # a Bcast without root= has root 0
            bound = binding.arguments
        except TypeError:
            bound = {}
        try:
            comm, algorithm = describe(args[0] if args else None, call, bound.get("algorithm"))
        except Exception:  # the call itself will report a bad argument
            comm, algorithm = -1, "?"
        rec.emit(K_MPI_ENTER, code, *_describe(bound), comm, algorithm)
        try:
            return method(*args, **kwargs)
        finally:
            rec.emit(K_MPI_EXIT, code)

    return traced


def _describe(bound: dict[str, Any]) -> tuple[int, int, int]:
    """(peer, tag, bytes) of one call's bound arguments, -1 where the call has none."""
    peer = next((bound[a] for a in _PEER_ARGS if isinstance(bound.get(a), int)), _NO_PEER)
    tag = bound.get("tag", bound.get("sendtag", -1))
    buf = next((bound[a] for a in ("buf", "sendbuf") if a in bound), None)
    try:
        nbytes = memoryview(buf).nbytes if buf is not None else -1
    except TypeError:
        nbytes = -1  # an object (lowercase API) or a [buf, type] spec
    return (int(peer), int(tag) if isinstance(tag, int) else -1, nbytes)
