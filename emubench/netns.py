"""Emulated hosts on one Linux machine: network namespaces on a bridge (198.18.7.0/24 only).

Topology, touching nothing in the root namespace::

    ns <P>sw: bridge br0 -- ph -- p0 -- p1 -- p2
    ns <P>hd (emurun): eth0 198.18.7.1     ns <P>h<i>: eth0 198.18.7.1<i>

:meth:`Fabric.launcher_exec` is an ssh-like command for ``emurun --launcher exec``: ``CMD
HOST COMMAND...`` runs COMMAND in HOST's network namespace, in a pid namespace of its own
(COMMAND is its pid 1, with a private /proc) and with a private /dev/shm: a host of its own,
as far as emucluster can tell; stdin (the job's token) passes through. Names carry a per-run
prefix, so parallel runs never collide; :meth:`Fabric.close` kills every process left in the
namespaces and deletes them, whatever happened. Used by the multi-host integration tests and
``emubench multihost`` (it lives here, above every package, because both need it).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

__all__ = ["EXEC_SCRIPT", "SUBNET", "Fabric", "unavailable"]

EXEC_SCRIPT = """host=$1; shift
exec ip netns exec "${EMU_NETNS_PREFIX:?}$host" unshare --pid --fork --mount-proc \
    sh -c 'mount -t tmpfs -o size=256m tmpfs /dev/shm && exec "$@"' sh "$@"
"""
"""``sh -c EXEC_SCRIPT netns-exec HOST COMMAND...`` (EMU_NETNS_PREFIX names the namespaces)."""
SUBNET = "198.18.7"  # RFC 2544 benchmarking range: never a real LAN
_COUNTER = itertools.count()
_TIMEOUT_S = 30.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=_TIMEOUT_S)  # fmt: skip


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"emuprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add is not permitted: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                       capture_output=True, text=True, check=False, timeout=_TIMEOUT_S)  # fmt: skip
    if r.returncode != 0:
        return f"unshare --pid is not permitted: {r.stderr.strip()}"
    return None


class Fabric:
    """A bridge, a head namespace for emurun and ``hosts`` host namespaces."""

    def __init__(self, hosts: int) -> None:
        self.prefix = f"e{os.getpid() % 100000}x{next(_COUNTER)}"
        self.switch = f"{self.prefix}sw"
        self.head = f"{self.prefix}hd"
        self.head_addr = f"{SUBNET}.1"
        self.hosts = [f"h{i}" for i in range(hosts)]
        self.namespaces: list[str] = []
        try:
            self._add(self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            self._plug(self.head, "ph", self.head_addr)
            for i, host in enumerate(self.hosts):
                self._plug(self.ns(host), f"p{i}", self.addr(host))
        except BaseException:
            self.close()
            raise

    def ns(self, host: str) -> str:
        """The namespace of ``host``."""
        return f"{self.prefix}{host}"

    def addr(self, host: str) -> str:
        """The address of ``host``."""
        return f"{SUBNET}.1{self.hosts.index(host)}"

    def port(self, host: str) -> str:
        """The bridge port of ``host`` (in the switch namespace)."""
        return f"p{self.hosts.index(host)}"

    def launcher_exec(self) -> str:
        """``--launcher-exec`` for emurun (with :meth:`env` in its environment)."""
        return shlex.join(["sh", "-c", EXEC_SCRIPT, "netns-exec"])

    def exec_argv(self, host: str, argv: list[str]) -> list[str]:
        """``argv`` run on ``host`` (as emurun's launcher would run it)."""
        return [*shlex.split(self.launcher_exec()), host, *argv]

    def env(self) -> dict[str, str]:
        """What netns_exec.sh needs in emurun's environment."""
        return {"EMU_NETNS_PREFIX": self.prefix}

    def in_head(self, argv: list[str]) -> list[str]:
        """``argv`` run inside emurun's namespace."""
        return ["ip", "netns", "exec", self.head, *argv]

    def pids(self, host: str) -> list[int]:
        """Processes in ``host``'s namespace."""
        r = _ip("netns", "pids", self.ns(host), check=False)
        return [int(word) for word in r.stdout.split()]

    def find(self, host: str, program: str, *needles: str) -> list[int]:
        """Pids in ``host`` running ``program`` with every needle in their command line."""
        found = []
        for pid in self.pids(host):
            try:
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            line = " ".join(w.decode(errors="replace") for w in words)
            if words[0].decode(errors="replace") == program and all(n in line for n in needles):
                found.append(pid)
        return found

    def link(self, host: str, up: bool) -> None:
        """Plug or unplug ``host``'s cable at the switch."""
        _ip("-n", self.switch, "link", "set", self.port(host), "up" if up else "down")

    def close(self) -> None:
        """Kill whatever runs in the namespaces and delete them (idempotent)."""
        for ns in reversed(self.namespaces):
            r = _ip("netns", "pids", ns, check=False)
            for word in r.stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(word), signal.SIGKILL)
            _ip("netns", "del", ns, check=False)
        self.namespaces.clear()

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.namespaces.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def _plug(self, ns: str, port: str, addr: str) -> None:
        self._add(ns)
        _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0",
            "netns", ns)  # fmt: skip
        _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
