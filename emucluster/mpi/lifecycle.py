"""The MPI library's life in this process: Init, Finalize, Abort, the clock, the exit hooks.

``import emucluster.MPI`` calls `init` (as importing mpi4py.MPI initialises MPI), which opens
this process's `Runtime` (``emucluster.mpi.runtime``); `finalize` runs at interpreter exit
(atexit) unless the program called ``MPI.Finalize()``: it drains outstanding sends, writes
``$EMU_STATS_DIR/rank<N>.json`` if that variable is set, and closes the Port. An uncaught
exception prints its traceback and ends the rank at once with exit status 1 (no finalize,
which could wait on peers forever), so emurun stops the job.

A process that a PMI-1 launcher started instead (``mpiexec``, ``srun --mpi=pmi2``: ``PMI_FD``
or ``PMI_PORT`` set, no ``EMU_NIC_SOCKET``) first brings its node up through the launcher
(``emucluster.pmi.bootstrap``: its own nicd, the address exchange, the routes) and then runs as
under emurun; its Finalize ends with a PMI barrier and stops that nicd, and Abort asks the
launcher to end the job.

Outside both (no ``EMU_NIC_SOCKET``, no PMI) the library runs as a singleton: one rank, no NIC;
sends to itself still work, and a wait that can never be satisfied raises instead of hanging.

This module keeps the one piece of process-wide MPI state, the current Runtime, for the calls
that have no communicator to reach it through (``MPI.Finalize``, ``MPI.Wtime``, error handlers
that abort); library code reaches the engine through ``CommState.runtime``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from emucluster import nicvm as host_nicvm
from emucluster.config import HostConfig, process_environ
from emucluster.mpi.errors import ERR_OTHER
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import set_maxprocs
from emucluster.mpi.runtime import Runtime, open_runtime
from emucluster.offload import shells
from emucluster.offload.app_bypass import shell as appbypass
from emucluster.pmi import bootstrap
from emucluster.port.client import PortError, SendFailedError

if TYPE_CHECKING:
    from types import TracebackType

    from emucluster.port.progress import Progress

__all__ = [
    "FINALIZE_TIMEOUT_S",
    "VENDOR",
    "abort",
    "config",
    "current",
    "finalize",
    "init",
    "is_finalized",
    "is_initialized",
    "processor_name",
    "stats",
    "wtick",
    "wtime",
]

VENDOR = ("emucluster", (0, 1, 0))
"""``MPI.get_vendor()``: this library's own name and version (no MPI vendor's)."""
FINALIZE_TIMEOUT_S = 30.0  # longest Finalize waits for the NIC to complete outstanding sends

_runtime: Runtime | None = None
_attached: bootstrap.Attached | None = None  # this rank's node, when a PMI launcher started it
_config = HostConfig()  # replaced by the environment's at init
_state = "new"  # new -> initialized -> finalized
_wtime_origin = time.perf_counter()


def init() -> Runtime:
    """Open the MPI port and build this process's Runtime (idempotent while initialized)."""
    global _attached, _config, _runtime, _state
    if _runtime is not None:
        return _runtime
    if _state == "finalized":
        raise MPIException(ERR_OTHER, "MPI was finalized; it cannot be initialized again")
    try:
        # started by a PMI launcher (not emurun): bring this rank's node up first
        _attached = bootstrap.attach(process_environ())
    except bootstrap.BootstrapError as exc:
        raise MPIException(ERR_OTHER, str(exc)) from exc
    _config = HostConfig.from_env()
    _runtime = runtime = open_runtime(_config)
    host_nicvm.use_mpi_port(None if runtime.engine.singleton else runtime.engine.port)
    set_maxprocs(_config.world_of(runtime.num_nodes)[1])
    _state = "initialized"
    atexit.register(_finalize_at_exit)
    sys.excepthook = _excepthook
    return runtime


def current() -> Runtime:
    """This process's Runtime (raises if MPI is not initialized)."""
    if _runtime is None:
        raise MPIException(ERR_OTHER, f"MPI is not initialized (state: {_state})")
    return _runtime


def config() -> HostConfig:
    """The settings `init` read from the environment (the defaults before it ran)."""
    return _config


def is_initialized() -> bool:
    """Whether Init has run (it stays true after Finalize, as in MPI)."""
    return _state != "new"


def is_finalized() -> bool:
    """Whether Finalize has run."""
    return _state == "finalized"


def stats() -> dict[str, object]:
    """This rank's matching-queue statistics and protocol counters (see `Runtime.stats`)."""
    return current().stats()


def finalize() -> None:
    """Complete outstanding sends, dump statistics, close the Port."""
    global _runtime, _state
    runtime = _runtime
    if runtime is None:
        return
    progress = runtime.engine
    try:
        appbypass.shutdown(FINALIZE_TIMEOUT_S)  # outstanding reductions complete first
        shells.shutdown_nicvm(FINALIZE_TIMEOUT_S)  # and NICVM broadcasts this root delegated
        _finish(progress, tolerant=runtime.config.fault_tolerant)
    except (PortError, TimeoutError) as exc:
        raise MPIException(ERR_OTHER, f"Finalize: {exc}") from exc
    finally:
        _dump_stats(runtime)
        host_nicvm.forget_mpi_port()
        set_maxprocs(None)
        _runtime = None
        _state = "finalized"
        progress.close()
        _detach()


def _finish(progress: Progress, *, tolerant: bool) -> None:
    """Let every send complete; ``tolerant`` (``emurun --with-ft ulfm``): a send that failed
    because its peer died is no reason to fail Finalize (the program saw ERR_PROC_FAILED)."""
    deadline = time.monotonic() + FINALIZE_TIMEOUT_S
    while True:
        try:
            progress.finish(max(0.0, deadline - time.monotonic()))
            return
        except SendFailedError:
            if not tolerant:
                raise


def _detach() -> None:
    """A rank a PMI launcher started: barrier with the others, then stop its nicd."""
    global _attached
    attached, _attached = _attached, None
    if attached is not None:
        try:
            attached.finish()
        except bootstrap.BootstrapError as exc:
            raise MPIException(ERR_OTHER, str(exc)) from exc


def abort(errorcode: int = 0) -> None:
    """End the whole job: this rank exits with ``errorcode`` at once; emurun stops the rest."""
    rank = _runtime.node if _runtime is not None else 0
    sys.stdout.flush()
    print(f"emucluster: MPI_Abort(errorcode={errorcode}) called by rank {rank}", file=sys.stderr)
    sys.stderr.flush()
    if _attached is not None:  # the launcher ends the others with this code
        _attached.abort(errorcode, f"MPI_Abort by rank {rank}")
    _close_quietly()
    os._exit(errorcode & 0xFF if errorcode else 0)


def wtime() -> float:
    """Seconds of wall-clock time since an arbitrary origin (high resolution)."""
    return time.perf_counter() - _wtime_origin


def wtick() -> float:
    """Resolution of `wtime` in seconds."""
    return float(time.get_clock_info("perf_counter").resolution)


def processor_name() -> str:
    """This emulated node's name."""
    rank = _runtime.node if _runtime is not None else 0
    return f"{socket.gethostname()}-node{rank}"


def _dump_stats(runtime: Runtime) -> None:
    directory = _config.stats_dir
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        data = runtime.stats()
        path = os.path.join(directory, f"rank{runtime.node}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
    except OSError as exc:
        print(f"emucluster: cannot write stats to {directory}: {exc}", file=sys.stderr)


def _finalize_at_exit() -> None:
    try:
        finalize()
    except (MPIException, PortError, TimeoutError) as exc:
        print(f"emucluster: MPI_Finalize at exit failed: {exc}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(1)


_abort_status = [1]
"""The exit status of a rank ended by an uncaught exception (`set_abort_status`)."""


def set_abort_status(status: int) -> None:
    """The status this rank ends with if an exception stays uncaught (mpi4py's
    ``MPI._set_abort_status``, which ``mpi4py.run`` and ``mpi4py.futures`` call before they
    re-raise); emurun then stops the job with it."""
    _abort_status[0] = int(status) & 0xFF or 1


def _excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    sys.__excepthook__(exc_type, exc, tb)
    rank = _runtime.node if _runtime is not None else 0
    print(f"emucluster: rank {rank} ended by an uncaught {exc_type.__name__}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    _close_quietly()
    os._exit(_abort_status[0])


def _close_quietly() -> None:
    """Before an immediate exit: free registered memory (no leak warnings), close the Port;
    under a PMI launcher, stop this rank's nicd too."""
    if _runtime is not None:
        with contextlib.suppress(OSError, PortError):
            _runtime.engine.close()
    if _attached is not None:
        _attached.stop()
