"""The nic-mcast bcast algorithm (emucluster.offload.nic_mcast.bcast) on simulated ranks: group
plans, cost fits, calibration, the marker/fallback logic, with a fake NIC that multicasts by
looping the message back to every other rank."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from emucluster.coll.context import simulate
from emucluster.coll.tags import Tag
from emucluster.config import HostConfig
from emucluster.offload.nic_mcast.bcast import (
    GROUP_BASE,
    SIZE_CLASSES,
    GroupPlan,
    bcast_nic_mcast,
    fit_costs,
    group_id,
)
from emucluster.offload.nic_mcast.shell import McastShell
from emucluster.offload.nic_mcast.trees import PostalCosts
from emucluster.offload.services import StaticServices

if TYPE_CHECKING:
    from emucluster.coll.context import CollContext, CollGen

EAGER = 100


class FakeNic:
    """One rank's McastService: a multicast is a loopback send to every other rank."""

    def __init__(self, costs: PostalCosts | None, kind: str = "postal") -> None:
        self.eager_limit = EAGER
        self.num_nodes = 16
        self.tree_kind = kind
        self._costs = costs
        self.plans: dict[int, GroupPlan] = {}
        self.posted: list[int] = []
        self.sent: list[tuple[int, bytes]] = []
        self.clock = 0.0
        self._epoch: int | None = None
        self.last_epoch: int | None = None

    def now(self) -> float:
        self.clock += 1e-4
        return self.clock

    def costs(self, ctx: CollContext) -> PostalCosts | None:
        return self._costs

    def set_costs(self, ctx: CollContext, costs: PostalCosts) -> None:
        self._costs = costs

    def plan(self, ctx: CollContext, root: int) -> GroupPlan | None:
        return self.plans.get(root)

    def epoch(self, ctx: CollContext) -> int | None:
        return self._epoch

    def propose_epoch(self, ctx: CollContext) -> int:
        return 0 if self.last_epoch is None else self.last_epoch + 1

    def set_epoch(self, ctx: CollContext, epoch: int) -> None:
        self._epoch = self.last_epoch = epoch

    def release(self) -> None:
        """The communicator was freed (as the MPI shell's ``release``)."""
        self.plans.clear()
        self._epoch = None

    def post(self, ctx: CollContext, root: int, plan: GroupPlan) -> None:
        self.plans[root] = plan
        self.posted += plan.groups

    def multicast(
        self, ctx: CollContext, root: int, group: int, marker: int, payload: bytes
    ) -> None:
        framed = bytes((marker,)) + payload  # as the MPI shell frames what arrives
        self.sent.append((group, framed))
        for r in range(ctx.size):
            if r != root:
                ctx.isend(framed, r, Tag.MCAST)

    def check(self, ctx: CollContext) -> None:
        pass


class WithNic:
    """A LoopbackContext seen through the MPI layer's extra attributes."""

    def __init__(self, ctx: CollContext, nic: FakeNic) -> None:
        self._ctx = ctx
        self.services = StaticServices(mcast=nic)
        self.rank, self.size = ctx.rank, ctx.size
        self.nodes = tuple(range(ctx.size))

    def isend(self, payload: bytes, dest: int, tag: int) -> object:
        return self._ctx.isend(payload, dest, tag)

    def irecv(self, source: int, tag: int) -> object:
        return self._ctx.irecv(source, tag)

    def wire(self, tag: int) -> tuple[int, int]:
        return 7, tag


def run(size: int, root: int, data: bytes, nics: list[FakeNic]) -> list[object]:
    def algorithm(ctx: CollContext, payload: bytes | None, r: int) -> CollGen[bytes]:
        return bcast_nic_mcast(WithNic(ctx, nics[ctx.rank]), payload, r)  # type: ignore[arg-type]

    return simulate(algorithm, size, lambda r: (data if r == root else None, root))


@pytest.mark.parametrize("size", [2, 3, 7, 16])
def test_eager_messages_are_one_multicast_and_everyone_gets_them(size: int) -> None:
    nics = [FakeNic(PostalCosts(latency_s=3e-4, gap_s=1e-4)) for _ in range(size)]
    rng = random.Random(size)
    for root in {0, size - 1, size // 2}:
        data = rng.randbytes(rng.randrange(EAGER + 1))
        assert run(size, root, data, nics) == [data] * size
        (group, payload) = nics[root].sent[-1]
        assert payload == b"\0" + data
        assert group in nics[root].plans[root].groups
    plans = {tuple(n.plans.items()) for n in nics}
    assert len(plans) == 1  # every rank posted the same groups


def test_large_messages_send_a_marker_then_go_by_host_binomial() -> None:
    nics = [FakeNic(None, "binomial") for _ in range(5)]
    data = bytes(range(256)) * 2
    assert run(5, 3, data, nics) == [data] * 5
    assert [p for _, p in nics[3].sent] == [b"\x01"]


def test_first_use_calibrates_and_every_rank_agrees() -> None:
    nics = [FakeNic(None) for _ in range(6)]
    assert run(6, 2, b"x", nics) == [b"x"] * 6
    measured = {n._costs for n in nics}
    assert len(measured) == 1
    (costs,) = measured
    assert costs is not None
    assert costs.latency_s > 0


def test_a_reused_context_agrees_an_epoch_no_member_used_there() -> None:
    """Issue 17: a communicator on context 7 is freed; the next one on 7 (another
    membership: old ranks 2 and 3 beside a rank new to the id) posts the same group ids, so
    its members must agree an epoch newer than any of them used on the id."""
    first = [FakeNic(None, "binomial") for _ in range(4)]
    assert run(4, 0, b"a", first) == [b"a"] * 4
    assert {n.plans[0].epoch for n in first} == {0}
    assert run(4, 0, b"b", first) == [b"b"] * 4  # later calls: no new agreement
    for nic in first:
        nic.release()
    newcomer = FakeNic(None, "binomial")
    second = [first[3], newcomer, first[2]]
    assert run(3, 0, b"c", second) == [b"c"] * 3
    assert {n.plans[0].epoch for n in second} == {1}
    assert second[0].plans[0].groups[0] == first[0].posted[0]  # the same id: only the epoch differs


def test_group_plan_is_one_group_per_distinct_tree() -> None:
    nodes = tuple(range(16))
    costs = PostalCosts(latency_s=5e-4, gap_s=1e-4, gap_per_byte_s=1e-7)
    plan = GroupPlan.build(nodes, 3, 9, 16, costs, "postal")
    assert len(plan.by_class) == len(SIZE_CLASSES)
    assert len(set(plan.trees)) == len(plan.trees) == len(plan.groups)
    assert len(plan.trees) > 1  # the tree depends on the message size (§5.5)
    assert plan.trees[plan.by_class[0]].depth() < plan.trees[plan.by_class[-1]].depth()
    assert all(GROUP_BASE <= g <= 0xFFFF for g in plan.groups)
    assert plan.group_for(0) == plan.groups[plan.by_class[0]]
    assert plan.group_for(10**6) == plan.groups[plan.by_class[-1]]
    binomial = GroupPlan.build(nodes, 3, 9, 16, costs, "binomial")
    assert len(binomial.trees) == 1


def test_group_ids_differ_by_context_root_and_tree() -> None:
    ids = {group_id(c, r, t, 16) for c in (1, 3, 5) for r in range(16) for t in range(8)}
    assert len(ids) == 3 * 16 * 8
    with pytest.raises(ValueError, match="tree index"):
        group_id(1, 0, 8, 16)


def test_cost_fits_are_linear_and_clamped() -> None:
    costs = fit_costs([100e-6, 100e-6 + 8192e-9], [10e-6, 5e-6])
    assert costs.latency_s == pytest.approx(100e-6)
    assert costs.latency_per_byte_s == pytest.approx(1e-9)
    assert costs.gap_per_byte_s == 0.0  # a falling measurement is noise, not a negative cost
    assert fit_costs([0.0, 0.0], [0.0, 0.0]).latency_s > 0


@pytest.mark.parametrize(("environ", "spread"), [
    ({"EMU_SIZE": "3"}, 3),  # a rank that opened its port after 2 nodes were spawned
    ({"EMU_SIZE": "2", "EMU_WORLD": "5:2"}, 7),  # a spawned world of nodes 5 and 6
    ({}, 5),  # no launcher said the size: the NIC's count
])  # fmt: skip
def test_group_ids_are_spread_over_the_world_not_the_nics_count(
    environ: dict[str, str], spread: int
) -> None:
    """Every rank of a world computes the same group ids: the shell spreads them over
    COMM_WORLD's nodes, not over the nodes its NIC knew when its port opened."""
    engine = SimpleNamespace(eager_limit=1024, port=SimpleNamespace(num_nodes=5), hooks={})
    shell = McastShell(engine, HostConfig.from_env(environ))  # type: ignore[arg-type]
    assert shell.num_nodes == spread
