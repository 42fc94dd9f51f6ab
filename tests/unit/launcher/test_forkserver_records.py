"""The fork server's wire records: round trips, truncations, garbage (forkserver/records.py)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from launcher.forkserver.records import (
    BadRecord,
    Exited,
    Hello,
    Refused,
    Request,
    Started,
    decode_hello_untrusted,
    decode_report_untrusted,
    decode_request_untrusted,
    encode_hello,
    encode_report,
    encode_request,
)

PY = "/opt/py/bin/python"
REQ = Request([PY, "app.py", "x"], {"EMU_RANK": "3", "PATH": "/bin"}, "/work", [0, 1, 2, 9], [1])

texts = st.text(max_size=20)


@given(
    argv=st.lists(texts, min_size=1, max_size=5),
    env=st.dictionaries(texts, texts, max_size=5),
    cwd=texts.filter(bool),
    targets=st.lists(st.integers(0, 65535), unique=True, max_size=6),
    cpus=st.lists(st.integers(0, 65535), max_size=4),
)
def test_request_round_trips(
    argv: list[str], env: dict[str, str], cwd: str, targets: list[int], cpus: list[int]
) -> None:
    req = Request(argv, env, cwd, targets, cpus)
    assert decode_request_untrusted(encode_request(req), len(targets) + 1) == req


def test_request_needs_one_fd_per_target_plus_the_status_socket() -> None:
    data = encode_request(REQ)
    assert decode_request_untrusted(data, 5) == REQ
    for nfds in (0, 1, 4, 6):
        with pytest.raises(BadRecord, match="targets but"):
            decode_request_untrusted(data, nfds)


def test_every_truncation_of_a_request_is_a_bad_record() -> None:
    data = encode_request(REQ)
    for cut in range(len(data)):
        with pytest.raises(BadRecord):
            decode_request_untrusted(data[:cut], 5)
    with pytest.raises(BadRecord):
        decode_request_untrusted(data + b"\x00", 5)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (["req", [], {}, "/", [], []], "empty argv"),
        (["req", [PY, 1], {}, "/", [], []], "argv"),
        (["req", [PY], {"A": 1}, "/", [], []], "env"),
        (["req", [PY], {}, "", [], []], "cwd"),
        (["req", [PY], {}, "/", [-1], []], "target"),
        (["req", [PY], {}, "/", [True], []], "target"),
        (["req", [PY], {}, "/", [65536], []], "target"),
        (["req", [PY], {}, "/", [1, 1], []], "duplicate"),
        (["req", [PY], {}, "/", [], [-1]], "cpus"),
        (["req", [PY], {}, "/", [], [True]], "cpus"),
        (["req", [PY], {}, "/", [], [1 << 16]], "cpus"),
        (["req", [PY], {}, "/", [], "0-1"], "cpus"),
        (["req", [PY], {}, "/", []], "not a req"),
        (["started", 5], "not a req"),
        ({"req": 1}, "not a req"),
    ],
)
def test_bad_requests_are_bad_records(fields: object, match: str) -> None:
    data = msgpack.packb(fields)
    nfds = len(fields[4]) + 1 if isinstance(fields, list) and len(fields) > 4 else 1
    with pytest.raises(BadRecord, match=match):
        decode_request_untrusted(data, nfds)


@pytest.mark.parametrize(
    "report",
    [
        Started(4242),
        Refused("fork failed: [Errno 11]"),
        Exited(-9, 0.5, 0.25, 0.125),
        Exited(3, 0.0, 0, 0),
        Exited(0, 1.0, 0.5, None),  # run delay unknown
    ],
)
def test_reports_round_trip(report: Started | Refused | Exited) -> None:
    assert decode_report_untrusted(encode_report(report)) == report


@pytest.mark.parametrize(
    "fields",
    [
        ["started", 0],
        ["started", True],
        ["started", 1, 2],
        ["refused", 7],
        ["exited", 300, 0.0, 0.0, None],
        ["exited", 0, -1.0, 0.0, None],
        ["exited", 0, "1", 0.0, None],
        ["exited", 0, 0.0, 0.0],  # the run delay is missing
        ["exited", 0, 0.0, 0.0, -0.5],
        ["exited", 0, 0.0, 0.0, "0.5"],
        ["exited", 0, 0.0, 0.0, True],
        ["exited", 0, 0.0, 0.0, float("inf")],
        ["exited", 0, 0.0, 0.0, float("nan")],
        ["done", 1],
        [],
        "started",
    ],
)
def test_bad_reports_are_bad_records(fields: object) -> None:
    with pytest.raises(BadRecord):
        decode_report_untrusted(msgpack.packb(fields))


def test_every_truncation_of_a_report_is_a_bad_record() -> None:
    data = encode_report(Exited(-15, 1.5, 0.5, 0.25))
    for cut in range(len(data)):
        with pytest.raises(BadRecord):
            decode_report_untrusted(data[:cut])


def test_hello_round_trips_and_rejects_a_bad_pid() -> None:
    hello = Hello(77, PY, {"LANG": "C.UTF-8"}, ["/lib/py"], ["emucluster", "nicd"], ["/src"])
    assert decode_hello_untrusted(encode_hello(hello)) == hello
    with pytest.raises(BadRecord):
        decode_hello_untrusted(msgpack.packb(["hello", 0, PY, {}, [], [], []]))
    with pytest.raises(BadRecord):
        decode_hello_untrusted(encode_hello(hello)[:-3])


# -- what a fork may run --------------------------------------------------------------------
