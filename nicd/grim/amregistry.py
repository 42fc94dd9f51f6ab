"""The global active-message handler registry (GRIM 4.4.1, Fig 4.11): names -> cluster-wide
integer ids, served by one NIC of the job.

Requests and replies travel as AM_DATA messages to and from the registry NIC's
``NIC_PORT``; their payload is msgpack ``{"op": "sync" | "lookup", "req": id, "names": [..]}``
and the reply ``{"req": id, "table": {name: id, ...}}``. ``sync`` publishes names (assigning
ids to new ones) and answers with the whole table; ``lookup`` assigns nothing and answers with
the whole table too (a name not in it is not registered anywhere yet).

Invariants: an id, once given to a name, never changes and is never given to another name;
ids are 1..65535 in order of first publication (0 means "no handler" on the wire).
"""

from __future__ import annotations

import msgpack

from nicd.errors import BadPacket

__all__ = ["MAX_HANDLER_ID", "Registry", "decode_reply", "decode_request", "encode_reply",
           "encode_request"]  # fmt: skip

MAX_HANDLER_ID = 0xFFFF  # the 16-bit handler field of the data header


class Registry:
    """Name -> id assignments of one job."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.syncs = 0
        self.lookups = 0

    def publish(self, names: list[str]) -> dict[str, int]:
        """Assign ids to the names not yet known; return the whole table. Names past the
        16-bit id space are left out (the caller sees them missing)."""
        self.syncs += 1
        for name in names:
            if name not in self._ids and len(self._ids) < MAX_HANDLER_ID:
                self._ids[name] = len(self._ids) + 1
        return dict(self._ids)

    def table(self) -> dict[str, int]:
        """The whole table (a lookup)."""
        self.lookups += 1
        return dict(self._ids)

    def on_request(self, payload: bytes) -> bytes:
        """Serve one request payload; raise BadPacket if it is malformed."""
        op, req, names = decode_request(payload)
        table = self.publish(names) if op == "sync" else self.table()
        return encode_reply(req, table)

    def stats(self) -> dict[str, int]:
        """Counters, JSON-able."""
        return {"handlers": len(self._ids), "syncs": self.syncs, "lookups": self.lookups}


def encode_request(op: str, req: int, names: list[str]) -> bytes:
    """A ``sync`` or ``lookup`` request."""
    packed: bytes = msgpack.packb({"op": op, "req": req, "names": names}, use_bin_type=True)
    return packed


def decode_request(payload: bytes) -> tuple[str, int, list[str]]:
    """``(op, req, names)``; BadPacket if malformed."""
    try:
        obj = msgpack.unpackb(payload, raw=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise BadPacket("registry_request", str(exc)) from None
    if not isinstance(obj, dict):
        raise BadPacket("registry_request", "not a map")
    op, req, names = obj.get("op"), obj.get("req"), obj.get("names")
    if op not in ("sync", "lookup") or not isinstance(req, int) or not isinstance(names, list):
        raise BadPacket("registry_request", "bad fields")
    if not all(isinstance(n, str) for n in names):
        raise BadPacket("registry_request", "names must be strings")
    return op, req, names


def encode_reply(req: int, table: dict[str, int]) -> bytes:
    """The reply to request ``req``."""
    packed: bytes = msgpack.packb({"req": req, "table": table}, use_bin_type=True)
    return packed


def decode_reply(payload: bytes) -> tuple[int, dict[str, int]]:
    """``(req, table)``; BadPacket if malformed."""
    try:
        obj = msgpack.unpackb(payload, raw=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise BadPacket("registry_reply", str(exc)) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("req"), int):
        raise BadPacket("registry_reply", "bad fields")
    table = obj.get("table")
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in table.items()
    ):
        raise BadPacket("registry_reply", "bad table")
    return obj["req"], table
