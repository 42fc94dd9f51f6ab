"""emucluster.pmi.session: the client's lock-step PMI-1 conversation against a scripted
process manager (the replies Hydra and Slurm's pmi2 plugin send, byte for byte)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emucluster.pmi.session import (
    Done,
    Maxes,
    PmiRefused,
    PmiSession,
    PmiUsageError,
    PortPlacement,
)
from emucluster.pmi.wire import MAX_LINE_BYTES, PmiProtocolError

INIT_REPLY = b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"


def ready() -> PmiSession:
    session = PmiSession()
    assert session.init() == b"cmd=init pmi_version=1 pmi_subversion=1\n"
    assert session.feed(INIT_REPLY) == Done((1, 1))
    assert session.state == "ready"
    return session


def test_a_whole_wire_up_as_the_bootstrap_runs_it() -> None:
    s = ready()
    assert s.get_maxes() == b"cmd=get_maxes\n"
    assert s.feed(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n") == Done(
        Maxes(256, 64, 1024)
    )
    assert s.get_my_kvsname() == b"cmd=get_my_kvsname\n"
    assert s.feed(b"cmd=my_kvsname kvsname=kvs_4242_0\n") == Done("kvs_4242_0")
    line = s.put("kvs_4242_0", "emucluster-nic-0", "127.0.0.1:40000")
    assert line == b"cmd=put kvsname=kvs_4242_0 key=emucluster-nic-0 value=127.0.0.1:40000\n"
    assert s.feed(b"cmd=put_result rc=0 msg=success\n") == Done(None)
    assert s.barrier_in() == b"cmd=barrier_in\n"
    assert s.feed(b"cmd=barrier_out\n") == Done(None)
    assert s.get("kvs_4242_0", "emucluster-nic-1") == (
        b"cmd=get kvsname=kvs_4242_0 key=emucluster-nic-1\n"
    )
    assert s.feed(b"cmd=get_result rc=0 msg=success value=127.0.0.1:40001\n") == Done(
        "127.0.0.1:40001"
    )
    assert s.finalize() == b"cmd=finalize\n"
    assert s.feed(b"cmd=finalize_ack\n") == Done(None)
    assert s.state == "finalized"


def test_a_reply_may_arrive_in_pieces() -> None:
    s = ready()
    s.barrier_in()
    for piece in (b"cmd=bar", b"rier_o", b"ut rc=0"):
        assert s.feed(piece) is None
        assert s.busy
    assert s.feed(b"\n") == Done(None)
    assert not s.busy


def test_the_pmi_port_handshake_comes_first() -> None:
    s = PmiSession()
    assert s.initack(3) == b"cmd=initack pmiid=3\n"
    assert s.feed(b"cmd=initack\ncmd=set size=4\n") is None
    assert s.feed(b"cmd=set rank=3\ncmd=set debug=0\n") == Done(PortPlacement(4, 3, 0))
    assert s.init()
    assert s.feed(INIT_REPLY) == Done((1, 1))


def test_a_non_zero_rc_is_a_refusal_and_the_session_goes_on() -> None:
    s = ready()
    s.get("kvs", "nobody-put-this")
    with pytest.raises(PmiRefused, match=r"rc=-1 \(key_nobody-put-this_not_found\)") as info:
        s.feed(b"cmd=get_result rc=-1 msg=key_nobody-put-this_not_found\n")
    assert info.value.rc == -1
    assert s.state == "ready"
    assert not s.busy
    s.barrier_in()
    assert s.feed(b"cmd=barrier_out\n") == Done(None)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b"cmd=put_result\n", "expected cmd=barrier_out"),
        (b"rc=0 cmd=barrier_out\n", "does not begin with cmd="),
        (b"cmd=barrier_out rc=zero\n", "not a number"),
        (b"cmd=barrier_out\ncmd=barrier_out\n", "unsolicited"),
        (b"x" * MAX_LINE_BYTES, "longer than"),
    ],
)
def test_a_reply_that_breaks_the_protocol_fails_the_session(reply: bytes, why: str) -> None:
    s = ready()
    s.barrier_in()
    with pytest.raises(PmiProtocolError, match=why):
        s.feed(reply)
    assert s.state == "failed"
    with pytest.raises(PmiUsageError):
        s.barrier_in()
    with pytest.raises(PmiProtocolError, match="already failed"):
        s.feed(b"cmd=barrier_out\n")


def test_a_line_nobody_asked_for_is_a_protocol_error() -> None:
    s = ready()
    with pytest.raises(PmiProtocolError, match="unsolicited"):
        s.feed(b"cmd=barrier_out\n")


def test_init_answered_with_another_version_is_refused() -> None:
    s = PmiSession()
    s.init()
    with pytest.raises(PmiProtocolError, match="version"):
        s.feed(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")


def test_maxes_without_its_fields_is_a_protocol_error() -> None:
    s = ready()
    s.get_maxes()
    with pytest.raises(PmiProtocolError, match="without kvsname_max"):
        s.feed(b"cmd=maxes rc=0\n")


def test_requests_out_of_order_are_the_callers_error() -> None:
    s = PmiSession()
    with pytest.raises(PmiUsageError, match="needs ready"):
        s.barrier_in()
    s = ready()
    s.get_my_kvsname()
    with pytest.raises(PmiUsageError, match="awaits its reply"):
        s.barrier_in()
    with pytest.raises(PmiUsageError):
        s.init()


def test_put_checks_the_managers_limits_and_the_words() -> None:
    s = ready()
    s.get_maxes()
    s.feed(b"cmd=maxes kvsname_max=16 keylen_max=8 vallen_max=8\n")
    with pytest.raises(PmiUsageError, match="key"):
        s.put("kvs", "k" * 8, "v")
    with pytest.raises(PmiUsageError, match="value"):
        s.put("kvs", "k", "v" * 8)
    with pytest.raises(PmiProtocolError, match="not allowed"):
        s.put("kvs", "k", "two words")
    assert not s.busy


def test_abort_expects_no_reply() -> None:
    s = ready()
    assert s.abort(7, "MPI_Abort by rank 3") == b"cmd=abort exitcode=7 msg=MPI_Abort_by_rank_3\n"
    assert s.state == "aborted"
    assert not s.busy


@given(st.lists(st.binary(min_size=1, max_size=40), max_size=8))
def test_any_reply_bytes_give_a_value_or_a_clear_error(chunks: list[bytes]) -> None:
    s = ready()
    s.get("kvs", "key")
    for chunk in chunks:
        try:
            s.feed(chunk)
        except (PmiProtocolError, PmiRefused, PmiUsageError):
            return
