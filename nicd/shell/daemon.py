"""The nicd process: its sockets, signals, start and stop; the loop's callbacks are `Shell`'s.

Signals go both ways: SIGTERM/SIGINT stop nicd, and a ``RaiseSignal`` from the core becomes
SIGUSR1 to the host (the NIC-generated signal of thesis 3.4.1), sent through the pidfd taken
when the host connected (``signal.pidfd_send_signal``): never to a process that reused its pid.

A turn of the loop (:mod:`nicd.shell.shell`, compiled with the cores): every input goes to
:class:`~nicd.core.nic.NicCore`; frames for the link made while host records or a timer are
handled go to each peer as one bundle (:mod:`nicd.link.bundle`) at the end of the turn. A burst
of datagrams is followed by one ``flush`` (batched ACKs), the single timer is re-armed only when
the core's deadline moved, and after host records the shell holds off when the core says the
host is streaming (:mod:`nicd.core.doorbell`). A host connection's own state and socket calls
are in :mod:`nicd.shell.hostconn`, routing tables from a file or a record are resolved by
:mod:`nicd.shell.routes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import stat
from typing import TYPE_CHECKING, cast

from emutrace.recorder import start_from_env
from nicd.core.nic import NicCore
from nicd.core.ready import Ready, announce_host, encode_ready, socket_path
from nicd.shell.routes import load_routes, resolve_routes
from nicd.shell.shell import Shell

if TYPE_CHECKING:
    from nicd.config import NicConfig

__all__ = ["ENV_PROFILE", "run"]

UDP_BUFFER_BYTES = 4 * 1024 * 1024  # kernel socket buffers asked for on the link
_Shell = Shell  # the callbacks (nicd.shell.shell, compiled); tests build one by this name


async def _serve(config: NicConfig, ready: bool) -> NicCore:
    loop = asyncio.get_running_loop()
    core = NicCore(config)
    if config.routes_file:
        core.set_routes(resolve_routes(load_routes(config.routes_file)))

    udp_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        with contextlib.suppress(OSError):
            udp_sock.setsockopt(socket.SOL_SOCKET, opt, UDP_BUFFER_BYTES)
    announce_host(config.advertise_host, config.listen_host)  # refuses 0.0.0.0 (issue 16)
    udp_sock.bind((config.listen_host, config.listen_port))
    udp_sock.setblocking(False)
    shell = _Shell(core, loop, udp_sock)
    shell.tracer = start_from_env("nic", config.node_id)
    if shell.tracer is not None:
        shell.facts = core.trace_on()
    # asyncio asks a protocol for its methods only; the compiled Shell has no base class
    await loop.create_datagram_endpoint(
        lambda: cast("asyncio.DatagramProtocol", shell), sock=udp_sock
    )

    path = socket_path(config.run_dir, config.node_id)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old_umask = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    listener.listen(64)
    listener.setblocking(False)
    loop.add_reader(listener.fileno(), shell.accept, listener)

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        if ready:
            host = config.advertise_host or udp_sock.getsockname()[0]
            port = udp_sock.getsockname()[1]
            print(encode_ready(Ready(config.node_id, (host, port), path)), flush=True)
        await stop.wait()
    finally:
        loop.remove_reader(listener.fileno())
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        shell.close()
    return core


ENV_PROFILE = "EMU_NICD_PROFILE"
"""A directory: nicd runs under cProfile and writes ``nicd-<node>-<pid>.pstats`` there at exit
(a developer's tool for the fast path; off when unset or empty)."""


def run(config: NicConfig, *, ready_line: bool = True) -> int:
    """Run one nicd until SIGTERM/SIGINT; write the stats file; return the exit status."""
    profile_dir = os.environ.get(ENV_PROFILE)
    if not profile_dir:
        return _run(config, ready_line)
    import cProfile  # only when profiling: a developer's tool

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(_run, config, ready_line)
    finally:
        path = os.path.join(profile_dir, f"nicd-{config.node_id}-{os.getpid()}.pstats")
        with contextlib.suppress(OSError):
            profiler.dump_stats(path)


def _run(config: NicConfig, ready_line: bool) -> int:
    try:
        import uvloop  # the fast path (DESIGN §10)
    except ImportError:  # pragma: no cover - a dependency, but keep nicd usable without it
        core = asyncio.run(_serve(config, ready_line))
    else:
        core = uvloop.run(_serve(config, ready_line))
    if config.stats_file:
        tmp = config.stats_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(core.stats(), f, indent=1, sort_keys=True)
        os.replace(tmp, config.stats_file)
    return 0
