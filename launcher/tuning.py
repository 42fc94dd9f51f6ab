"""CPU affinity and scheduling priority of started processes (Linux system calls).

A real NIC has its own processor; here nicd shares CPUs with busy hosts, so it is run at
SCHED_FIFO where permitted (root or CAP_SYS_NICE; the kernel's RT throttling keeps 5 % for
everyone else), or the hosts are niced instead (DESIGN §10: 0.2 ms vs 2-6 ms for a 16-node
tree forward with busy hosts). A host may also ask for a short time slice (`set_slice`), so
that many busy hosts on few cores share them finely (the reduce-skew benchmark does).
"""

from __future__ import annotations

import ctypes
import os
import struct

__all__ = [
    "HOST_NICE",
    "NICD_RT_PRIORITY",
    "allowed_cpus",
    "bind",
    "make_nice",
    "make_realtime",
    "set_slice",
]

NICD_RT_PRIORITY = 10
"""SCHED_FIFO priority of nicd: above every normal process, below the kernel's own threads."""
HOST_NICE = 19
"""Nice value of host processes when nicd cannot be real-time."""


def allowed_cpus() -> list[int]:
    """The CPUs emurun itself may run on, ascending."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def bind(pid: int, cpus: frozenset[int]) -> str | None:
    """Pin ``pid`` to ``cpus``; the reason on failure, else None."""
    try:
        os.sched_setaffinity(pid, cpus)
    except (AttributeError, OSError) as exc:
        return f"cannot bind pid {pid} to CPUs {sorted(cpus)}: {exc}"
    return None


def make_realtime(pid: int) -> bool:
    """Put ``pid`` in SCHED_FIFO at NICD_RT_PRIORITY; False if the kernel refuses."""
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NICD_RT_PRIORITY))
    except (AttributeError, OSError):
        return False
    return True


def make_nice(pid: int) -> bool:
    """Lower ``pid``'s (a fresh process group leader's) whole group to nice HOST_NICE."""
    try:
        os.setpriority(os.PRIO_PGRP, pid, HOST_NICE)
    except OSError:
        try:
            os.setpriority(os.PRIO_PROCESS, pid, HOST_NICE)
        except OSError:
            return False
    return True


_SCHED_ATTR = struct.Struct("=IIQiIQQQ")  # struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes)
_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}


def set_slice(pid: int, seconds: float) -> str | None:
    """Request a time slice of ``seconds`` for ``pid`` (SCHED_OTHER, kernel >= 6.12 EEVDF
    ``sched_attr.sched_runtime``; the kernel clamps it to 0.1-100 ms): with many busy
    emulated hosts per core, a short slice makes time sharing fine-grained, so a host whose
    message (or signal) just arrived runs within a fraction of a millisecond instead of
    after the default ~1.4 ms slices of every other runnable host. The reason on failure,
    else None."""
    number = _SYS_SCHED_SETATTR.get(os.uname().machine)
    if number is None:
        return f"sched_setattr: unknown system call number on {os.uname().machine}"
    try:
        nice = os.getpriority(os.PRIO_PROCESS, pid)
        attr = ctypes.create_string_buffer(
            _SCHED_ATTR.pack(
                _SCHED_ATTR.size, os.SCHED_OTHER, 0, nice, 0, round(seconds * 1e9), 0, 0
            )
        )
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(number, pid, attr, 0) != 0:
            error = ctypes.get_errno()
            return f"sched_setattr(slice={seconds * 1e6:.0f} us): {os.strerror(error)}"
    except (AttributeError, OSError) as exc:
        return f"sched_setattr(slice={seconds * 1e6:.0f} us): {exc}"
    return None
