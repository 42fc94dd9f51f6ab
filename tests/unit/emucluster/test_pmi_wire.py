"""emucluster.pmi.wire: one simple PMI-1 line (Flux RFC 13) parsed and written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emucluster.errors import EmuclusterError
from emucluster.pmi.wire import (
    MAX_LINE_BYTES,
    Message,
    PmiProtocolError,
    format_line,
    parse_line,
)

VISIBLE = st.characters(min_codepoint=33, max_codepoint=126)
KEYS = st.text(VISIBLE.filter(lambda c: c != "="), min_size=1, max_size=12).filter(
    lambda k: k != "cmd"
)
VALUES = st.text(VISIBLE, max_size=24)
MESSAGES = st.builds(
    Message,
    st.text(VISIBLE.filter(lambda c: c != "="), min_size=1, max_size=16),
    st.dictionaries(KEYS, VALUES, max_size=6),
)


def test_the_lines_of_the_rfc_and_of_hydra() -> None:
    assert format_line(Message("init", {"pmi_version": "1", "pmi_subversion": "1"})) == (
        b"cmd=init pmi_version=1 pmi_subversion=1\n"
    )
    reply = parse_line(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n")
    assert reply == Message(
        "response_to_init", {"pmi_version": "1", "pmi_subversion": "1", "rc": "0"}
    )
    maxes = parse_line(b"cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n")
    assert maxes.get("vallen_max") == "1024"
    assert maxes.get("absent") is None
    # extra white space, no newline, a value with '=' in it, keys in any order
    got = parse_line(b"cmd=get_result  \tvalue=a=b rc=0")
    assert got == Message("get_result", {"value": "a=b", "rc": "0"})
    assert parse_line(b"cmd=get_result rc=0 value=\n").get("value") == ""


@given(MESSAGES)
def test_what_is_written_parses_back(message: Message) -> None:
    line = format_line(message)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert parse_line(line) == Message(message.cmd, dict(message.fields))


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_the_protocol_error(data: bytes) -> None:
    try:
        message = parse_line(data)
    except PmiProtocolError as exc:
        assert isinstance(exc, EmuclusterError)  # noqa: PT017 (a property: no single call raises)
        return
    assert message.cmd
    assert parse_line(format_line(message)) == message


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"", "empty line"),
        (b"\n", "empty line"),
        (b"key=value cmd=get\n", "does not begin with cmd="),
        (b"cmd=\n", "empty command"),
        (b"cmd=a=b\n", "with '='"),
        (b"cmd=get novalue\n", "is not key=value"),
        (b"cmd=get =v\n", "is not key=value"),
        (b"cmd=get key=a key=b\n", "repeated"),
        (b"cmd=get key=\xff\n", "not an ASCII line"),
        (b"cmd=get key=a\x00\n", "control characters"),
        (b"cmd=get key=" + b"v" * MAX_LINE_BYTES + b"\n", "exceeds"),
    ],
)
def test_a_malformed_line_is_a_clear_error(line: bytes, why: str) -> None:
    with pytest.raises(PmiProtocolError, match=why):
        parse_line(line)


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (Message("get", {"ke=y": "v"}), "not allowed"),
        (Message("put", {"value": "two words"}), "not allowed"),
        (Message("put", {"value": "line\n"}), "not allowed"),
        (Message("put", {"": "v"}), "empty"),
        (Message("put", {"cmd": "x"}), "named cmd"),
        (Message("put", {"value": "v" * MAX_LINE_BYTES}), "exceeds"),
    ],
)
def test_what_cannot_be_written_is_refused(message: Message, why: str) -> None:
    with pytest.raises(PmiProtocolError, match=why):
        format_line(message)
