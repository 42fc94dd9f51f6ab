"""AM reply storm between two nodes: every request handler replies several times, both sides
inject at once; with a tiny NIC queue (few send tokens) the replies overflow to the host
queue and everything still arrives (no Fig 4.12 deadlock)."""

from __future__ import annotations

import json
import sys
import time

from emucluster import am

requests, replies_each = int(sys.argv[1]), int(sys.argv[2])
threaded = sys.argv[3:] == ["thread"]  # handlers run by the polling thread only
ep = am.endpoint()
rank, peer = ep.rank, 1 - ep.rank
seen: list[int] = []
order_ok = True


def on_request(src: int, args: tuple[int, int, int, int], payload: bytes) -> None:
    for k in range(replies_each):
        am.send(src, "reply", (args[0], k, 0, 0), payload)


def on_reply(src: int, args: tuple[int, int, int, int], payload: bytes) -> None:
    global order_ok
    index = args[0] * replies_each + args[1]
    if seen and index != seen[-1] + 1:
        order_ok = False
    seen.append(index)


am.register("request", on_request)
am.register("reply", on_reply)
am.barrier()
for i in range(requests):
    am.send(peer, "request", (i, 0, 0, 0), b"x" * (i % 50))
if threaded:
    am.start_polling()
    deadline = time.monotonic() + 120
    while len(seen) < requests * replies_each and time.monotonic() < deadline:
        time.sleep(0.001)  # no explicit poll: the thread runs the handlers
    am.stop_polling()
else:
    ep.wait_for(lambda: len(seen) == requests * replies_each, 120, "replies")
ep.flush()
am.barrier()
stats = ep.stats()
print(
    "RESULT "
    + json.dumps(
        {
            "rank": rank,
            "replies": len(seen),
            "in_order": order_ok,
            "overflow": stats["overflow"],
            "counts": stats["counts"],
            "tokens": ep.port.free_send_tokens,
        }
    ),
    flush=True,
)
