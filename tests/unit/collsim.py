"""A seeded in-process network for collective algorithms: N ranks, fake contexts, random order.

Each rank runs one or more *tasks* (algorithm generators) over `FakeContext`s. A step of the
simulation is one of: deliver the oldest in-flight message of some (source, dest, wire tag)
channel, or resume a task whose awaited requests are all complete; a `random.Random(seed)`
picks which, so every seed is a different legal interleaving and the same seed replays it.
Only what MPI promises is kept: messages on one (source, dest, tag) arrive and match in send
order; across channels anything goes.

Matching follows MPI: an arriving message completes the oldest posted receive for its
channel, else waits in an unexpected queue that a later receive takes from first. Send
completion has two modes: ``eager`` (complete when delivered to the receiver's queue, as a
buffered eager send) and ``sync`` (complete only when matched, as a rendezvous send), which
exposes algorithms that rely on buffering.

A context may carry a call sequence number: its algorithm tags (``0 <= tag < TAG_LIMIT``)
go on the wire as ``seq * TAG_LIMIT + tag``, as the MPI layer isolates collective calls, so
tests can run several collectives at once on each rank.

`Sim.run` fails with `SimFailure` (seed included) if no step is possible while a task is
unfinished, and checks at the end that nothing is left over: no message in flight or
unexpected, no posted receive, no incomplete request.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from emucluster.coll.context import TAG_LIMIT

__all__ = ["FakeContext", "Sim", "SimFailure", "SimRequest", "run_collective"]

Channel = tuple[int, int, int]  # (source, dest, wire tag)


class SimFailure(AssertionError):
    """The algorithms deadlocked, misused the context, or left something behind."""


class SimRequest:
    """A request made by a `FakeContext`; ``done`` and ``result`` as the contract says."""

    __slots__ = ("channel", "done", "kind", "owner", "result")

    def __init__(self, kind: str, owner: int, channel: Channel) -> None:
        self.kind = kind
        self.owner = owner
        self.channel = channel
        self.done = False
        self.result: bytes | None = None

    def __repr__(self) -> str:
        src, dst, tag = self.channel
        state = "done" if self.done else "pending"
        return f"<{self.kind} {src}->{dst} tag {tag} {state}>"


class FakeContext:
    """One rank's collective channel for one call (sequence number ``seq``)."""

    def __init__(self, sim: Sim, rank: int, seq: int = 0) -> None:
        self.rank = rank
        self.size = sim.size
        self.seq = seq
        self._sim = sim

    def _wire_tag(self, peer: int, tag: int) -> int:
        if not 0 <= peer < self.size:
            raise SimFailure(f"rank {self.rank}: peer {peer} outside 0..{self.size - 1}")
        if peer == self.rank:
            raise SimFailure(f"rank {self.rank}: message to itself (tag {tag})")
        if not 0 <= tag < TAG_LIMIT:
            raise SimFailure(f"rank {self.rank}: tag {tag} outside 0..{TAG_LIMIT - 1}")
        return self.seq * TAG_LIMIT + int(tag)

    def isend(self, payload: bytes | bytearray | memoryview, dest: int, tag: int) -> SimRequest:
        channel = (self.rank, dest, self._wire_tag(dest, tag))
        return self._sim.post_send(channel, bytes(payload))

    def irecv(self, source: int, tag: int) -> SimRequest:
        channel = (source, self.rank, self._wire_tag(source, tag))
        return self._sim.post_recv(channel)


@dataclass
class _Task:
    rank: int
    gen: Generator[list[Any], None, Any]
    waiting: list[SimRequest] = field(default_factory=list)
    started: bool = False
    finished: bool = False
    result: Any = None
    entered_at: int = -1  # step of the first resume
    finished_at: int = -1


class Sim:
    """N ranks on a seeded random network; see the module docstring."""

    def __init__(self, size: int, *, seed: int, sync: bool = False) -> None:
        self.size = size
        self.seed = seed
        self.sync = sync
        self.rng = random.Random(seed)
        self.tasks: list[_Task] = []
        self.in_flight: dict[Channel, deque[tuple[bytes, SimRequest]]] = {}
        self.unexpected: dict[Channel, deque[tuple[bytes, SimRequest]]] = {}
        self.posted: dict[Channel, deque[SimRequest]] = {}
        self.requests: list[SimRequest] = []
        self.messages = 0
        self.bytes_sent = 0
        self.sends_by_tag: Counter[int] = Counter()
        self.step_count = 0

    # -- the contexts' side ----------------------------------------------------------------

    def context(self, rank: int, seq: int = 0) -> FakeContext:
        return FakeContext(self, rank, seq)

    def post_send(self, channel: Channel, payload: bytes) -> SimRequest:
        request = SimRequest("isend", channel[0], channel)
        self.requests.append(request)
        self.in_flight.setdefault(channel, deque()).append((payload, request))
        self.messages += 1
        self.bytes_sent += len(payload)
        self.sends_by_tag[channel[2] % TAG_LIMIT] += 1
        return request

    def post_recv(self, channel: Channel) -> SimRequest:
        request = SimRequest("irecv", channel[1], channel)
        self.requests.append(request)
        waiting = self.unexpected.get(channel)
        if waiting:
            payload, send = waiting.popleft()
            self._match(request, payload, send)
        else:
            self.posted.setdefault(channel, deque()).append(request)
        return request

    def _match(self, recv: SimRequest, payload: bytes, send: SimRequest) -> None:
        recv.result = payload
        recv.done = True
        send.done = True  # sync mode completes here; eager already did

    def _deliver(self, channel: Channel) -> None:
        payload, send = self.in_flight[channel].popleft()
        if not self.sync:
            send.done = True
        posted = self.posted.get(channel)
        if posted:
            self._match(posted.popleft(), payload, send)
        else:
            self.unexpected.setdefault(channel, deque()).append((payload, send))

    # -- running ---------------------------------------------------------------------------

    def spawn(self, rank: int, gen: Generator[list[Any], None, Any]) -> _Task:
        task = _Task(rank, gen)
        self.tasks.append(task)
        return task

    def _resume(self, task: _Task) -> None:
        if task.entered_at < 0:
            task.entered_at = self.step_count
        try:
            yielded = task.gen.send(None) if task.started else next(task.gen)
        except StopIteration as stop:
            task.finished = True
            task.finished_at = self.step_count
            task.result = stop.value
            task.waiting = []
            return
        task.started = True
        if not isinstance(yielded, list):
            raise SimFailure(f"seed {self.seed}: rank {task.rank} yielded {yielded!r}, not a list")
        for request in yielded:
            if not isinstance(request, SimRequest) or request.owner != task.rank:
                raise SimFailure(
                    f"seed {self.seed}: rank {task.rank} yielded a foreign request {request!r}"
                )
        task.waiting = yielded

    def run(self, max_steps: int = 1_000_000) -> None:
        """Run every task to completion in a seeded random order, then check for leftovers."""
        for _ in range(max_steps):
            options: list[tuple[bool, Any]] = [
                (False, channel) for channel, queue in self.in_flight.items() if queue
            ]
            options += [
                (True, task)
                for task in self.tasks
                if not task.finished and all(request.done for request in task.waiting)
            ]
            if not options:
                break
            self.step_count += 1
            is_task, what = self.rng.choice(options)
            if is_task:
                self._resume(what)
            else:
                self._deliver(what)
        else:
            raise SimFailure(f"seed {self.seed}: no end after {max_steps} steps")
        stuck = [(task.rank, task.waiting) for task in self.tasks if not task.finished]
        if stuck:
            raise SimFailure(f"seed {self.seed}: deadlock, waiting: {stuck}")
        self._check_leftovers()

    def _check_leftovers(self) -> None:
        left = {
            "unexpected": {ch: len(q) for ch, q in self.unexpected.items() if q},
            "posted": {ch: len(q) for ch, q in self.posted.items() if q},
            "incomplete": [r for r in self.requests if not r.done],
        }
        if any(left.values()):
            raise SimFailure(f"seed {self.seed}: left over after all ranks returned: {left}")


Algorithm = Callable[..., Generator[list[Any], None, Any]]


def run_collective(
    size: int,
    algorithm: Algorithm,
    args: Sequence[Sequence[object]] | None = None,
    *,
    seed: int,
    sync: bool = False,
) -> tuple[list[Any], Sim]:
    """Run ``algorithm(ctx_r, *args[r])`` once on every rank r; return the results and the sim."""
    sim = Sim(size, seed=seed, sync=sync)
    per_rank = args if args is not None else [()] * size
    tasks = [sim.spawn(r, algorithm(sim.context(r), *per_rank[r])) for r in range(size)]
    sim.run()
    return [task.result for task in tasks], sim
