"""Port over a socketpair with a scripted nicd: records in, events and sinks out."""

from __future__ import annotations

import pytest

from emucluster.port.client import McastChildDeadError, PortError, SendFailedError
from nicd import hostlink as hl
from nicd.hostlink import ErrorEvent, McastErrorEvent, RecvEvent, SentEvent
from tests.shells.nic import open_pair


def test_send_writes_a_send_request_and_flush_waits_for_its_sent() -> None:
    port, nic = open_pair(send_tokens=2)
    with port:
        handle = port.send(1, 2, b"hello", args=(1, 2, 3, 4))
        assert nic.requests() == [hl.SendReq(handle, 1, 2, b"hello", 1, 0, (1, 2, 3, 4))]
        assert (port.free_send_tokens, port.outstanding) == (1, 1)
        nic.tell(SentEvent(handle))
        port.flush(timeout=5.0)
        assert (port.free_send_tokens, port.outstanding) == (2, 0)


def test_a_send_without_a_free_token_waits_for_one_to_come_back() -> None:
    port, nic = open_pair(send_tokens=1)
    with port:
        first = port.send(1, 2, b"a")
        nic.tell(SentEvent(first))  # queued in the socket before the second send
        second = port.send(1, 2, b"b", timeout=5.0)
        assert second == first + 1
        assert [r.handle for r in nic.requests() if isinstance(r, hl.SendReq)] == [1, 2]


def test_a_send_times_out_when_no_token_comes_back() -> None:
    port, _nic = open_pair(send_tokens=1)
    with port:
        port.send(1, 2, b"a")
        with pytest.raises(TimeoutError, match="send token"):
            port.send(1, 2, b"b", timeout=0.02)


def test_multicast_and_multisend_share_the_token_accounting() -> None:
    port, nic = open_pair(send_tokens=2)
    with port:
        h1 = port.multicast(5, b"m", args=(1, 0, 0, 0))
        h2 = port.multisend([1, 2], 2, b"s")
        assert port.free_send_tokens == 0
        assert nic.requests() == [
            hl.McastSendReq(h1, 5, b"m", 0, (1, 0, 0, 0)),
            hl.MultiSendReq(h2, (1, 2), 2, b"s", 1, 0, (0, 0, 0, 0)),
        ]
        nic.tell(hl.SentBatch((h1, h2)))
        port.flush(timeout=5.0)
        assert port.free_send_tokens == 2


def test_recv_returns_messages_and_gives_receive_tokens_back_in_batches() -> None:
    port, nic = open_pair(receive_buffers=4, auto_replenish=True)
    with port:
        assert nic.requests() == [hl.ProvideReq(4)]
        nic.tell(RecvEvent(1, 2, b"one"), RecvEvent(1, 2, b"two"))
        assert port.recv(timeout=5.0).payload == b"one"
        assert port.recv(timeout=5.0).payload == b"two"
        assert nic.requests() == [hl.ProvideReq(1), hl.ProvideReq(1)]  # batch of 4 // 4


def test_recv_times_out_and_raises_send_failures() -> None:
    port, nic = open_pair()
    with port:
        with pytest.raises(TimeoutError):
            port.recv(timeout=0.02)
        handle = port.send(1, 2, b"x")
        nic.tell(ErrorEvent(handle, 1, "peer_dead"))
        with pytest.raises(SendFailedError) as failed:
            port.recv(timeout=5.0)
        assert failed.value.reason == "peer_dead"
        nic.tell(McastErrorEvent(3, 1, "dead"))
        with pytest.raises(McastChildDeadError):
            port.recv(timeout=5.0)


def test_wait_returns_the_next_event_or_none_after_the_timeout() -> None:
    port, nic = open_pair()
    with port:
        assert port.wait(0.02) is None
        nic.tell(RecvEvent(1, 2, b"x"))
        assert port.wait(5.0) == RecvEvent(1, 2, b"x")


def test_a_registered_sink_runs_while_the_port_drains_and_a_wait_sees_it() -> None:
    port, nic = open_pair()
    with port:
        done: dict[int, hl.NicvmDone] = {}
        port.register_sink(hl.NicvmDone, lambda r: done.setdefault(r.handle, r))
        assert not port.wait_until(lambda: 7 in done, port.waiter.clock() + 0.02)
        nic.tell(hl.NicvmDone(7, "ok", 3))
        assert port.wait_until(lambda: 7 in done, port.waiter.clock() + 5.0)
        assert done[7].result == 3
        assert port.poll() == []  # a sink's records are not events


def test_a_sink_may_answer_the_nic_from_inside_the_drain() -> None:
    port, nic = open_pair()
    with port:
        port.register_sink(hl.NicvmReport, lambda r: port.send_record(hl.NicvmListReq()))
        nic.tell(hl.NicvmReport("m", "fault"))
        assert port.pump(port.waiter.clock() + 5.0)
        assert nic.requests() == [hl.NicvmListReq()]


def test_a_refused_request_and_a_closed_nic_raise_port_error() -> None:
    port, nic = open_pair()
    with port:
        nic.tell(hl.Refused("bad group"))
        with pytest.raises(PortError, match="bad group"):
            port.poll()
        nic.sock.close()
        with pytest.raises(PortError, match="closed"):
            port.poll()


def test_register_memory_waits_for_the_nic_to_confirm() -> None:
    port, nic = open_pair()
    with port:
        nic.tell(hl.Registered(1))  # the answer is already on its way
        region = port.register_memory(100, timeout=5.0)
        assert (region.id, region.size, len(region.buf)) == (1, 100, 100)
        assert [type(r) for r in nic.requests()] == [hl.RegisterReq]
        port.deregister_memory(region)
        assert nic.requests() == [hl.DeregisterReq(1)]


def test_free_groups_sends_every_request_then_waits_once_for_all_answers() -> None:
    port, nic = open_pair()
    with port:
        nic.tell(hl.McastGroupOk(7), hl.McastGroupOk(5))  # answers in any order, queued first
        port.free_groups([5, 7])
        assert [r for r in nic.requests() if isinstance(r, hl.McastFreeReq)] == [
            hl.McastFreeReq(5),
            hl.McastFreeReq(7),
        ]
        assert port.state.groups_ok == set()  # a later request on these ids waits afresh
        nic.tell(hl.McastGroupOk(5))
        with pytest.raises(TimeoutError, match="freeing"):
            port.free_groups([5, 6], timeout=0.05)
