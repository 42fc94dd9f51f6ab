"""The AM handler registry and its codec."""

from __future__ import annotations

import msgpack
import pytest

from nicd.errors import BadPacket
from nicd.grim.amregistry import (
    MAX_HANDLER_ID,
    Registry,
    decode_reply,
    decode_request,
    encode_request,
)


def test_ids_are_stable_and_assigned_in_publication_order() -> None:
    r = Registry()
    assert r.publish(["x", "y"]) == {"x": 1, "y": 2}
    assert r.publish(["y", "z", "x"]) == {"x": 1, "y": 2, "z": 3}
    assert r.table() == {"x": 1, "y": 2, "z": 3}
    assert r.stats() == {"handlers": 3, "syncs": 2, "lookups": 1}


def test_requests_round_trip_and_lookups_assign_nothing() -> None:
    r = Registry()
    r.publish(["a"])
    req, table = decode_reply(r.on_request(encode_request("lookup", 9, ["b"])))
    assert (req, table) == (9, {"a": 1})
    assert decode_request(encode_request("sync", 3, ["q"])) == ("sync", 3, ["q"])


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1",
        msgpack.packb([1]),
        msgpack.packb({"op": "drop", "req": 1, "names": []}),
        msgpack.packb({"op": "sync", "req": "1", "names": []}),
        msgpack.packb({"op": "sync", "req": 1, "names": [1]}),
    ],
)
def test_malformed_requests_raise_bad_packet(payload: bytes) -> None:
    with pytest.raises(BadPacket):
        Registry().on_request(payload)


def test_malformed_replies_raise_bad_packet() -> None:
    for payload in (b"\xc1", msgpack.packb({"req": 1, "table": {"a": "b"}}), msgpack.packb(3)):
        with pytest.raises(BadPacket):
            decode_reply(payload)


def test_the_id_space_is_bounded() -> None:
    r = Registry()
    r._ids = {f"n{i}": i + 1 for i in range(MAX_HANDLER_ID)}
    assert "extra" not in r.publish(["extra"])
