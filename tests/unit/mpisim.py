"""An MPI job in one process for unit tests: N ranks, each a real `Runtime` over a real NIC core
on the simulated network of `tests.unit.netsim.NicNet`, run one at a time by a scheduler.

What is real: everything from ``comm.Send`` down to the NIC firmware and back. Each rank is a
`Runtime` (its own `Progress` engine, p2p core, context ids and COMM_WORLD, built by
``make_world``) whose Port is a `SimPort`: production's `emucluster.port.client.Port` with
only its socket replaced. Records go through the real host-link codec in both directions, to
a `nicd.core.nic.NicCore` per node, dispatched as the daemon does (REGISTER maps the memfd the
host sealed, as nicd does with the descriptor it receives); registered memory is the host's
real sealed segment, so rendezvous data lands by real remote-memory writes. Eager and
rendezvous, CTS grants, fragmentation, acknowledgements, SENT coalescing and, with a
``route`` hook (``netsim.BadNetwork``), loss, duplication and reordering are production's.

The schedule: each rank's program runs in its own thread, but only one thread runs at a time
(a baton passed by semaphores), so a run is deterministic: the same program, ``seed`` and
route give the same interleaving, message for message. A rank gives the baton back when its
Port would wait (`SimPort.pump`) or found nothing to read (`SimPort.poll`, so a ``Test`` loop
lets the world move). The scheduler then picks what happens next: a rank that has input
(records from its NIC) or has not started yet, else one step of the network (virtual time
moves only there, to the next datagram or NIC timer), else a rank spinning in ``poll`` (one
network step per poll). Round-robin by default; with ``seed``, a seeded random choice among
the ranks and the network step, which explores other legal interleavings.

A run that cannot finish fails instead of hanging: when no rank can run and the network is
idle (a deadlock), when ranks only spin while nothing else happens (a livelock), or after
``timeout`` seconds of wall-clock time, `Stuck` is raised naming, for every rank, the MPI call
it waits in and the line of the program that made it. A wait with a deadline (Finalize's) is
reported the same way rather than waited out: nothing in a simulated job can arrive late.

The offloads that live in the NIC run there too: ``nic-mcast`` (the default ``auto`` bcast on
COMM_WORLD from 3 ranks) posts real multicast groups, ``nicvm`` loads its module into the NIC's
NICVM engine. Application bypass is not installed (it needs SIGUSR1 from the NIC, a process
signal), so its reduce runs as the library does without it.

Process-wide state: an MPI process has a few module globals (the current runtime of
``emucluster.mpi.lifecycle``, the local node of ``emucluster.mpi.comm.group``, the attached
Bsend buffer); the scheduler swaps them at each baton pass, as an OS switches processes
(`PROCESS_GLOBALS`: add one there when the library grows another), and restores the
originals at the end.

After a rank's program returns, the rank finalizes as ``MPI.Finalize`` does (outstanding
rendezvous sends complete, every send is acknowledged), and with ``strict`` (the default)
the run fails if a rank left a receive posted, a message unreceived or a nonblocking
collective unfinished.

Use: ``run(n, fn)`` runs ``fn(comm)`` on every rank with its COMM_WORLD and returns the
per-rank results, re-raising the first exception a rank raised. ``MPI`` holds the mpi4py
names (constants, datatypes, ops, classes) taken from the library's low modules, so tests do
not import ``emucluster.MPI`` (which opens this process's port at import).

One file of some 600 lines: the port, the scheduler and its reports are one mechanism (the
baton) and read together, as netsim's network and nodes do.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
import types
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import emucluster
from emucluster import nicvm as _host_nicvm
from emucluster.config import HostConfig
from emucluster.mpi import constants as _constants
from emucluster.mpi import errhandler as _errhandler
from emucluster.mpi import errors as _errors
from emucluster.mpi import lifecycle as _lifecycle
from emucluster.mpi.buffer import address as _address
from emucluster.mpi.collective.ops import Op, predefined_ops
from emucluster.mpi.comm import comm as _comm
from emucluster.mpi.comm import fromgroup as _fromgroup
from emucluster.mpi.comm import group as _group
from emucluster.mpi.comm import intercomm as _intercomm
from emucluster.mpi.comm import intracomm as _intracomm
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.pt2pt import bsend as _bsend
from emucluster.mpi.pt2pt import mprobe as _mprobe
from emucluster.mpi.pt2pt.persistent import Prequest
from emucluster.mpi.request.request import REQUEST_NULL, Request
from emucluster.mpi.request.status import Status
from emucluster.mpi.runtime import Runtime
from emucluster.mpi.topo import create as _topo_create
from emucluster.mpi.topo import topocomm as _topocomm
from emucluster.offload.app_bypass import shell as _bypass_shell
from emucluster.offload.nic_mcast import shell as _mcast_shell
from emucluster.offload.nicvm import shell as _nicvm_shell
from emucluster.p2p.protocol import EAGER_LIMIT_BYTES, P2P
from emucluster.port.client import Port
from emucluster.port.progress import MPI_PORT, Progress
from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.shell.memfd import map_sealed_memfd
from tests.unit.netsim import NicNet, Route, perfect

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "MPI",
    "PROCESS_GLOBALS",
    "SimJob",
    "SimPort",
    "Stuck",
    "run",
]

CONN = 1  # the one host connection of every simulated NIC: the MPI port's
LIVELOCK_POLLS = 20_000  # polls in a row with nothing else to do: the spinning never ends
MCAST_COSTS = "20,0.01,5,0.005"  # fixed postal costs: nic-mcast trees not built from a clock
FINALIZE_TIMEOUT_S = 30.0  # never waited out here (see the module docstring)
_LIBRARY_DIR = os.path.dirname(os.path.abspath(emucluster.__file__))


# -- the mpi4py names -------------------------------------------------------------------------


def _mpi_names() -> types.SimpleNamespace:
    """``MPI.X`` for the names tests use, from the modules that own them."""
    names: dict[str, Any] = {name: getattr(_constants, name) for name in _constants.__all__}
    names.update(predefined)
    names.update(predefined_ops)
    names.update({k: v for k, v in vars(_errors).items() if k.startswith("ERR_")})
    names.update(
        SUCCESS=_errors.SUCCESS,
        Exception=_errors.Exception,
        Get_error_class=_errors.Get_error_class,
        Get_error_string=_errors.Get_error_string,
        ERRORS_RETURN=_errhandler.ERRORS_RETURN,
        ERRORS_ARE_FATAL=_errhandler.ERRORS_ARE_FATAL,
        Comm=_comm.Comm,
        Intracomm=_intracomm.Intracomm,
        Intercomm=_intercomm.Intercomm,
        COMM_NULL=_comm.COMM_NULL,
        COMM_TYPE_SHARED=_fromgroup.COMM_TYPE_SHARED,
        Cartcomm=_topocomm.Cartcomm,
        Graphcomm=_topocomm.Graphcomm,
        Distgraphcomm=_topocomm.Distgraphcomm,
        Compute_dims=_topo_create.Compute_dims,
        Group=_group.Group,
        GROUP_EMPTY=_group.GROUP_EMPTY,
        GROUP_NULL=_group.GROUP_NULL,
        Datatype=Datatype,
        Op=Op,
        Request=Request,
        REQUEST_NULL=REQUEST_NULL,
        Prequest=Prequest,
        Status=Status,
        Message=_mprobe.Message,
        MESSAGE_NULL=_mprobe.MESSAGE_NULL,
        MESSAGE_NO_PROC=_mprobe.MESSAGE_NO_PROC,
        Get_address=_address.Get_address,
        Attach_buffer=_bsend.Attach_buffer,
        Detach_buffer=_bsend.Detach_buffer,
        BSEND_OVERHEAD=_bsend.BSEND_OVERHEAD,
    )
    return types.SimpleNamespace(**names)


MPI = _mpi_names()
"""The mpi4py names (``MPI.ANY_SOURCE``, ``MPI.INT``, ``MPI.SUM``, ``MPI.Exception``, ...)."""


# -- process-wide state, one copy per rank --------------------------------------------------


@dataclass(frozen=True)
class _Global:
    module: types.ModuleType
    name: str
    initial: Callable[[SimJob, int], object]
    """The value rank ``node`` of ``job`` starts with."""


PROCESS_GLOBALS: tuple[_Global, ...] = (
    _Global(_lifecycle, "_runtime", lambda job, node: job.runtimes[node]),
    _Global(_lifecycle, "_config", lambda job, node: job.runtimes[node].config),
    _Global(_lifecycle, "_state", lambda job, node: "initialized"),
    _Global(_group, "_local_node", lambda job, node: node),
    _Global(_bsend, "_attached", lambda job, node: None),
    _Global(_bsend, "_capacity", lambda job, node: 0),
    _Global(_bsend, "_in_flight", lambda job, node: []),
    _Global(_mcast_shell, "_shell", lambda job, node: None),
    _Global(_nicvm_shell, "_service", lambda job, node: None),
    _Global(_host_nicvm, "_mpi_port", lambda job, node: [job.ports[node]]),
    _Global(_bypass_shell, "_bypass", lambda job, node: None),
)
"""Module globals an MPI process owns alone: swapped at every baton pass."""
for _g in PROCESS_GLOBALS:  # a library refactor that moves one must update this table
    if not hasattr(_g.module, _g.name):
        raise ImportError(f"mpisim: {_g.module.__name__}.{_g.name} is gone; update PROCESS_GLOBALS")


# -- the port -------------------------------------------------------------------------------


class Stuck(AssertionError):
    """The simulated job cannot finish: deadlock, livelock or wall-clock timeout."""


class _Aborted(BaseException):
    """Raised in a parked rank's thread to unwind it when the run is given up."""


class SimPort(Port):
    """Production's Port with the PCI socket replaced by the simulated NIC of its node.

    Records this side writes go through the host-link codec to ``job.to_nic``; records the
    NIC writes are decoded into ``inbox`` by the job and taken in by `_drain` as the real
    port takes in what it reads from its socket. A wait gives the baton to the scheduler."""

    def __init__(self, job: SimJob, node: int, opened: hl.Opened) -> None:
        super().__init__(None, opened, auto_replenish=True, wait="block", spin_s=0.0)  # type: ignore[arg-type]
        self._job = job
        self._node = node
        self.inbox = job.inboxes[node]
        """Records the NIC wrote and this side has not read yet."""
        self._closed_sim = False

    @classmethod
    def open_on(cls, job: SimJob, node: int, *, receive_buffers: int = 128) -> SimPort:
        """Open the MPI port on node ``node``'s NIC, as `Port.open` does."""
        inbox = job.inboxes[node]
        job.to_nic(node, hl.OpenReq(MPI_PORT))
        opened = inbox.popleft()
        if not isinstance(opened, hl.Opened):
            raise AssertionError(f"node {node}: the NIC did not open the MPI port: {opened!r}")
        self = cls(job, node, opened)
        self.provide_receive_buffers(receive_buffers)
        self.state.provide_batch = max(1, receive_buffers // 4)
        return self

    # -- the socket's replacements ------------------------------------------------------------

    def send_record(self, record: hl.HostRecord, *, fd: int | None = None) -> None:
        self._job.to_nic(self._node, record, fd)

    def _drain(self) -> int:
        got = 0
        inbox = self.inbox
        while inbox:
            record = inbox.popleft()
            got += 1
            for write in self.state.on_record(record):
                self.send_record(write)
        return got

    def poll(self) -> list[Any]:
        """What is there now; with nothing, the world moves one turn first (a spin)."""
        if not self._drain() and not self.state.has_events():
            self._job.park(self._node, "polled")
            self._drain()
        return self.state.take_events()  # type: ignore[return-value]

    def pump(self, deadline: float | None) -> bool:
        if self._drain():
            return True
        provide = self.state.give_back(low_only=True)
        if provide is not None:
            self.send_record(provide)
        self._job.park(self._node, "blocked")
        return bool(self._drain())

    def wait_readable(self, timeout: float) -> bool:
        return bool(self.inbox)

    def fileno(self) -> int:
        raise OSError("a simulated port has no descriptor")

    def close(self) -> None:
        if self._closed_sim:
            return
        self._closed_sim = True
        self._closed = True
        for region in list(self._regions.values()):
            region.segment.close()
        self._regions.clear()
        self._job.to_nic(self._node, hl.CloseReq())


# -- the job --------------------------------------------------------------------------------

Status_ = Literal["new", "running", "blocked", "polled", "done"]


@dataclass
class _Rank:
    node: int
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    thread: threading.Thread | None = None
    status: Status_ = "new"
    parked_at: int = 0
    """The scheduler's step count when it parked in ``poll``."""
    result: object = None
    error: BaseException | None = None
    saved: dict[tuple[str, str], object] = field(default_factory=dict)


_STEP = -1  # the scheduler's choice: one step of the network


class SimJob:
    """N ranks over N simulated NICs. ``eager_limit``, ``rndv_rm``, ``match_store`` and
    ``algorithms`` (``{"EMU_BCAST": "linear"}``) are the ranks' `HostConfig`; ``route`` and
    ``nic_config`` (node -> NicConfig) the network's; ``seed`` picks a random schedule."""

    def __init__(
        self,
        n: int,
        *,
        route: Route = perfect,
        seed: int | None = None,
        eager_limit: int = EAGER_LIMIT_BYTES,
        rndv_rm: bool = True,
        match_store: str = "lhs",
        algorithms: dict[str, str] | None = None,
        nic_config: Callable[[int], NicConfig] | None = None,
        timeout: float = 60.0,
        strict: bool = True,
    ) -> None:
        if n < 1:
            raise ValueError("a job has at least one rank")
        self.n = n
        self.timeout = timeout
        self.strict = strict
        self._rng = None if seed is None else random.Random(seed)
        self._switch = threading.Semaphore(0)
        self._ranks = [_Rank(node) for node in range(n)]
        self._last = n - 1
        self._steps = 0
        self._abort = False
        self.inboxes: list[deque[hl.HostRecord]] = [deque() for _ in range(n)]
        self._host_asm = [hl.Assembler() for _ in range(n)]
        make = nic_config or (lambda node: NicConfig(node, "/tmp"))
        configs = [make(node) for node in range(n)]
        self._nic_asm = [hl.Assembler(c.max_message) for c in configs]
        self.net = NicNet(configs, route, answer=self._to_host, conn=CONN)
        """The simulated network (virtual clock ``net.now``; ``net.cores`` the NICs)."""
        config = HostConfig(
            eager_limit=eager_limit,
            rndv_rm=rndv_rm,
            match_store=match_store,
            mcast_costs=MCAST_COSTS,
            algorithms=dict(algorithms or {}),
        )
        self.ports = [SimPort.open_on(self, node) for node in range(n)]
        self.runtimes: list[Runtime] = []
        self.worlds: list[Any] = []
        for node, port in enumerate(self.ports):
            core = P2P(node, n, eager_limit=eager_limit, store=match_store)
            runtime = Runtime(Progress(port, core, use_rm=rndv_rm), config)
            world, _self = _intracomm.make_world(runtime)
            self.runtimes.append(runtime)
            self.worlds.append(world)

    # -- the host link ------------------------------------------------------------------------

    def to_nic(self, node: int, record: hl.HostRecord, fd: int | None = None) -> None:
        """Host ``node`` writes ``record`` (``fd`` rides along, as SCM_RIGHTS): through the
        codec to its NIC, dispatched as nicd's daemon does."""
        whole = None
        for chunk in hl.encode_record(record):
            whole = self._nic_asm[node].feed(chunk)
        assert whole is not None, f"record {record!r} did not reassemble"
        net, core = self.net, self.net.cores[node]
        if isinstance(whole, hl.RegisterReq):
            memory, why = map_sealed_memfd(None if fd is None else os.dup(fd), whole.size)
            assert memory is not None, why
            net.apply(node, core.on_register(CONN, whole, memory, now=net.now))
        elif isinstance(whole, hl.DeregisterReq):
            core.on_deregister(CONN, whole.region)
        else:
            net.apply(node, core.on_host(CONN, whole, now=net.now))

    def _to_host(self, node: int, record: hl.HostRecord) -> None:
        """NIC ``node`` wrote ``record`` to its host: through the codec into the inbox."""
        whole = None
        for chunk in hl.encode_record(record):
            whole = self._host_asm[node].feed(chunk)
        assert whole is not None
        self.inboxes[node].append(whole)
        self.net.hosts[node].clear()  # NicNet keeps every record; the inbox is the record here
        self.net.host_actions[node].clear()

    # -- running --------------------------------------------------------------------------------

    def run(self, fn: Callable[[Any], object]) -> list[object]:
        """Run ``fn(COMM_WORLD)`` on every rank; the results by rank. Re-raises the first
        exception a rank raised (noting the rank); `Stuck` if the job cannot finish."""
        saved = {(g.module.__name__, g.name): getattr(g.module, g.name) for g in PROCESS_GLOBALS}
        for rank in self._ranks:
            rank.saved = {(g.module.__name__, g.name): g.initial(self, rank.node)
                          for g in PROCESS_GLOBALS}  # fmt: skip
            rank.thread = threading.Thread(
                target=self._body, args=(rank, fn), name=f"mpisim-rank{rank.node}", daemon=True
            )
            rank.thread.start()
        stuck: Stuck | None = None
        try:
            self._schedule(time.monotonic() + self.timeout)
        except Stuck as exc:
            stuck = exc
            self._give_up()
        finally:
            for g in PROCESS_GLOBALS:
                setattr(g.module, g.name, saved[(g.module.__name__, g.name)])
        try:
            self._report(stuck)
        finally:
            for runtime in self.runtimes:
                runtime.engine.close()
        return [r.result for r in self._ranks]

    def _report(self, stuck: Stuck | None) -> None:
        failed = [
            r for r in self._ranks if r.error is not None and not isinstance(r.error, _Aborted)
        ]
        if failed:
            first = failed[0].error
            assert first is not None
            note = f"mpisim: raised on rank {failed[0].node}"
            if len(failed) > 1:
                note += f" (also on ranks {[r.node for r in failed[1:]]})"
            if stuck is not None:
                note += f"; then the job was stuck:\n{stuck}"
            first.add_note(note)
            raise first
        if stuck is not None:
            raise stuck
        if self.strict:
            self._check_leftovers()

    def _body(self, rank: _Rank, fn: Callable[[Any], object]) -> None:
        rank.go.acquire()
        try:
            if self._abort:
                raise _Aborted
            rank.status = "running"
            rank.result = fn(self.worlds[rank.node])
            self.runtimes[rank.node].engine.finish(FINALIZE_TIMEOUT_S)
        except BaseException as exc:  # every outcome is reported by run()
            rank.error = exc
        finally:
            rank.status = "done"
            self._switch.release()

    def park(self, node: int, status: Status_) -> None:
        """Rank ``node`` (running) gives the baton back and waits for its next turn."""
        if self._abort:  # being unwound: no more turns
            raise _Aborted
        rank = self._ranks[node]
        assert rank.status == "running", f"rank {node} parks while {rank.status}"
        rank.status = status
        rank.parked_at = self._steps
        self._switch.release()
        rank.go.acquire()
        rank.status = "running"
        if self._abort:
            raise _Aborted

    def _runnable(self, rank: _Rank) -> bool:
        if rank.status == "new":
            return True
        if rank.status == "blocked":
            return bool(self.inboxes[rank.node])
        if rank.status == "polled":
            return bool(self.inboxes[rank.node]) or self._steps > rank.parked_at
        return False

    def _choose(self) -> int | None:
        """The rank to run next, `_STEP` for a network step, None when nothing can happen."""
        ready = [r.node for r in self._ranks if self._runnable(r)]
        busy = self.net.next_time() is not None
        if self._rng is not None:
            options = ready + ([_STEP] if busy else [])
            if options:
                return self._rng.choice(options)
        else:
            if ready:
                return min(ready, key=lambda node: (node - self._last - 1) % self.n)
            if busy:
                return _STEP
        polled = [r.node for r in self._ranks if r.status == "polled"]
        if polled:  # the network is idle: spinning ranks spin on
            return min(polled, key=lambda node: (node - self._last - 1) % self.n)
        return None

    def _schedule(self, deadline: float) -> None:
        idle_polls = 0
        ranks = self._ranks
        while not all(r.status == "done" for r in ranks):
            if time.monotonic() > deadline:
                raise Stuck(f"not finished after {self.timeout} s of wall-clock time\n"
                            + self.describe())  # fmt: skip
            choice = self._choose()
            if choice is None:
                raise Stuck("deadlock: no rank can run and the network is idle\n"
                            + self.describe())  # fmt: skip
            if choice == _STEP:
                self.net.step()
                self._steps += 1
                idle_polls = 0
                continue
            rank = ranks[choice]
            if (
                rank.status == "polled"
                and not self.inboxes[choice]
                and not self._steps > rank.parked_at
            ):
                idle_polls += 1
                if idle_polls > LIVELOCK_POLLS:
                    raise Stuck("livelock: ranks only poll and nothing else happens\n"
                                + self.describe())  # fmt: skip
            else:
                idle_polls = 0
            self._last = choice
            self._install(rank)
            rank.go.release()
            if not self._switch.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise Stuck(f"rank {choice} ran {self.timeout} s without giving the baton back\n"
                            + self.describe())  # fmt: skip
            self._save(rank)

    def _install(self, rank: _Rank) -> None:
        for g in PROCESS_GLOBALS:
            setattr(g.module, g.name, rank.saved[(g.module.__name__, g.name)])

    def _save(self, rank: _Rank) -> None:
        for g in PROCESS_GLOBALS:
            rank.saved[(g.module.__name__, g.name)] = getattr(g.module, g.name)

    def _give_up(self) -> None:
        """Unwind every parked rank (its pending call raises `_Aborted`)."""
        self._abort = True
        for rank in self._ranks:
            if rank.status in ("new", "blocked", "polled"):
                self._install(rank)
                rank.go.release()
                self._switch.acquire(timeout=5.0)

    # -- reports ----------------------------------------------------------------------------------

    def describe(self) -> str:
        """One line per rank: done, or the MPI call it waits in and where the program made it."""
        frames = sys._current_frames()
        lines = []
        for rank in self._ranks:
            if rank.status == "done":
                what = "finished" if rank.error is None else f"raised {rank.error!r}"
            elif rank.status == "new":
                what = "not started"
            else:
                thread = rank.thread
                frame = frames.get(thread.ident) if thread is not None and thread.ident else None
                waits = {"blocked": "waits for input", "polled": "spins in poll",
                         "running": "never gave the baton back"}[rank.status]  # fmt: skip
                what = f"{waits} in {_mpi_call(frame)}"
            lines.append(f"  rank {rank.node}: {what}")
        lines.append(f"  network: virtual time {self.net.now:.6f} s, {self._steps} steps")
        return "\n".join(lines)

    def _check_leftovers(self) -> None:
        problems = []
        for node, runtime in enumerate(self.runtimes):
            engine = runtime.engine
            matching = engine.stats()["matching"]
            assert isinstance(matching, dict)
            if matching["posted"]:
                problems.append(f"rank {node}: {matching['posted']} receives still posted")
            if matching["unexpected"]:
                problems.append(f"rank {node}: {matching['unexpected']} messages never received")
            if engine.advancing:
                problems.append(f"rank {node}: {len(engine.advancing)} operations unfinished: "
                                f"{engine.advancing!r}")  # fmt: skip
        if problems:
            raise AssertionError("mpisim: the job left work behind (strict=False allows it):\n  "
                                 + "\n  ".join(problems))  # fmt: skip


def _mpi_call(frame: types.FrameType | None) -> str:
    """``Intracomm.Recv (called at test_x.py:12 in body)``: the outermost library frame of a
    parked thread and the program line that called it."""
    chain = []
    while frame is not None:
        chain.append(frame)
        frame = frame.f_back
    chain.reverse()  # outermost first
    for i, f in enumerate(chain):
        path = os.path.abspath(f.f_code.co_filename)
        if path.startswith(_LIBRARY_DIR + os.sep):
            where = "?"
            if i:
                caller = chain[i - 1]
                where = (f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno} "
                         f"in {caller.f_code.co_name}")  # fmt: skip
            return f"{_call_name(f)} (called at {where})"
    return "an unknown place"


def _call_name(frame: types.FrameType) -> str:
    """``Intracomm.Barrier``: the method as the program called it (on its object's class, not
    the class that happens to define it), else the function's qualified name."""
    local = frame.f_locals
    if "handle" in local and "method" in local:  # a communicator's delegate (comm/delegate.py)
        return f"{type(local['handle']).__name__}.{local['method'].__name__}"
    holder = local.get("self", local.get("cls"))
    if holder is not None:
        kind = holder if isinstance(holder, type) else type(holder)
        return f"{kind.__name__}.{frame.f_code.co_name}"
    return frame.f_code.co_qualname


def run(n: int, fn: Callable[[Any], object], **options: Any) -> list[object]:
    """Run ``fn(comm)`` on ``n`` ranks (``comm`` each rank's COMM_WORLD); the results by
    rank. ``options`` are `SimJob`'s."""
    return SimJob(n, **options).run(fn)
