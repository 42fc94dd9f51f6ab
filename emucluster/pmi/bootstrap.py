"""The wiring-up of a rank that a PMI-1 launcher started: its own nicd, the address exchange
through the launcher's key-value space, the routes, and the environment emurun would give it.

``import emucluster.MPI`` calls `attach` first (``emucluster.mpi.lifecycle.init``). When the
process has no ``EMU_NIC_SOCKET`` (emurun did not start it) but has ``PMI_FD`` or ``PMI_PORT``,
the rank:

1. connects to the process manager and says ``init`` (``emucluster.pmi.channel``), asks for
   the limits and the key-value space's name;
2. starts its node's nicd as emurun does (``python -P -m nicd --node-id RANK --run-dir DIR
   --listen HOST:0``, every fault flag explicit from ``EMU_LOSS`` ... with the node's own seed,
   ``--stats`` when ``EMU_STATS_DIR`` is set, extra flags from ``EMU_NICD_ARGS``) on a
   lifeline: the rank holds the pipe's only write end, so if the rank dies however it dies,
   its nicd sees EOF and stops;
3. reads the nicd's ready line, puts its UDP address under ``emucluster-nic-RANK``, waits at
   the PMI barrier, reads every rank's, installs the same routing table emurun would, and
   waits at a second barrier so no nicd hears from a peer before it knows the peer;
4. sets ``EMU_RANK``, ``EMU_SIZE``, ``EMU_NIC_SOCKET``, ``EMU_RUN_DIR`` and ``EMU_JOB_ID`` in
   its environment, as emurun sets them for a host process, and returns; the library then
   opens its port exactly as under emurun.

At Finalize (`Attached.finish`) the rank waits at a PMI barrier (no nicd may stop while a
peer still waits for its acknowledgements), says ``finalize``, stops its nicd (SIGTERM: it
writes its statistics; SIGKILL after a grace period) and removes its run directory. MPI_Abort
becomes a PMI ``abort``, so the launcher ends the whole job with the code.

The job id (which names shared-memory segments) is derived from the key-value space's name,
the same in every rank. Rank and size come from ``PMI_RANK``/``PMI_SIZE`` (or the PMI_PORT
hand-shake). The nicd listens on ``EMU_NIC_LISTEN`` if set, else on 127.0.0.1 when the
launcher's ``PMI_process_mapping`` puts every rank on one node, else on the address this
host's name resolves to.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from emucluster import config
from emucluster.errors import EmuclusterError
from emucluster.pmi.channel import (
    ENV_PMI_RANK,
    ENV_PMI_SIZE,
    PmiChannel,
    PmiChannelError,
    started_by_pmi,
)
from emucluster.pmi.session import PmiRefused
from emucluster.pmi.wire import PmiProtocolError
from nicd.contract import (
    BadReadyLine,
    FaultConfig,
    Lifeline,
    NicdError,
    decode_ready_untrusted,
    node_fault_seed,
    set_routes,
    socket_path,
)

if TYPE_CHECKING:
    from collections.abc import MutableMapping

__all__ = [
    "ENV_NICD_ARGS",
    "ENV_NIC_LISTEN",
    "ENV_PMI_TIMEOUT_S",
    "KEY_PREFIX",
    "Attached",
    "BootstrapError",
    "attach",
    "job_id_of",
    "node_count",
]

ENV_NIC_LISTEN = "EMU_NIC_LISTEN"
"""Under a PMI launcher: the address each rank's nicd binds and announces (default: 127.0.0.1
when ``PMI_process_mapping`` puts the job on one node, else the address of this host's name)."""
ENV_NICD_ARGS = "EMU_NICD_ARGS"
"""Under a PMI launcher: extra nicd flags for each rank's nicd, as shell words
(``--recovery selective``)."""
ENV_PMI_TIMEOUT_S = "EMU_PMI_TIMEOUT_S"
"""Under a PMI launcher: the longest wait, in seconds, for one PMI reply (a barrier included)
and for the nicd's ready line (default 300)."""
KEY_PREFIX = "emucluster-nic-"
"""Rank r puts its nicd's ``host:port`` under ``emucluster-nic-<r>``."""
DEFAULT_TIMEOUT_S = 300.0
STOP_GRACE_S = 5.0
_MAPPING_BLOCK = re.compile(r"\((\d+),(\d+),(\d+)\)")


class BootstrapError(EmuclusterError):
    """The rank could not bring its node up under a PMI launcher: its nicd did not start or
    announce itself, an address in the key-value space was not one, or the PMI exchange failed
    (the message says which); the rank cannot run."""


def job_id_of(kvsname: str) -> str:
    """The job id every rank of the key-value space ``kvsname`` derives alike."""
    return "p" + hashlib.sha256(kvsname.encode()).hexdigest()[:11]


def node_count(mapping: str) -> int | None:
    """Distinct nodes in a ``PMI_process_mapping`` value (``(vector,(0,2,4))``: 2), or None
    when it is empty or does not parse (RFC 13: unknown)."""
    blocks = _MAPPING_BLOCK.findall(mapping)
    if not mapping.startswith("(vector,") or not blocks:
        return None
    return max(int(start) + int(count) for start, count, _ in blocks)


@dataclass(slots=True)
class Attached:
    """This rank's node, brought up through the launcher (`attach`)."""

    channel: PmiChannel
    kvsname: str
    rank: int
    size: int
    nicd: subprocess.Popen[bytes]
    lifeline: Lifeline
    run_dir: str
    done: bool = False

    def finish(self) -> None:
        """Barrier, ``finalize``, stop the nicd, remove the run directory (once); raise
        BootstrapError after cleaning up if the exchange failed."""
        if self.done:
            return
        self.done = True
        failure: Exception | None = None
        try:
            self.channel.barrier()
            self.channel.finalize()
        except (PmiChannelError, PmiProtocolError, PmiRefused) as exc:
            failure = exc
        finally:
            self.stop()
        if failure is not None:
            raise BootstrapError(f"rank {self.rank}: PMI at Finalize: {failure}") from failure

    def abort(self, exitcode: int, message: str) -> None:
        """Ask the launcher to end the job with ``exitcode`` (no reply is awaited)."""
        self.channel.abort(exitcode, message)

    def stop(self) -> None:
        """Without a barrier: close the PMI connection, stop the nicd (SIGTERM, then SIGKILL
        after `STOP_GRACE_S`), remove the run directory. A rank ending on an error does this
        before it exits; a rank killed by a signal cannot, and leaves its run directory (its
        nicd still stops, through the lifeline)."""
        self.done = True
        with contextlib.suppress(ProcessLookupError):
            self.nicd.send_signal(signal.SIGTERM)
        try:
            self.nicd.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.nicd.kill()
            self.nicd.wait()
        self.lifeline.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.channel.close()  # last: a launcher may take the closed connection for our end


def attach(environ: MutableMapping[str, str]) -> Attached | None:
    """Bring this rank's node up if a PMI launcher (not emurun) started the process, and set
    the EMU_* place variables in ``environ``; None when there is nothing to do."""
    if environ.get(config.ENV_NIC_SOCKET) or not started_by_pmi(environ):
        return None
    timeout = _timeout(environ)
    try:
        channel = PmiChannel.from_environ(environ, timeout)
    except (PmiProtocolError, PmiRefused) as exc:
        raise BootstrapError(f"PMI init: {exc}") from exc
    except PmiChannelError as exc:
        raise BootstrapError(str(exc)) from exc
    try:
        return _attach(channel, environ, timeout)
    except BaseException:
        channel.close()
        raise


def _attach(channel: PmiChannel, environ: MutableMapping[str, str], timeout: float) -> Attached:
    rank, size = _place(channel, environ)
    try:
        channel.maxes()
        kvsname = channel.kvsname()
        mapping = _get_optional(channel, kvsname, "PMI_process_mapping")
    except (PmiChannelError, PmiProtocolError, PmiRefused) as exc:
        raise BootstrapError(f"rank {rank}: PMI: {exc}") from exc
    job_id = job_id_of(kvsname)
    host = _listen_host(environ, mapping)
    run_dir = tempfile.mkdtemp(prefix=f"emu-{job_id}-{rank}-")
    lifeline = Lifeline.create()
    try:
        nicd = _start_nicd(environ, rank, run_dir, host, job_id, lifeline)
    except BaseException:
        lifeline.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    os.close(lifeline.read_fd)  # the nicd holds it; we keep only the write end
    attached = Attached(channel, kvsname, rank, size, nicd, _without_read_end(lifeline), run_dir)
    try:
        address = _read_ready(nicd, rank, timeout)
        table = _exchange(channel, kvsname, rank, size, address)
        set_routes(socket_path(run_dir, rank), table, timeout)
        channel.barrier()
    except BaseException as exc:
        attached.stop()
        if isinstance(exc, PmiChannelError | PmiProtocolError | PmiRefused | NicdError):
            raise BootstrapError(f"rank {rank}: {exc}") from exc
        raise
    environ[config.ENV_RANK] = str(rank)
    environ[config.ENV_SIZE] = str(size)
    environ[config.ENV_NIC_SOCKET] = socket_path(run_dir, rank)
    environ[config.ENV_RUN_DIR] = run_dir
    environ[config.ENV_JOB_ID] = job_id
    return attached


def _without_read_end(lifeline: Lifeline) -> Lifeline:
    """``lifeline`` with its read end marked closed (-1), so `Lifeline.close` leaves it."""
    return replace(lifeline, read_fd=-1)


def _timeout(environ: MutableMapping[str, str]) -> float:
    text = environ.get(ENV_PMI_TIMEOUT_S) or str(DEFAULT_TIMEOUT_S)
    try:
        value = float(text)
    except ValueError:
        raise BootstrapError(f"{ENV_PMI_TIMEOUT_S}={text!r}: expected a number") from None
    if not value > 0:
        raise BootstrapError(f"{ENV_PMI_TIMEOUT_S}={text!r}: must be positive")
    return value


def _place(channel: PmiChannel, environ: MutableMapping[str, str]) -> tuple[int, int]:
    if channel.placement is not None:
        return channel.placement.rank, channel.placement.size
    try:
        rank, size = int(environ[ENV_PMI_RANK]), int(environ[ENV_PMI_SIZE])
    except (KeyError, ValueError):
        raise BootstrapError("PMI_FD is set but PMI_RANK or PMI_SIZE is not a number") from None
    if not 0 <= rank < size <= 0xFFFF:
        raise BootstrapError(f"PMI_RANK={rank} PMI_SIZE={size}: not a place in a job")
    return rank, size


def _get_optional(channel: PmiChannel, kvsname: str, key: str) -> str:
    try:
        return channel.get(kvsname, key)
    except PmiRefused:
        return ""


def _listen_host(environ: MutableMapping[str, str], mapping: str) -> str:
    chosen = environ.get(ENV_NIC_LISTEN, "").strip()
    if chosen:
        return chosen
    if node_count(mapping) in (None, 1):
        return "127.0.0.1"
    name = socket.gethostname()
    try:
        address = socket.gethostbyname(name)
    except OSError as exc:
        raise BootstrapError(
            f"the job spans several nodes but this host's name {name!r} does not resolve "
            f"({exc}): set {ENV_NIC_LISTEN} to this node's address"
        ) from None
    if address.startswith("127."):  # Debian maps the host's name to 127.0.1.1
        print(
            f"emucluster: the job spans several nodes but {name!r} resolves to {address}: "
            f"peers on other machines cannot reach it; set {ENV_NIC_LISTEN}",
            file=sys.stderr,
        )
    return address


def _start_nicd(
    environ: MutableMapping[str, str],
    rank: int,
    run_dir: str,
    host: str,
    job_id: str,
    lifeline: Lifeline,
) -> subprocess.Popen[bytes]:
    try:
        faults = FaultConfig.from_values({}, environ)
    except NicdError as exc:  # a UsageError naming the variable
        raise BootstrapError(f"rank {rank}: {exc}") from None
    argv = [sys.executable, "-P", "-m", "nicd", "--node-id", str(rank), "--run-dir", run_dir]
    argv += ["--listen", f"{host}:0"]
    stats = environ.get(config.ENV_STATS_DIR)
    if stats:
        os.makedirs(stats, exist_ok=True)
        argv += ["--stats", os.path.join(stats, f"nic{rank}.json")]
    argv += replace(faults, seed=node_fault_seed(faults.seed, rank)).flags()
    argv += shlex.split(environ.get(ENV_NICD_ARGS, ""))
    env = {k: v for k, v in environ.items() if not k.startswith("PMI_")}
    env[config.ENV_JOB_ID] = job_id
    env.update(lifeline.environ())
    try:
        return subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            pass_fds=(lifeline.read_fd,),
        )  # fmt: skip
    except OSError as exc:
        raise BootstrapError(f"rank {rank}: cannot start its nicd: {exc}") from None


def _read_ready(nicd: subprocess.Popen[bytes], rank: int, timeout: float) -> tuple[str, int]:
    """The nicd's UDP address from its ready line; the rest of its stdout is copied to ours."""
    assert nicd.stdout is not None
    fd = nicd.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BootstrapError(
                    f"rank {rank}: its nicd did not announce itself in {timeout} s"
                )
            if not sel.select(left):
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                code = nicd.wait()
                raise BootstrapError(f"rank {rank}: its nicd exited ({code}) before it was ready")
            data += chunk
            if len(data) > 65536:
                raise BootstrapError(f"rank {rank}: its nicd printed no ready line")
    line, _, rest = data.partition(b"\n")
    try:
        ready = decode_ready_untrusted(line)
    except BadReadyLine as exc:
        raise BootstrapError(f"rank {rank}: {exc}") from None
    threading.Thread(target=_copy_out, args=(fd, rest), name="nicd-stdout", daemon=True).start()
    return ready.udp


def _copy_out(fd: int, first: bytes) -> None:
    with contextlib.suppress(OSError):
        if first:
            os.write(1, first)
        while chunk := os.read(fd, 65536):
            os.write(1, chunk)


def _exchange(
    channel: PmiChannel, kvsname: str, rank: int, size: int, address: tuple[str, int]
) -> dict[int, tuple[str, int]]:
    host, port = address
    channel.put(kvsname, f"{KEY_PREFIX}{rank}", f"{host}:{port}")
    channel.barrier()
    table: dict[int, tuple[str, int]] = {}
    for node in range(size):
        text = channel.get(kvsname, f"{KEY_PREFIX}{node}")
        peer_host, sep, peer_port = text.rpartition(":")
        if not sep or not peer_host or not peer_port.isdigit() or not 0 < int(peer_port) < 65536:
            raise BootstrapError(f"rank {node}'s nicd address {text!r:.80} is not host:port")
        table[node] = (peer_host, int(peer_port))
    return table
