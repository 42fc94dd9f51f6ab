"""A target host that never enters the library while the NIC needs it: rank 1 hands out a
dynamic block (the NIC must ask it for the translation) and then computes in plain Python,
watching the block's memory itself, until rank 0's remote write lands. Only the NIC's signal
(SIGUSR1 after the upcall, answered from the handler) lets the write complete.

Then rank 1 waits in ``Endpoint.wait_for`` on memory that a plain RM write (no notify word)
fills a while later, with nothing else to tell this host: the wait must wake from the NIC's
report of the landed write (``RmWatch``), there is no re-check timer."""

from __future__ import annotations

import json
import struct
import time

from emucluster import am, rm

LIMIT_S = 30.0
ep = am.endpoint()
rank = ep.rank
handles: list[rm.Handle] = []
am.register("handle", lambda src, args, payload: handles.append(rm.Handle.unpack(payload)))
am.barrier()
result: dict[str, object] = {"rank": rank}
if rank == 1:
    block = rm.alloc(64, static=False)
    am.send(0, "handle", payload=block.handle.pack())
    ep.flush()
    buf = block.buf
    end = time.monotonic() + LIMIT_S
    spins = 0
    while int.from_bytes(buf[0:4], "little") == 0 and time.monotonic() < end:
        spins += 1  # computing: no call into emucluster
    result["seen"] = int.from_bytes(buf[0:4], "little")
    result["upcalls"] = ep.kernel.upcalls
    result["signal_drains"] = ep.counts["signal_drains"]
    result["signals"] = ep.signals
else:
    ep.wait_for(lambda: bool(handles), 60, "the handle")
    time.sleep(0.5)  # rank 1 is computing by now, not flushing its send inside the library
    try:
        rm.iwrite(1, handles[0], 0, struct.pack("<I", 7)).wait(LIMIT_S + 10)
        result["write"] = "ok"
    except Exception as exc:  # the result says what went wrong
        result["write"] = repr(exc)
am.barrier()
if rank == 1:
    try:
        ep.wait_for(lambda: int.from_bytes(block.buf[4:8], "little") == 9, 20, "plain write")
        result["plain_wait"] = "ok"
    except TimeoutError as exc:
        result["plain_wait"] = repr(exc)
    result["landed"] = ep.kernel.landed
else:
    time.sleep(0.5)  # rank 1 is asleep in its wait by now
    rm.write(1, handles[0], 4, struct.pack("<I", 9))
am.barrier()
print("RESULT " + json.dumps(result), flush=True)
