"""Progress over two socketpairs: one MPI message from `Progress.send` to the peer's
`Progress.recv`, the NICs scripted by the test (each SEND request becomes the peer's RECV)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from emucluster.p2p.protocol import P2P, Outcome, SendState
from emucluster.port.progress import MPI_PORT, DeadlockError, Progress
from nicd import hostlink as hl
from nicd.hostlink import ErrorEvent, RecvEvent, RmWriteEvent, SentEvent
from nicd.link.wire import MsgType
from tests.shells.nic import ScriptedNic, open_pair

if TYPE_CHECKING:
    from collections.abc import Callable

ROUNDS = 50  # exchanges before a test gives up (fails)


class Pair:
    """Rank 0 and rank 1, each a Progress on its own Port and scripted NIC."""

    def __init__(self) -> None:
        self.engines: list[Progress] = []
        self.nics: list[ScriptedNic] = []
        for node in (0, 1):
            port, nic = open_pair(send_tokens=8, node_id=node, num_nodes=2)
            self.engines.append(Progress(port, P2P(node, 2, eager_limit=64), use_rm=False))
            self.nics.append(nic)
        self.messages = 0
        self.abort_type: int | None = None
        """Messages of this type are aborted by the receiving NIC: ERROR, never delivered."""

    def carry(self) -> int:
        """Deliver what each host asked its NIC to send; the sender gets SENT."""
        carried = 0
        for src, nic in enumerate(self.nics):
            for req in nic.requests():
                if isinstance(req, hl.SendReq):
                    assert req.dst_port == MPI_PORT
                    if req.msg_type == self.abort_type:
                        nic.tell(ErrorEvent(req.handle, req.dst_node, "aborted"))
                        continue
                    self.nics[req.dst_node].tell(
                        RecvEvent(
                            src, MPI_PORT, req.payload, req.msg_type, req.am_handler, req.args
                        )
                    )
                    nic.tell(SentEvent(req.handle))
                    carried += 1
        self.messages += carried
        return carried

    def run_until(self, done: object) -> None:
        """Carry and make progress until ``done()``; fails after ROUNDS."""
        assert callable(done)
        for _ in range(ROUNDS):
            if done():
                return
            self.carry()
            for engine in self.engines:
                engine.progress()
        pytest.fail(f"not done after {ROUNDS} rounds")

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


def test_an_eager_message_walks_from_send_to_the_peers_recv() -> None:
    pair = Pair()
    try:
        sender, receiver = pair.engines
        recv = receiver.recv(7, 0, 3, 0, None)
        send = sender.send(7, 0, 3, 1, b"hello")
        assert pair.carry() == 1
        assert receiver.wait_for(lambda: recv.done, timeout=5.0)
        assert recv.data == b"hello"
        assert sender.wait_for(lambda: send.done, timeout=5.0)
        assert sender.port.free_send_tokens == 8  # SENT gave the token back
    finally:
        pair.close()


def test_a_rendezvous_message_goes_rts_cts_data_as_port_messages() -> None:
    pair = Pair()
    try:
        sender, receiver = pair.engines
        payload = bytes(range(256)) * 2  # above the 64 B eager limit
        send = sender.send(1, 0, 9, 1, payload)
        recv = receiver.recv(1, 0, 9, 0, None)
        pair.run_until(lambda: recv.done and send.done)
        assert bytes(recv.data or b"") == payload
        assert pair.messages == 3  # RTS, CTS, one GM_DATA chunk
    finally:
        pair.close()


def test_a_rendezvous_send_whose_chunk_the_receiver_aborted_fails_itself() -> None:
    """The chunk's ERROR (NACK ABORTED at the NIC) fails the send request, naming why; it is
    never completed by the CTS alone."""
    pair = Pair()
    pair.abort_type = MsgType.GM_DATA
    try:
        sender, receiver = pair.engines
        send = sender.send(1, 0, 9, 1, bytes(300))
        receiver.recv(1, 0, 9, 0, None)
        pair.run_until(lambda: send.done)
        assert send.outcome is Outcome.PEER_FAILED
        assert send.state is SendState.FAILED
        assert send.reason == "aborted"
        assert sender.dead == {1: "aborted"}  # later operations with node 1 fail too
    finally:
        pair.close()


def test_probe_sees_an_unexpected_message_and_cancel_withdraws_a_receive() -> None:
    pair = Pair()
    try:
        sender, receiver = pair.engines
        sender.send(2, 0, 5, 1, b"abc")
        pair.carry()
        assert receiver.wait_for(lambda: receiver.probe(2, 0, 5) is not None, timeout=5.0)
        info = receiver.probe(2, 0, 5)
        assert info is not None
        assert (info.source, info.tag, info.count) == (0, 5, 3)
        posted = receiver.recv(2, 0, 6, 0, None)
        assert receiver.cancel(posted)
        assert posted.done
    finally:
        pair.close()


def test_inject_feeds_matching_like_an_arrival() -> None:
    pair = Pair()
    try:
        sender, receiver = pair.engines
        sender.send(4, 0, 1, 1, b"xyz")
        req = pair.nics[0].requests()[0]
        assert isinstance(req, hl.SendReq)
        recv = receiver.recv(4, 0, 1, 0, None)
        receiver.inject(0, req.msg_type, req.args, req.payload)
        assert recv.done
        assert recv.data == b"xyz"
    finally:
        pair.close()


def test_an_eager_send_may_travel_as_another_packet_type() -> None:
    pair = Pair()
    try:
        pair.engines[0].send(4, 0, 1, 1, b"up", eager_as=(MsgType.AB_COLL, 0x8000))
        (req,) = pair.nics[0].requests()
        assert isinstance(req, hl.SendReq)
        assert (req.msg_type, req.am_handler) == (MsgType.AB_COLL, 0x8000)
    finally:
        pair.close()


def test_wait_for_times_out_and_a_singleton_cannot_wait() -> None:
    pair = Pair()
    try:
        assert not pair.engines[1].wait_for(lambda: False, timeout=0.02)
    finally:
        pair.close()
    alone = Progress(None, P2P(0, 1))
    with pytest.raises(DeadlockError):
        alone.wait_for(lambda: False, timeout=1.0)


def test_rendezvous_data_for_an_unknown_region_is_a_counted_drop() -> None:
    pair = Pair()
    try:
        receiver = pair.engines[1]
        pair.nics[1].tell(RmWriteEvent(0, MPI_PORT, 42, 0, 4, (42, 0, 1, 0)))
        assert receiver.wait_for(lambda: receiver.events > 0, timeout=5.0)
        stats = receiver.stats()
        assert stats["dropped"] == {"rm_unknown_region": 1}
    finally:
        pair.close()


def test_a_blocking_wait_reads_the_empty_socket_only_before_it_sleeps() -> None:
    """Issue 17: a wait that sleeps once reads the socket it found empty once (the poll that
    starts the wait; the pump before it sleeps knows it is empty), then once more when woken,
    up to the record that brought the message it waits for, and not again to find it empty
    (issue 17's loop read it empty twice, the loop before four times)."""
    pair = Pair()
    try:
        sender, receiver = pair.engines
        port = receiver.port
        port.wait_policy = "block"
        drains: list[int] = []
        drain = port._drain

        def counted(*, stop_at_message: bool = False) -> int:
            got = drain(stop_at_message=stop_at_message)
            drains.append(got)
            if drains.count(0) == 1:  # the message arrives only now: the wait must sleep
                pair.carry()
            return got

        port._drain = counted  # type: ignore[method-assign]
        recv = receiver.recv(7, 0, 3, 0, None)
        sender.send(7, 0, 3, 1, b"late")
        assert receiver.wait_for(lambda: recv.done, timeout=10.0)
        assert recv.data == b"late"
        assert drains == [0, 1], drains
    finally:
        pair.close()


class _NestedDrain:
    """A nonblocking collective's step that waits on its NIC inside the progress engine (as
    nic-mcast's group posting does): once ``trigger`` completed, the NIC answers with the
    message ``late`` as well, and the nested wait reads it into the port's queue."""

    def __init__(
        self, engine: Progress, nic: ScriptedNic, trigger: object, late: RecvEvent
    ) -> None:
        self.engine, self.nic, self.trigger, self.late = engine, nic, trigger, late
        self.fired = False

    def advance(self) -> bool:
        if self.fired or not self.trigger.done:  # type: ignore[attr-defined]
            return self.fired
        self.fired = True
        self.nic.tell(self.late)
        assert self.engine.port.pump(time.monotonic() + 5.0)  # queued, not handled
        return True


def test_a_message_read_by_a_nested_wait_is_not_left_queued_while_the_engine_sleeps() -> None:
    """The nic-mcast Ibcast hang: a step run by the engine waited on the NIC, which read the
    broadcast into the port's queue; the engine then slept on the empty socket for ever."""
    port, nic = open_pair(send_tokens=8, node_id=1, num_nodes=2)
    engine = Progress(port, P2P(1, 2, eager_limit=64), use_rm=False)
    try:
        first = engine.recv(7, 0, 1, 0, None)
        second = engine.recv(7, 0, 2, 0, None)
        late = RecvEvent(0, MPI_PORT, b"late", MsgType.MPI_EAGER, 0, (7, 0, 2, 1))
        engine.add(_NestedDrain(engine, nic, first, late))
        slept_with_events_queued = []
        sleep = port.waiter.wait

        def watched_sleep(fileno: int, take: Callable[[], int], deadline: float | None) -> bool:
            slept_with_events_queued.append(port.state.has_events())
            return sleep(fileno, take, deadline)

        port.waiter.wait = watched_sleep  # type: ignore[method-assign]
        early = RecvEvent(0, MPI_PORT, b"first", MsgType.MPI_EAGER, 0, (7, 0, 1, 0))
        timer = threading.Timer(0.2, nic.tell, (early,))  # arrives while the engine sleeps
        timer.start()
        try:
            assert engine.wait_for(lambda: second.done, timeout=10.0)
        finally:
            timer.join()
        assert (first.data, second.data) == (b"first", b"late")
        assert not any(slept_with_events_queued)  # the bug: slept until the deadline
    finally:
        engine.close()
