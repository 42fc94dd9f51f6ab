"""Which hosts a job runs on and which ranks each gets: hostfiles, ``--host``, ``--map-by``.

A hostfile has one host a line, ``NAME [slots=N]`` or ``NAME:N`` (N defaults to 1); ``#``
starts a comment. ``--host a:2,b`` says the same inline. A *slot* is one node of the job (one
nicd and one host process), not a CPU. The same name twice means two agents on that host.

``map_ranks`` gives each host its node ids (node id = rank): ``slot`` fills a host's slots
before the next one (neighbouring ranks share a host, so tree collectives stay mostly
local); ``node`` deals ranks round-robin over the hosts with free slots.

Invariants: pure (no I/O); bad input raises UsageError naming the line; every rank 0..np-1 is
on exactly one host, and no host gets more ranks than its slots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from launcher.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["HostSpec", "MapBy", "map_ranks", "parse_host_list", "parse_hostfile"]

MapBy = Literal["slot", "node"]
_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]:%]+")  # names, IPv4, [IPv6]
_MAX_SLOTS = 0xFFFF


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One host of the job and how many nodes it may run."""

    name: str
    slots: int = 1


def _spec(word: str, slots_text: str | None, where: str) -> HostSpec:
    name = word
    if slots_text is None and ":" in word and not word.endswith("]"):
        name, _, slots_text = word.rpartition(":")
    if not name or not _NAME.fullmatch(name):
        raise UsageError(f"{where}: bad host name {name!r}")
    slots = 1
    if slots_text is not None:
        if not slots_text.isdigit() or not 1 <= int(slots_text) <= _MAX_SLOTS:
            raise UsageError(f"{where}: slots {slots_text!r} is not a number in 1..{_MAX_SLOTS}")
        slots = int(slots_text)
    return HostSpec(name.strip("[]"), slots)


def parse_hostfile(text: str, source: str = "hostfile") -> list[HostSpec]:
    """Hosts of a hostfile's text; UsageError naming ``source:line`` for a bad line."""
    hosts: list[HostSpec] = []
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.partition("#")[0].split()
        if not words:
            continue
        where = f"{source}:{number}"
        slots_text: str | None = None
        for extra in words[1:]:
            key, sep, value = extra.partition("=")
            if not sep or key not in ("slots", "max_slots", "max-slots"):
                raise UsageError(f"{where}: unknown field {extra!r} (want slots=N)")
            if key == "slots":
                slots_text = value
        hosts.append(_spec(words[0], slots_text, where))
    if not hosts:
        raise UsageError(f"{source}: no hosts")
    return hosts


def parse_host_list(spec: str) -> list[HostSpec]:
    """``a:2,b`` -> [a with 2 slots, b with 1]."""
    words = [w.strip() for w in spec.split(",")]
    if not spec.strip() or not all(words):
        raise UsageError(f"--host {spec!r}: want NAME[:SLOTS][,NAME[:SLOTS]...]")
    return [_spec(w, None, f"--host {w!r}") for w in words]


def map_ranks(hosts: Sequence[HostSpec], np: int | None, by: MapBy) -> list[list[int]]:
    """The ranks of each host (same order as ``hosts``); ``np`` None means every slot."""
    total = sum(h.slots for h in hosts)
    if np is None:
        np = total
    if not 1 <= np <= total:
        raise UsageError(
            f"-np {np} needs {np} slots but the hosts have {total}: add hosts or slots"
        )
    out: list[list[int]] = [[] for _ in hosts]
    if by == "slot":
        rank = 0
        for i, host in enumerate(hosts):
            take = min(host.slots, np - rank)
            out[i] = list(range(rank, rank + take))
            rank += take
        return out
    rank = 0
    while rank < np:
        for i, host in enumerate(hosts):
            if rank < np and len(out[i]) < host.slots:
                out[i].append(rank)
                rank += 1
    return out
