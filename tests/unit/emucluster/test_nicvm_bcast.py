"""The NICVM broadcast algorithm on simulated ranks with a fake NIC service: first-call
synchronisation, the module path, the host fallback for long messages, no service at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from emucluster.coll.context import simulate
from emucluster.offload.nicvm.bcast import DATA, FALLBACK, bcast_nicvm
from emucluster.offload.services import StaticServices

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen


class _Arrival:
    def __init__(self, nic: FakeNics, rank: int) -> None:
        self._nic, self._rank = nic, rank

    @property
    def done(self) -> bool:
        return bool(self._nic.inbox[self._rank])

    @property
    def result(self) -> bytes | None:
        return self._nic.inbox[self._rank][0] if self.done else None


class _Done:
    done = True
    result = None


class FakeNics:
    """Every rank's NIC: a delegated body lands in every other rank's inbox at once."""

    def __init__(self, size: int, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.inbox: list[list[bytes]] = [[] for _ in range(size)]
        self.prepared: set[int] = set()
        self.delegated: list[bytes] = []

    def prepare(self, ctx: CollContext) -> bool:
        first = ctx.rank not in self.prepared
        self.prepared.add(ctx.rank)
        return first

    def delegate(self, ctx: CollContext, root: int, body: bytes) -> _Done:
        self.delegated.append(body)
        for rank in range(ctx.size):
            if rank != root:
                self.inbox[rank].append(body)
        return _Done()

    def expect(self, ctx: CollContext) -> _Arrival:
        return _Arrival(self, ctx.rank)


class _WithNic:
    def __init__(self, ctx: CollContext, nic: FakeNics | None) -> None:
        self._ctx, self.services = ctx, StaticServices(nicvm=nic)
        self.rank, self.size = ctx.rank, ctx.size
        self.isend, self.irecv = ctx.isend, ctx.irecv


def _run(size: int, root: int, data: bytes, nic: FakeNics | None) -> list[object]:
    def algorithm(ctx: CollContext, payload: bytes | None, r: int) -> CollGen[bytes]:
        return bcast_nicvm(_WithNic(ctx, nic), payload, r)  # type: ignore[arg-type]

    return simulate(algorithm, size, lambda r: (data if r == root else None, root))


@pytest.mark.parametrize("size", [2, 3, 8])
def test_module_path_delivers_to_every_rank(size: int) -> None:
    nic = FakeNics(size, max_bytes=100)
    assert _run(size, size - 1, b"hello", nic) == [b"hello"] * size
    assert nic.delegated == [DATA + b"hello"]
    assert nic.prepared == set(range(size))


def test_long_message_falls_back_to_the_host_tree_after_a_notice() -> None:
    nic = FakeNics(5, max_bytes=10)
    data = bytes(range(50))
    assert _run(5, 2, data, nic) == [data] * 5
    assert nic.delegated == [FALLBACK]


def test_without_a_nic_it_is_the_binomial_broadcast() -> None:
    assert _run(4, 1, b"x", None) == [b"x"] * 4


def test_the_root_must_supply_data() -> None:
    with pytest.raises(ValueError, match="root must supply"):
        _run(2, 0, None, FakeNics(2, 100))  # type: ignore[arg-type]
