"""FaultPlan: rates, determinism by seed, delay and reorder deadlines, corruption vs the CRC."""

from __future__ import annotations

import itertools
import math

import pytest

from nicd.config import FaultConfig
from nicd.errors import BadPacket, UsageError
from nicd.link.faults import REORDER_MAX_HOLD_S, FaultPlan
from nicd.link.wire import NackReason, decode_untrusted, encode
from tests.unit.factories import ack, data_packet, nack

Addr = tuple[str, int]
ADDR: Addr = ("10.0.0.2", 7000)
TICK = 0.0001  # seconds between sends in the traffic loops
N = 20_000  # datagrams per rate test


def plan(**kw: float) -> FaultPlan[Addr]:
    return FaultPlan(FaultConfig(**kw))  # type: ignore[arg-type]


def dgram(i: int) -> bytes:
    return i.to_bytes(4, "big")


def within(count: int, trials: int, p: float, sigmas: float = 5.0) -> bool:
    """True when ``count`` successes in ``trials`` is within ``sigmas`` of a binomial(p)."""
    return abs(count - trials * p) <= sigmas * math.sqrt(trials * p * (1 - p)) + 1


def run(fp: FaultPlan[Addr], n: int, tick: float = TICK) -> list[tuple[float, Addr, bytes]]:
    """Send datagrams 0..n-1 one per ``tick`` and drain the plan; (time, addr, data) out."""
    out: list[tuple[float, Addr, bytes]] = []
    for i in range(n):
        now = i * tick
        out += [(now, a, d) for a, d in fp.on_timer(now=now)]
        out += [(now, a, d) for a, d in fp.on_send(ADDR, dgram(i), now=now)]
    for _ in range(n + 1):  # each round releases at least one datagram
        deadline = fp.next_deadline()
        if deadline is None:
            break
        out += [(deadline, a, d) for a, d in fp.on_timer(now=deadline)]
    assert fp.next_deadline() is None
    return out


# -- the fast path ----------------------------------------------------------------------------


def test_inactive_plan_passes_datagrams_through_untouched() -> None:
    fp = plan(seed=123)
    assert not fp.active
    datagram = encode(data_packet())
    [(addr, out)] = fp.on_send(ADDR, datagram, now=5.0)
    assert addr is ADDR
    assert out is datagram
    assert fp.next_deadline() is None
    assert fp.on_timer(now=10.0) == []
    assert fp.stats() == {
        "dropped": 0,
        "duplicated": 0,
        "reordered": 0,
        "corrupted": 0,
        "delayed": 0,
    }


@pytest.mark.parametrize(
    "kw",
    [{"loss": -0.1}, {"dup": 1.5}, {"reorder": math.nan}, {"corrupt": 2.0}, {"delay_ms": -1.0}],
)
def test_bad_config_is_refused(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        plan(**kw)


# -- rates ------------------------------------------------------------------------------------


def test_loss_rate_converges() -> None:
    fp = plan(loss=0.1, seed=1)
    out = run(fp, N)
    dropped = fp.stats()["dropped"]
    assert within(dropped, N, 0.1)
    assert len(out) == N - dropped
    assert [d for _, _, d in out] == sorted(d for _, _, d in out)  # loss alone keeps order


def test_dup_rate_converges_and_copies_are_identical() -> None:
    fp = plan(dup=0.2, seed=2)
    out = run(fp, N)
    dups = fp.stats()["duplicated"]
    assert within(dups, N, 0.2)
    assert len(out) == N + dups
    data = [d for _, _, d in out]
    assert sorted(set(data)) == [dgram(i) for i in range(N)]
    assert sum(1 for a, b in itertools.pairwise(data) if a == b) == dups


def test_corrupt_rate_converges_and_flips_exactly_one_bit() -> None:
    fp = plan(corrupt=0.05, seed=3)
    out = run(fp, N)
    corrupted = fp.stats()["corrupted"]
    assert within(corrupted, N, 0.05)
    assert len(out) == N
    flips = [bin(int.from_bytes(d, "big") ^ i).count("1") for i, (_, _, d) in enumerate(out)]
    assert set(flips) == {0, 1}
    assert flips.count(1) == corrupted


def test_reorder_rate_converges_and_everything_arrives_once() -> None:
    fp = plan(reorder=0.3, seed=4)
    out = run(fp, N)
    reordered = fp.stats()["reordered"]
    assert within(reordered, N, 0.3)
    data = [d for _, _, d in out]
    assert sorted(data) == [dgram(i) for i in range(N)]
    overtaken = sum(1 for a, b in itertools.pairwise(data) if a > b)
    assert 0 < overtaken <= reordered
    times = [t for t, _, _ in out]
    assert times == sorted(times)


def test_all_faults_together_account_for_every_datagram() -> None:
    fp = plan(loss=0.05, dup=0.05, reorder=0.05, corrupt=0.05, delay_ms=1.0, seed=5)
    out = run(fp, N)
    s = fp.stats()
    assert len(out) == N - s["dropped"] + s["duplicated"]
    assert s["delayed"] == len(out)
    for key, p in (("dropped", 0.05), ("duplicated", 0.05)):
        assert within(s[key], N, p), key
    for key in ("reordered", "corrupted"):  # counted per copy put on the wire
        assert within(s[key], len(out), 0.05), key


def test_certain_faults() -> None:
    assert run(plan(loss=1.0), 100) == []
    fp = plan(dup=1.0)
    assert fp.on_send(ADDR, b"x", now=0.0) == [(ADDR, b"x"), (ADDR, b"x")]


# -- determinism ------------------------------------------------------------------------------

MIXED = {"loss": 0.1, "dup": 0.1, "reorder": 0.1, "corrupt": 0.1, "delay_ms": 0.5}


def test_same_seed_same_faults() -> None:
    a = run(plan(**MIXED, seed=42), 2000)
    b = run(plan(**MIXED, seed=42), 2000)
    assert a == b


def test_other_seed_other_faults() -> None:
    fa, fb = plan(**MIXED, seed=42), plan(**MIXED, seed=43)
    assert run(fa, 2000) != run(fb, 2000)
    assert fa.stats() != fb.stats()


def test_plans_do_not_share_randomness() -> None:
    # Interleaving two plans must not change either one's faults (no global random).
    alone = run(plan(**MIXED, seed=7), 500)
    fa, fb = plan(**MIXED, seed=7), plan(**MIXED, seed=7)
    for i in range(300):
        fb.on_send(ADDR, dgram(i), now=0.0)
    assert run(fa, 500) == alone


# -- deadlines --------------------------------------------------------------------------------


def test_delay_holds_every_datagram_and_keeps_order() -> None:
    fp = plan(delay_ms=5.0)
    for i in range(3):
        assert fp.on_send(ADDR, dgram(i), now=i * 0.001) == []
    assert fp.next_deadline() == pytest.approx(0.005)
    assert fp.on_timer(now=0.0049) == []
    assert fp.on_timer(now=fp.next_deadline()) == [(ADDR, dgram(0))]  # type: ignore[arg-type]
    assert fp.next_deadline() == pytest.approx(0.006)
    assert fp.on_timer(now=1.0) == [(ADDR, dgram(1)), (ADDR, dgram(2))]
    assert fp.next_deadline() is None
    assert fp.stats()["delayed"] == 3


def test_delay_ties_leave_in_send_order() -> None:
    fp = plan(delay_ms=1.0)
    for i in range(50):
        fp.on_send(("h", i), dgram(i), now=0.25)
    assert fp.on_timer(now=0.26) == [(("h", i), dgram(i)) for i in range(50)]


def test_reorder_holds_for_at_most_the_constant() -> None:
    fp = plan(reorder=1.0, seed=9)
    for i in range(200):
        now = 10.0 + i
        assert fp.on_send(ADDR, dgram(i), now=now) == []
        deadline = fp.next_deadline()
        assert deadline is not None
        assert now <= deadline <= now + REORDER_MAX_HOLD_S
        assert fp.on_timer(now=deadline) == [(ADDR, dgram(i))]
    assert fp.stats()["reordered"] == 200


def test_reorder_on_top_of_delay() -> None:
    fp = plan(reorder=1.0, delay_ms=3.0, seed=10)
    fp.on_send(ADDR, b"a", now=1.0)
    deadline = fp.next_deadline()
    assert deadline is not None
    assert 1.003 <= deadline <= 1.003 + REORDER_MAX_HOLD_S + 1e-12


def test_later_datagrams_overtake_a_held_one() -> None:
    fp = plan(reorder=0.5, seed=0)
    sent_now: list[bytes] = []
    held_first = None
    for i in range(100):
        out = fp.on_send(ADDR, dgram(i), now=0.0)
        if not out and held_first is None:
            held_first = dgram(i)
        sent_now += [d for _, d in out]
    assert held_first is not None
    assert sent_now  # those went out at once, ahead of the held one
    assert held_first not in sent_now
    released = fp.on_timer(now=REORDER_MAX_HOLD_S)
    assert held_first in [d for _, d in released]
    assert len(sent_now) + len(released) == 100


# -- corruption meets the CRC -----------------------------------------------------------------


@pytest.mark.parametrize(
    "packet",
    [
        data_packet(),
        data_packet(payload=b"", route=b"\x01\x02"),
        ack(seq=9),
        *(nack(reason) for reason in NackReason),
    ],
    ids=lambda p: type(p).__name__,
)
def test_corruption_is_caught_by_the_receiver_crc(packet: object) -> None:
    datagram = encode(packet)  # type: ignore[arg-type]
    fp = plan(corrupt=1.0, seed=11)
    for _ in range(200):
        [(_, damaged)] = fp.on_send(ADDR, datagram, now=0.0)
        assert len(damaged) == len(datagram)
        diff = int.from_bytes(damaged, "big") ^ int.from_bytes(datagram, "big")
        assert bin(diff).count("1") == 1
        with pytest.raises(BadPacket) as info:
            decode_untrusted(damaged)
        assert info.value.reason == "crc"
    assert fp.stats()["corrupted"] == 200
