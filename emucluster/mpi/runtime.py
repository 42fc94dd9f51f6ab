"""Library lifecycle of one rank: Init, Finalize, the progress engine, Abort, timers, stats.

``import emucluster.MPI`` calls `init` (as importing mpi4py.MPI initialises MPI); `finalize`
runs at interpreter exit (atexit) unless the program called ``MPI.Finalize()``: it drains
outstanding sends, writes ``$EMU_STATS_DIR/rank<N>.json`` if that variable is set, and
closes the Port. An uncaught exception prints its traceback and ends the rank at once with
exit status 1 (no finalize, which could wait on peers forever), so emurun stops the job.

Outside emurun (no ``EMU_NIC_SOCKET``) the library runs as a singleton: one rank, no NIC;
sends to itself still work, and a wait that can never be satisfied raises instead of hanging.

Environment: read once by `init` into a `HostConfig` (``emucluster.config`` declares every
variable: ``EMU_EAGER_LIMIT``, ``EMU_MATCH_STORE``, ``EMU_RNDV_RM``, ``EMU_STATS_DIR``, the
Port's ``EMU_WAIT`` / ``EMU_SPIN_US``, the offloads' and the collectives' choices); `config`
returns it.
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

from emucluster.config import HostConfig
from emucluster.mpi.errors import ERR_OTHER
from emucluster.mpi.errors import Exception as MPIException
from emucluster.offload.app_bypass import shell as appbypass
from emucluster.p2p.protocol import P2P
from emucluster.port.client import Port, PortError
from emucluster.port.progress import MPI_PORT, Progress
from emutrace import mpihooks

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "FINALIZE_TIMEOUT_S",
    "VENDOR",
    "abort",
    "config",
    "engine",
    "finalize",
    "init",
    "is_finalized",
    "is_initialized",
    "stats",
    "wtick",
    "wtime",
]

VENDOR = ("emucluster", (0, 1, 0))
"""``MPI.get_vendor()``: this library's own name and version (no MPI vendor's)."""
FINALIZE_TIMEOUT_S = 30.0  # longest Finalize waits for the NIC to complete outstanding sends
MAX_CONTEXT_PAIRS = 4096  # communicators alive at once in one process (context id pairs)

_engine: Progress | None = None
_config = HostConfig()  # replaced by the environment's at init
_state = "new"  # new -> initialized -> finalized
_free_contexts = (1 << MAX_CONTEXT_PAIRS) - 1 - 0b11  # pairs 0 (WORLD) and 1 (SELF) taken
_wtime_origin = time.perf_counter()


def init() -> Progress:
    """Open the MPI port and build the engine (idempotent while initialized)."""
    global _config, _engine, _state
    if _engine is not None:
        return _engine
    if _state == "finalized":
        raise MPIException(ERR_OTHER, "MPI was finalized; it cannot be initialized again")
    _config = config = HostConfig.from_env()
    eager, store = config.eager_limit, config.match_store
    port: Port | None = None
    if config.nic_socket:
        try:
            port = Port.open(config.nic_socket, port=MPI_PORT, receive_buffers=128)
        except PortError as exc:
            raise MPIException(ERR_OTHER, f"cannot open MPI port {MPI_PORT}: {exc}") from exc
        core = P2P(port.node_id, port.num_nodes, eager_limit=eager, store=store)
    else:
        core = P2P(0, 1, eager_limit=eager, store=store)
    _engine = Progress(port, core, use_rm=config.rndv_rm)
    if port is not None:
        appbypass.install(_engine, config)
    _state = "initialized"
    from emucluster.mpi.collective.calls import trace_describe
    from emucluster.mpi.comm.comm import Intracomm  # late: comm imports this module

    mpihooks.install(Intracomm, port.node_id if port is not None else 0, trace_describe)
    atexit.register(_finalize_at_exit)
    sys.excepthook = _excepthook
    return _engine


def engine() -> Progress:
    """The progress engine (raises if MPI is not initialized)."""
    if _engine is None:
        raise MPIException(ERR_OTHER, f"MPI is not initialized (state: {_state})")
    return _engine


def config() -> HostConfig:
    """The settings `init` read from the environment (the defaults before it ran)."""
    return _config


def is_initialized() -> bool:
    """Whether Init has run (it stays true after Finalize, as in MPI)."""
    return _state != "new"


def is_finalized() -> bool:
    """Whether Finalize has run."""
    return _state == "finalized"


def finalize() -> None:
    """Complete outstanding sends, dump statistics, close the Port."""
    global _engine, _state
    progress = _engine
    if progress is None:
        return
    try:
        appbypass.shutdown(FINALIZE_TIMEOUT_S)  # outstanding reductions complete first
        nicvmcoll = sys.modules.get("emucluster.offload.nicvm.shell")  # imported only if used
        if nicvmcoll is not None:
            nicvmcoll.shutdown(FINALIZE_TIMEOUT_S)  # and NICVM broadcasts this root delegated
        progress.finish(FINALIZE_TIMEOUT_S)
    except (PortError, TimeoutError) as exc:
        raise MPIException(ERR_OTHER, f"Finalize: {exc}") from exc
    finally:
        _dump_stats(progress)
        _engine = None
        _state = "finalized"
        progress.close()


def abort(errorcode: int = 0) -> None:
    """End the whole job: this rank exits with ``errorcode`` at once; emurun stops the rest."""
    rank = _engine.node if _engine is not None else 0
    sys.stdout.flush()
    print(f"emucluster: MPI_Abort(errorcode={errorcode}) called by rank {rank}", file=sys.stderr)
    sys.stderr.flush()
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
    rank = _engine.node if _engine is not None else 0
    return f"{socket.gethostname()}-node{rank}"


def stats() -> dict[str, object]:
    """This rank's matching-queue statistics and protocol counters (JSON-able).

    ``matching`` holds the Matcher's `MatchStats` (queue lengths and maxima, mean and max
    search depth of both queues, the unexpected ratio); ``protocol`` the eager/rendezvous
    counters; ``dropped`` messages ignored as malformed; ``app_bypass`` the application-bypass
    reduce counters (signals received and deferred, early/expected/late packets, copies,
    instances completed inside Reduce and after it); ``comm_free`` the communicators freed,
    those freed with operations pending (their context id given back later, `commfree`) and
    those still waiting. Also written at Finalize to
    ``$EMU_STATS_DIR/rank<N>.json`` when that variable is set (``emurun --stats DIR``).
    """
    return _stats_of(engine())


def _stats_of(progress: Progress) -> dict[str, object]:
    out: dict[str, object] = {"rank": progress.node, "events": progress.events}
    out.update(progress.stats())
    bypass = appbypass.active()
    if bypass is not None and bypass.engine is progress:
        out["app_bypass"] = bypass.stats()
    from emucluster.offload.nic_mcast import shell as mcast

    shell = mcast.active()
    if shell is not None and shell.engine is progress:
        out["mcast"] = shell.stats()
    from emucluster.mpi.comm import (
        free as commfree,  # late: commfree imports request, which imports this
    )

    waiting = sum(isinstance(t, commfree.DeferredRelease) for t in progress.advancing)
    out["comm_free"] = {**commfree.counters, "waiting": waiting}
    return out


def free_context_mask() -> int:
    """Bit k set: context-id pair k (ids 2k, 2k+1) is free in this process. Progress is
    made first, so a freed communicator whose last pending operation ended meanwhile gives
    its pair back before the mask is read (``emucluster.mpi.comm.free``)."""
    if _engine is not None and _engine.advancing:
        _engine.progress()
    return _free_contexts


def claim_context(mask: int) -> int:
    """Given the AND of every member's free mask, claim the lowest pair; its p2p context id."""
    global _free_contexts
    if not mask:
        raise MPIException(ERR_OTHER, "out of communicator context ids")
    pair = (mask & -mask).bit_length() - 1
    _free_contexts &= ~(1 << pair)
    return 2 * pair


def release_context(context: int) -> None:
    """A communicator was freed: its context pair may be reused, so the offloads that keep
    state per context at the NICs (NIC multicast groups, NICVM communicator maps) let it go."""
    global _free_contexts
    if context >= 4:
        _release_offloads(context + 1)
        _free_contexts |= 1 << (context // 2)


def _release_offloads(coll_context: int) -> None:
    """Tell the installed offload shells that collective context ``coll_context`` (the one
    ``collectives.CallContext`` derives from the communicator's) is free again."""
    from emucluster.offload.nic_mcast import shell as mcast

    shell = mcast.active()
    if shell is not None and shell.engine is _engine:
        shell.release(coll_context)
    nicvm_shell = sys.modules.get("emucluster.offload.nicvm.shell")  # loaded only if used
    if nicvm_shell is not None:
        nicvm_shell.release(coll_context)


def _dump_stats(progress: Progress) -> None:
    directory = _config.stats_dir
    if not directory:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        data = _stats_of(progress)
        path = os.path.join(directory, f"rank{progress.node}.json")
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


def _excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    sys.__excepthook__(exc_type, exc, tb)
    rank = _engine.node if _engine is not None else 0
    print(f"emucluster: rank {rank} ended by an uncaught {exc_type.__name__}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    _close_quietly()
    os._exit(1)


def _close_quietly() -> None:
    """Before an immediate exit: free registered memory (no leak warnings), close the Port."""
    if _engine is not None:
        with contextlib.suppress(OSError, PortError):
            _engine.close()
