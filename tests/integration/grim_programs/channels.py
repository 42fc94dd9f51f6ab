"""Logical channels at the API, under injected loss: channel 4's stream into rank 1 is held
back (its endpoint does not poll, so its NIC refuses with NO_BUFFER NACKs and the sender rolls
back), while channel 5 delivers everything in order meanwhile; then channel 4 catches up, in
order. One channel's NACKs never roll back another's (GRIM 4.3.2)."""

from __future__ import annotations

import json
import sys
import time

from emucluster import am
from emucluster.grim import Endpoint

n4, n5 = int(sys.argv[1]), int(sys.argv[2])
ep = am.endpoint()
rank = ep.rank
slow = Endpoint(channel=4, receive_buffers=2)
fast = Endpoint(channel=5)
got4: list[int] = []
got5: list[int] = []
slow.register("m", lambda s, a, p: got4.append(a[0]))
fast.register("m", lambda s, a, p: got5.append(a[0]))
slow.sync()
fast.sync()
am.barrier()
result: dict[str, object] = {"rank": rank, "channels": [slow.channel, fast.channel]}
if rank == 0:
    for i in range(n4):
        slow.send(1, "m", (i, 0, 0, 0), b"s" * 100)
    time.sleep(0.2)  # channel 4 is refused and rolling back by now
    for i in range(n5):
        fast.send(1, "m", (i, 0, 0, 0), b"f" * 100)
    fast.flush(120)
    result["ch4_outstanding_when_ch5_done"] = slow.port.outstanding
    am.barrier()  # rank 1 saw all of channel 5 before draining channel 4
    slow.flush(120)
    nic = ep.nic_stats()
    result["nacks_received"] = nic["transport"]["nacks_received"]  # type: ignore[index]
    result["retransmissions"] = nic["transport"]["retransmissions"]  # type: ignore[index]
    result["dropped_by_faults"] = nic["faults"]["dropped"]  # type: ignore[index]
else:
    fast.wait_for(lambda: len(got5) == n5, 120, "channel 5")
    # Channel 4 not polled yet: nothing of it has run.
    result["ch4_before"] = len(got4)
    result["ch5_in_order"] = got5 == list(range(n5))
    am.barrier()
    slow.wait_for(lambda: len(got4) == n4, 120, "channel 4")
    result["ch4_in_order"] = got4 == list(range(n4))
    nic = ep.nic_stats()
    result["nacks_sent"] = nic["transport"]["nacks_sent"]  # type: ignore[index]
am.barrier()
slow.close()
fast.close()
print("RESULT " + json.dumps(result), flush=True)
