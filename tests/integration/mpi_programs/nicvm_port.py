"""NICVM at the GM-port level (no MPI): persistent modules outlive their port, the NIC echo
module answers without its host, a remote upload is refused. Run with emurun -np 2."""

from __future__ import annotations

import os

from emubench.nicvm_rank import ECHO
from emucluster.nicvm import Nicvm
from emucluster.port.client import Port
from nicd.link.wire import MsgType
from nicd.nicvm.modules import NOOP

PORT = 5


def main() -> None:
    me = int(os.environ["EMU_RANK"])
    with Port.open(port=7) as first:
        vm = Nicvm(first)
        vm.load("keep", NOOP, persist=True)
        vm.load("temp", NOOP)
        listing = vm.modules()
        assert "keep" in listing, listing  # membership by name
        assert listing["temp"]["name"] == "temp", listing
    port = Port.open(port=PORT)
    vm = Nicvm(port)
    names = set(vm.modules())
    assert "keep" in names, names
    assert "temp" not in names, names
    vm.load("echo", ECHO)
    # both sides ready before any NICVM traffic
    other = 1 - me
    port.send(other, PORT, b"ready")
    assert port.recv(timeout=60).payload == b"ready"
    if me == 0:
        for size in (0, 10, 5000):
            vm.send(1, "echo", bytes(size), root=0, args=(size, 0, 0, 0))
            event = port.recv(timeout=30)
            assert event.msg_type == MsgType.NICVM_DATA, event
            assert event.args[0] == size, event
            assert len(event.payload) == size
        # a module upload from another node is refused (nicd default)
        port.send(1, PORT, b"\x93\xa3bad\xa0\xc2", msg_type=MsgType.NICVM_SOURCE)
        port.flush(timeout=30)
        port.send(1, PORT, b"done")
    else:
        assert port.recv(timeout=60).payload == b"done"  # node 1's host saw no echo packet
        assert "bad" not in vm.modules()
        vm.purge("keep")
    port.flush(timeout=30)
    print(f"port ok {me}", flush=True)
    port.close()


if __name__ == "__main__":
    main()
