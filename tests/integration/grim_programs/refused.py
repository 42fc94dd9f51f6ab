"""Every refused remote-memory address: the initiator gets RMError with the reason, and not a
byte of the target's registered memory changes."""

from __future__ import annotations

import json

from emucluster import am, rm
from emucluster.grim.amcore import OutMsg
from emucluster.grim.rmalloc import SEGMENT_BYTES
from nicd.hostlink.grim import READ_META
from nicd.link.wire import MsgType

ep = am.endpoint()
rank = ep.rank
handles: list[rm.Handle] = []
state = {"done": False}
am.register(
    "handles",
    lambda s, a, p: handles.extend(rm.Handle.unpack(p[i : i + 18]) for i in range(0, len(p), 18)),
)
am.register("done", lambda s, a, p: state.__setitem__("done", True))
am.barrier()
result: dict[str, object] = {"rank": rank}
if rank == 1:
    guard1, a, guard2 = rm.alloc(128), rm.alloc(250), rm.alloc(128)
    dyn = rm.alloc(256, static=False)
    freed = rm.alloc(64)
    for blk, fill in ((guard1, 0x11), (a, 0xAA), (guard2, 0x22), (dyn, 0xDD)):
        blk.buf[:] = bytes([fill]) * blk.nbytes
    am.send(0, "handles", payload=b"".join(b.handle.pack() for b in (a, dyn, freed)))
    rm.free(freed)
    segments = [r for r in ep._segments.values()]
    before = [bytes(r.buf) for r in segments]
    am.barrier()  # rank 0 starts only after the free
    ep.wait_for(lambda: state["done"], 120, "rank 0's attempts")
    result["unchanged"] = [bytes(r.buf) == b for r, b in zip(segments, before, strict=True)]
else:
    ep.wait_for(lambda: len(handles) == 3, 60, "handles")
    a, dyn, freed = handles
    am.barrier()
    nowhere = a._replace(vaddr=0x0F00_0000)
    cases = {
        "v_never_allocated": lambda: rm.write(1, nowhere, 0, b"x"),
        "v_freed_block": lambda: rm.write(1, freed, 0, b"x" * 8),
        "v_past_end": lambda: rm.write(1, a._replace(size=a.size + 64), a.size - 8, b"x" * 16),
        "v_in_padding": lambda: rm.write(1, a._replace(size=a.size + 6), a.size + 2, b"x"),
        "v_past_end_dynamic": lambda: rm.write(1, dyn._replace(size=512), 200, b"x" * 100),
        "v_bad_notify": lambda: rm.write(1, a, 0, b"x", notify=(nowhere, 0, 5)),
        "v_notify_past_end": lambda: rm.write(
            1, a, 0, b"x", notify=(a._replace(size=a.size + 8), a.size - 2, 5)
        ),
        "p_no_segment": lambda: rm.write(1, a._replace(segment=999), 0, b"x", physical=True),
        "p_past_segment": lambda: rm.write(
            1, a._replace(offset=SEGMENT_BYTES - 8, size=64), 0, b"x" * 16, physical=True
        ),
        "p_bad_notify": lambda: rm.write(
            1, a, 0, b"x", physical=True, notify=(a._replace(segment=999), 0, 1)
        ),
        "rv_never_allocated": lambda: rm.read(1, nowhere, 0, 8, local),
        "rv_past_end": lambda: rm.read(1, a._replace(size=a.size + 64), a.size - 8, 16, local),
        "rv_freed_block": lambda: rm.read(1, freed, 0, 8, local),
        "local_past_handle": lambda: rm.write(1, a, a.size - 1, b"xy"),
        "local_negative_offset": lambda: rm.write(1, a, -1, b"x"),
        "local_wrong_node": lambda: rm.write(0, a, 0, b"x"),
        "local_read_into_remote": lambda: rm.read(1, a, 0, 8, into=fake_local),
    }
    local = rm.alloc(256)
    fake_local = rm.Block(a, memoryview(bytearray(a.size)), local.placement)
    statuses: dict[str, str] = {}
    for name, attempt in cases.items():
        try:
            attempt()
            statuses[name] = "accepted"
        except rm.RMError as exc:
            statuses[name] = exc.status
    # A reply address that is not registered memory at the reader: refused by the reader's
    # own NIC (bad_reply). The library checks this before sending, so go around it.
    request = ep._request("read")
    args = (a.vaddr, 8, 0x0F00_0000, request.req_id)
    ep._submit(OutMsg(1, a.channel, MsgType.RM_READ, READ_META.pack(0, 0), 0, args, request))
    try:
        request.wait()
        statuses["rv_reply_unregistered"] = "accepted"
    except rm.RMError as exc:
        statuses["rv_reply_unregistered"] = exc.status
    # A valid write still works afterwards on the same stream.
    rm.write(1, a, 0, b"ok")
    rm.read(1, a, 0, 2, local)
    statuses["valid_after"] = bytes(local.buf[:2]).decode()
    rm.write(1, a, 0, b"\xaa\xaa")
    result["statuses"] = statuses
    am.send(1, "done")
ep.flush()
am.barrier()
print("RESULT " + json.dumps(result), flush=True)
