"""Remote memory checked byte for byte: rank 0 writes random data at random offsets into rank
1's blocks (RM-V and RM-P, with and without notify words), reads random ranges back (RM-RV),
and both sides compare with a mirror; dynamic (non-static) blocks exercise translation misses,
hits and evictions."""

from __future__ import annotations

import hashlib
import json
import random
import sys

from emucluster import am, rm

seed, rounds = int(sys.argv[1]), int(sys.argv[2])
ep = am.endpoint()
rank = ep.rank
rng = random.Random(seed)
SIZES = [1, 7, 64, 1000, 4096, 5000, 70000]  # > MTU: fragmented
peer_handles: list[rm.Handle] = []
done = {"hash": "", "flag": False}


def on_handles(src: int, args: tuple[int, int, int, int], payload: bytes) -> None:
    for i in range(0, len(payload), 18):
        peer_handles.append(rm.Handle.unpack(payload[i : i + 18]))


def on_done(src: int, args: tuple[int, int, int, int], payload: bytes) -> None:
    done["hash"], done["flag"] = payload.decode(), True


am.register("handles", on_handles)
am.register("done", on_done)
am.barrier()
result: dict[str, object] = {"rank": rank}
if rank == 1:
    # 4 static blocks, then 20 dynamic ones (more than the NIC's 16 dynamic entries).
    blocks = [rm.alloc(s) for s in SIZES[:4]] + [rm.alloc(4096, static=False) for _ in range(20)]
    big = rm.alloc(SIZES[-1])
    blocks.append(big)
    am.send(0, "handles", payload=b"".join(b.handle.pack() for b in blocks))
    notify = rm.alloc(64)
    am.send(0, "handles", payload=notify.handle.pack())
    ep.wait_for(lambda: done["flag"], 300, "rank 0's writes")
    digest = hashlib.sha256(b"".join(bytes(b.buf) for b in blocks)).hexdigest()
    result["match"] = digest == done["hash"]
    result["notify_words"] = [notify.word(4 * i) for i in range(4)]
    xlate = ep.nic_stats()["grim"]["xlate"][str(ep.channel)]  # type: ignore[index]
    result["xlate"] = xlate
    result["upcalls"] = ep.kernel.upcalls
else:
    ep.wait_for(lambda: len(peer_handles) == 4 + 20 + 1 + 1, 60, "handles")
    notify_h = peer_handles.pop()
    mirror = [bytearray(h.size) for h in peer_handles]
    local = rm.alloc(SIZES[-1])
    reads_ok = writes = reads = 0
    last_notify = [0] * 4
    for i in range(rounds):
        b = rng.randrange(len(peer_handles))
        h = peer_handles[b]
        n = rng.randint(1, h.size)
        off = rng.randint(0, h.size - n)
        if rng.random() < 0.7:
            data = rng.randbytes(n)
            physical = rng.random() < 0.4
            word = rng.randrange(4)
            notify = (notify_h, 4 * word, i + 1) if rng.random() < 0.5 else None
            rm.write(1, h, off, data, physical=physical, notify=notify)
            mirror[b][off : off + n] = data
            if notify:
                last_notify[word] = i + 1
            writes += 1
        else:
            into_off = rng.randint(0, local.nbytes - n)
            rm.read(1, h, off, n, local, into_off, notify=(local.handle, 0, 0))
            reads_ok += bytes(local.buf[into_off : into_off + n]) == mirror[b][off : off + n]
            reads += 1
    # A final full read-back of every block.
    full_ok = True
    for b, h in enumerate(peer_handles):
        rm.read(1, h, 0, h.size, local)
        full_ok &= bytes(local.buf[: h.size]) == mirror[b]
    am.send(1, "done", payload=hashlib.sha256(b"".join(mirror)).hexdigest().encode())
    result.update(
        writes=writes, reads=reads, reads_ok=reads_ok, full_ok=full_ok, expected_notify=last_notify
    )
ep.flush()
am.barrier()
print("RESULT " + json.dumps(result), flush=True)
