"""CPU affinity and scheduling priority of started processes (Linux system calls).

A real NIC has its own processor; here nicd shares CPUs with busy hosts, so it is run at
SCHED_FIFO where permitted (root or CAP_SYS_NICE; the kernel's RT throttling keeps 5 % for
everyone else), or the hosts are niced instead (DESIGN §10: 0.2 ms vs 2-6 ms for a 16-node
tree forward with busy hosts).
"""

from __future__ import annotations

import os

__all__ = [
    "HOST_NICE",
    "NICD_RT_PRIORITY",
    "allowed_cpus",
    "bind",
    "make_nice",
    "make_realtime",
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
