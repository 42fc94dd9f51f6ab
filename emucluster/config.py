"""HostConfig: every ``EMU_*`` environment variable of the host library, declared once.

emurun (``launcher/plan.py`` ``host_env``) sets the place of each host process with the
``ENV_*`` names below; the user sets the tunables (``-x EMU_WAIT=block``, ``--bcast nicvm``).
The library reads them once, at Init: ``HostConfig.from_env()`` (``emucluster.mpi.runtime``
keeps the result, the offload shells take theirs from it). Values are parsed here; choices
that have their own error (``EMU_WAIT``: PortError, ``EMU_MCAST_TREE``/``EMU_MCAST_COSTS``:
``MPI.ERR_ARG``, ``EMU_MATCH_STORE``: the matcher's) are checked where they are used, so the
errors a program sees do not change.

``EMU_<OP>`` (``EMU_BCAST``, ``EMU_REDUCE``, ...) name each collective operation's default
algorithm; ``emucluster.coll.env_var`` spells them and `HostConfig.algorithms` holds the
ones that are set. The fault variables (``EMU_LOSS`` ...) belong to nicd (``nicd/config.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from emucluster import coll
from emucluster.errors import EmuclusterError
from emucluster.p2p.protocol import EAGER_LIMIT_BYTES
from emucluster.port.wait import DEFAULT_SPIN_US

if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

__all__ = [
    "DEFAULT_SPIN_US",
    "ENV_AB_DELAY_US",
    "ENV_EAGER_LIMIT",
    "ENV_FT",
    "ENV_JOB_ID",
    "ENV_MATCH_STORE",
    "ENV_MCAST_COSTS",
    "ENV_MCAST_TREE",
    "ENV_NIC_SOCKET",
    "ENV_PARENT",
    "ENV_RANK",
    "ENV_RNDV_RM",
    "ENV_RUN_DIR",
    "ENV_SIZE",
    "ENV_SPIN_US",
    "ENV_STATS_DIR",
    "ENV_UNIVERSE_SIZE",
    "ENV_WAIT",
    "ENV_WORLD",
    "ConfigError",
    "HostConfig",
    "process_environ",
]

# -- set by emurun for every host process (its place in the job) -------------------------------
ENV_RANK = "EMU_RANK"  # this rank (the library asks its NIC instead; programs may read it)
ENV_SIZE = "EMU_SIZE"  # ranks in the job: COMM_WORLD's size unless EMU_WORLD says otherwise
ENV_NIC_SOCKET = "EMU_NIC_SOCKET"  # this node's nicd socket; unset: a singleton process
ENV_RUN_DIR = "EMU_RUN_DIR"  # the job's run directory (sockets, logs)
ENV_JOB_ID = "EMU_JOB_ID"  # names shared-memory segments; the cleanup sweep looks for it
ENV_WORLD = "EMU_WORLD"  # FIRST:COUNT, the nodes of COMM_WORLD (unset: 0 to EMU_SIZE)
ENV_UNIVERSE_SIZE = "EMU_UNIVERSE_SIZE"  # the job's slots (MPI.UNIVERSE_SIZE)
ENV_PARENT = "EMU_PARENT"  # SPAWN:ROOT, set in processes started by MPI.Comm.Spawn
ENV_STATS_DIR = "EMU_STATS_DIR"  # emurun --stats DIR: rank<N>.json written there at Finalize
ENV_FT = "EMU_FT"  # emurun --with-ft ulfm: "ulfm" (a failed rank does not stop the job)
# -- tunables ---------------------------------------------------------------------------------
ENV_WAIT = "EMU_WAIT"
ENV_SPIN_US = "EMU_SPIN_US"
ENV_EAGER_LIMIT = "EMU_EAGER_LIMIT"
ENV_MATCH_STORE = "EMU_MATCH_STORE"
ENV_RNDV_RM = "EMU_RNDV_RM"
ENV_AB_DELAY_US = "EMU_AB_DELAY_US"
ENV_MCAST_TREE = "EMU_MCAST_TREE"
ENV_MCAST_COSTS = "EMU_MCAST_COSTS"
ENV_RMA_PROGRESS = "EMU_RMA_PROGRESS"

N = TypeVar("N", int, float)


class ConfigError(ValueError, EmuclusterError):
    """Raised by `HostConfig.from_env` for a variable that does not parse (a number that is
    not one). The message names the variable; fix the job's environment. A ValueError, as
    the bare ``int()``/``float()`` it replaces raised."""


@dataclass(frozen=True, slots=True)
class HostConfig:
    """The host library's settings from the environment (defaults: not set)."""

    nic_socket: str | None = None
    """``EMU_NIC_SOCKET``: the nicd socket to open the MPI port on; None (or empty) runs the
    library as a singleton: one rank, no NIC."""
    job_id: str | None = None
    """``EMU_JOB_ID``: the job's id, which names shared-memory segments (None: the pid)."""
    stats_dir: str | None = None
    """``EMU_STATS_DIR``: write ``rank<N>.json`` statistics there at Finalize (None: don't)."""
    wait: str = "hybrid"
    """``EMU_WAIT``: how a blocked rank waits for its NIC: ``spin`` (polls, as GM did),
    ``block`` (sleeps in the kernel) or ``hybrid`` (spins `spin_us`, then blocks); lowercase,
    checked by the Port."""
    spin_us: float = DEFAULT_SPIN_US
    """``EMU_SPIN_US``: microseconds a ``hybrid`` wait polls before it blocks."""
    eager_limit: int = EAGER_LIMIT_BYTES
    """``EMU_EAGER_LIMIT``: largest message in bytes sent eagerly; longer ones rendezvous."""
    match_store: str = "lhs"
    """``EMU_MATCH_STORE``: the matching queues' store: ``lhs``, ``lhs-grouped`` or ``list``
    (checked by the matcher)."""
    rndv_rm: bool = True
    """``EMU_RNDV_RM``: rendezvous data moves by registered-memory writes; ``0``: as port
    messages."""
    ab_delay_us: float = 0.0
    """``EMU_AB_DELAY_US``: application bypass: how long an internal node polls for late
    children before it leaves Reduce (thesis 3.3.5; 0: it leaves at once)."""
    mcast_tree: str = "postal"
    """``EMU_MCAST_TREE``: nic-mcast trees: ``postal`` (postal-optimal from measured costs) or
    ``binomial``; lowercase, checked by the multicast shell (``MPI.ERR_ARG``)."""
    mcast_costs: str = ""
    """``EMU_MCAST_COSTS``: ``L0,L_per_byte,g0,g_per_byte`` in microseconds fixes the postal
    costs instead of measuring them (empty: measure); parsed by the multicast shell."""
    rma_progress: str = "nic"
    """``EMU_RMA_PROGRESS``: ``host`` (on every rank) makes passive-target Put, Get, locks and
    Flush messages the target's host applies when it enters MPI (the baseline of ``emubench
    rma``, in ``emucluster/mpi/rma/hostdriven.py``); anything else: the target's NIC."""
    run_dir: str | None = None
    """``EMU_RUN_DIR``: the job's run directory, where emurun's launcher socket is (processes
    started at run time, ``emucluster.mpi.dynamic.client``); None outside emurun."""
    world: tuple[int, int] | None = None
    """``EMU_WORLD``: (first node, count) of COMM_WORLD, for processes started at run time
    (``MPI.Comm.Spawn``); None: the job's nodes (`world_of`)."""
    size: int | None = None
    """``EMU_SIZE``: the ranks of the job (``-np``), which every launcher sets; None: not
    set (`world_of` then counts the NIC's nodes)."""
    universe_size: int | None = None
    """``EMU_UNIVERSE_SIZE``: the slots of the job (``MPI.UNIVERSE_SIZE``); None: COMM_WORLD's
    size."""
    parent: tuple[int, int] | None = None
    """``EMU_PARENT``: (spawn id, the spawning root's node) in a process started by
    ``MPI.Comm.Spawn``; None otherwise."""
    fault_tolerant: bool = False
    """``EMU_FT=ulfm`` (``emurun --with-ft ulfm``): a blocked wait probes the nodes it awaits
    every half second (``emucluster.mpi.runtime.FT_WATCH_S``), so a peer that died becomes
    ERR_PROC_FAILED instead of a hang."""
    algorithms: Mapping[str, str] = field(default_factory=dict)
    """``EMU_<OP>`` variables that are set, by name (``{"EMU_BCAST": "nic-mcast"}``): each
    operation's default collective algorithm; pass as ``environ`` to ``emucluster.coll.get``."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> HostConfig:
        """Read every variable above from ``environ``; raise `ConfigError` for a bad number."""
        names = {coll.env_var(operation) for operation in coll.OPERATIONS}
        return cls(
            nic_socket=environ.get(ENV_NIC_SOCKET) or None,
            job_id=environ.get(ENV_JOB_ID) or None,
            stats_dir=environ.get(ENV_STATS_DIR) or None,
            wait=environ.get(ENV_WAIT, "hybrid").strip().lower() or "hybrid",
            spin_us=_number(float, environ, ENV_SPIN_US, str(DEFAULT_SPIN_US)),
            eager_limit=_number(int, environ, ENV_EAGER_LIMIT, str(EAGER_LIMIT_BYTES)),
            match_store=environ.get(ENV_MATCH_STORE, "lhs"),
            rndv_rm=environ.get(ENV_RNDV_RM, "1") != "0",
            ab_delay_us=_number(float, environ, ENV_AB_DELAY_US, "0", empty="0"),
            mcast_tree=environ.get(ENV_MCAST_TREE, "postal").strip().lower() or "postal",
            mcast_costs=environ.get(ENV_MCAST_COSTS, "").strip(),
            rma_progress=environ.get(ENV_RMA_PROGRESS, "nic").strip().lower() or "nic",
            run_dir=environ.get(ENV_RUN_DIR) or None,
            world=_pair(environ, ENV_WORLD),
            size=_number(int, environ, ENV_SIZE, "0", empty="0") or None,
            universe_size=_number(int, environ, ENV_UNIVERSE_SIZE, "0", empty="0") or None,
            parent=_pair(environ, ENV_PARENT),
            fault_tolerant=environ.get(ENV_FT, "").strip().lower() == "ulfm",
            algorithms={name: value for name, value in environ.items() if name in names},
        )

    def world_of(self, nic_nodes: int) -> tuple[int, int]:
        """(first node, count) of COMM_WORLD, given the nodes the NIC knows when the port
        opened: ``EMU_WORLD``'s in a process started at run time; else nodes 0 to
        ``EMU_SIZE``; else 0 to ``nic_nodes``. Never the NIC's count when the launcher said
        the size: a rank that opens its port late sees the nodes other ranks spawned meanwhile
        in its NIC's table, and would take them for ranks of its COMM_WORLD."""
        if self.world is not None:
            return self.world
        return 0, self.size or nic_nodes


def process_environ() -> MutableMapping[str, str]:
    """This process's environment, for the one module that writes a host's place into it
    before `HostConfig.from_env` reads it: a rank started by a PMI launcher
    (``emucluster.pmi.bootstrap``) sets ``EMU_RANK`` ... there, as emurun would have."""
    return os.environ


def _pair(environ: Mapping[str, str], name: str) -> tuple[int, int] | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    first, _, second = text.partition(":")
    if not (first.isdigit() and second.isdigit()):
        raise ConfigError(f"{name}={text!r}: expected two numbers A:B")
    return int(first), int(second)


def _number(
    kind: type[N], environ: Mapping[str, str], name: str, default: str, *, empty: str = ""
) -> N:
    text = environ.get(name, default) or empty
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a number") from None
