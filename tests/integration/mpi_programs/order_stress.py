"""Ordering stress: every rank sends to every other rank many messages on several tags, eager and
rendezvous mixed, objects and raw buffers mixed; receivers take them with specific and
wildcard receives, probes and pre-posted receives, and check MPI's non-overtaking rule.

Usage: ``emurun -np N python order_stress.py [MESSAGES_PER_PEER] [SEED]``. Every rank prints
``order ok <rank> <digest>``; the digest depends only on the messages (not on arrival
timing), so a run under injected faults must print the same digests as a clean run.
"""

from __future__ import annotations

import hashlib
import random
import sys

import numpy as np

from emucluster import MPI

TAGS = 6  # even tags carry pickled objects, odd tags raw uint8 buffers
SIZES = (0, 8, 700, 16_200, 16_287, 16_288, 16_300, 45_000)

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
per_peer = int(sys.argv[1]) if len(sys.argv) > 1 else 30
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def plan(src: int, dst: int) -> list[tuple[int, int]]:
    """(tag, size) of each message ``src`` sends ``dst``, in order (known to both sides)."""
    rng = random.Random(seed * 1_000_003 + src * 1009 + dst)
    return [(rng.randrange(TAGS), rng.choice(SIZES)) for _ in range(per_peer)]


def content(src: int, tag: int, seq: int, nbytes: int) -> bytes:
    pattern = f"{src}/{tag}/{seq};".encode()
    return (pattern * (nbytes // len(pattern) + 1))[:nbytes]


# -- send everything (nonblocking), in each destination's planned order -------------------------
sends = []
for dst in range(size):
    if dst == rank:
        continue
    seqs = [0] * TAGS
    for tag, nbytes in plan(rank, dst):
        seq = seqs[tag]
        seqs[tag] += 1
        data = content(rank, tag, seq, nbytes)
        if tag % 2 == 0:
            sends.append(comm.isend((rank, tag, seq, data), dst, tag))
        else:
            sends.append(comm.Isend(np.frombuffer(data, dtype=np.uint8), dst, tag))

# -- receive: expected counts per (source, tag) are known from the plans -----------------------
expected: dict[tuple[int, int], int] = {}
for src in range(size):
    if src != rank:
        for tag, _ in plan(src, rank):
            expected[src, tag] = expected.get((src, tag), 0) + 1
got: dict[tuple[int, int], list[bytes]] = {key: [] for key in expected}
remaining = sum(expected.values())


def take(src: int, tag: int, payload: bytes, status_count: int | None = None) -> None:
    seq = len(got[src, tag])
    assert payload == content(src, tag, seq, len(payload)), ("overtaken or corrupt", src, tag, seq)
    got[src, tag].append(payload)


def receive_one(source: int, tag: int) -> None:
    """Probe (to learn the kind and size), then receive exactly that message."""
    status = MPI.Status()
    comm.Probe(source, tag, status)
    src, t = status.source, status.tag
    if t % 2 == 0:
        obj = comm.recv(source=src, tag=t)
        assert obj[:3] == (src, t, len(got[src, t]))
        take(src, t, obj[3])
    else:
        buf = np.empty(status.Get_count(MPI.BYTE), dtype=np.uint8)
        comm.Recv(buf, src, t, status)
        assert status.source == src
        assert status.tag == t
        take(src, t, buf.tobytes())


rng = random.Random(seed + rank)
# 1. pre-posted receives on specific (source, even tag) pairs: the posted queue
preposted = []
for (src, tag), count in sorted(expected.items()):
    if tag % 2 == 0 and count:
        preposted.append((src, tag, comm.irecv(source=src, tag=tag)))
        remaining -= 1
for src, tag, request in preposted:
    obj = request.wait()
    assert obj[:3] == (src, tag, 0)
    take(src, tag, obj[3])
# 2. the rest with a mix of specific, ANY_TAG, ANY_SOURCE and fully wild receives
while remaining:
    left = [key for key, count in expected.items() if len(got[key]) < count]
    src, tag = rng.choice(left)
    mode = rng.randrange(4)
    source = src if mode in (0, 1) else MPI.ANY_SOURCE
    wanted = tag if mode in (0, 2) else MPI.ANY_TAG
    receive_one(source, wanted)
    remaining -= 1
MPI.Request.waitall(sends)

for key, count in expected.items():
    assert len(got[key]) == count, (key, len(got[key]), count)
digest = hashlib.sha256()
for key in sorted(got):
    for payload in got[key]:
        digest.update(f"{key}:{len(payload)}:".encode() + payload)
stats = comm.Get_queue_stats()["matching"]
comm.Barrier()
print(f"order ok {rank} {digest.hexdigest()[:16]} unexpected_ratio="
      f"{stats['unexpected_ratio']:.2f}")  # type: ignore[index]  # fmt: skip
